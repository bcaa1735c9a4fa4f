/* Reading and writing a box of a row-major array in a file with io_uring
 * (io.c; docs/io.md). The caller (a rank's record) names the box of the
 * global array its shard holds; the box's bytes in the file are runs —
 * the box's innermost dims that span the whole global dim merge into one
 * run — and its memory is contiguous. Each calling thread has its own
 * ring (made on first use, torn down when the thread exits) with one
 * registered file slot and, once O_DIRECT is used, registered bounce
 * buffers; a call batches up to `depth` SQEs in flight. */
#ifndef SCHED_IO_H
#define SCHED_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* the box of a row-major array of `ndim` dims stored at file offset
 * `base`, elements of `es` bytes; mem holds the box contiguously */
typedef struct sched_io_box {
  int ndim;
  const int64_t *dims;       /* the global array */
  const int64_t *off, *len;  /* the box */
  size_t es;
  uint64_t base;
  char *mem;
} sched_io_box;

#define SCHED_IO_MAX_DEPTH 128
#define SCHED_IO_DIRECT_ALIGN 4096

typedef struct sched_io_opts {
  int fd;             /* opened with O_DIRECT when direct */
  bool write;         /* mem -> file (never direct, never merged) */
  bool direct;        /* reads through aligned, registered bounce buffers */
  int depth;          /* SQEs in flight, 1..SCHED_IO_MAX_DEPTH */
  int64_t merge_gap;  /* runs closer than this read as one READV, the gap
                         into scratch (<= 1 MiB); 0: never */
} sched_io_opts;

/* what a call did (for tests and the bench) */
typedef struct sched_io_stats {
  int64_t runs;       /* contiguous byte runs of the box */
  int64_t sqes;       /* SQEs submitted */
  int64_t bytes;      /* bytes moved to/from the file (gaps and direct
                         padding included) */
} sched_io_stats;

/* Moves the box. Returns 0, or -errno of the first failure (-ENODATA: the
 * file ended before a run did); *fail_off gets the file offset of the
 * failed piece. stats may be NULL. Any thread. */
int sched_io_box_run(const sched_io_box *b, const sched_io_opts *o,
                     sched_io_stats *stats, uint64_t *fail_off);
/* the number of runs of a box (no I/O) */
int64_t sched_io_box_runs(const sched_io_box *b);

#endif
