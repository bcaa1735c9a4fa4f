/* Storage refcounts and poison. Who frees a storage, and where, is the
 * engine's business (runtime/storage.c): the last release calls the
 * function the engine stored in the struct when it made it. */
#include <stdlib.h>
#include <string.h>

#include "core/host_alloc.h"
#include "core/tensor.h"

void core_storage_retain(core_storage *s) {
  /* relaxed: the caller holds a reference */
  atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
}

void core_storage_release(core_storage *s) {
  /* acq_rel: every use of s happens-before whatever frees it */
  if (atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1)
    return;
  s->on_last_release(s);
}

core_poison core_poison_no_memory = {
    DT_ERR_OUT_OF_MEMORY,
    "an op failed and the host had no memory left to record its error"};

void core_poison_free(core_poison *p) {
  if (p != &core_poison_no_memory) free(p);
}

void core_storage_set_poison(core_storage *s, dt_status st, const char *msg) {
  if (!msg) msg = "execution failed";
  size_t n = strlen(msg);
  core_poison *p = core_host_malloc(sizeof *p + n + 1);
  if (p) {
    char *text = (char *)(p + 1);
    memcpy(text, msg, n + 1);
    p->status = st;
    p->message = text;
  } else { /* never leave the output unmarked: it holds no value */
    p = &core_poison_no_memory;
  }
  core_poison *expected = NULL;
  /* release: the message is written before it is visible; pairs with the
   * acquire in core_storage_poison() */
  if (!atomic_compare_exchange_strong_explicit(&s->poison, &expected, p,
                                               memory_order_release,
                                               memory_order_relaxed))
    core_poison_free(p); /* already poisoned: the first message stays */
}
