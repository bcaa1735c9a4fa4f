/* `dtorch stress` (tools/stress.c): random programs run on a mesh under
 * chaos scheduling and fault injection, compared with one device. */
#ifndef TOOLS_STRESS_H
#define TOOLS_STRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <dtorch/dtorch.h>

#define STRESS_MAX_STEPS 40

typedef enum stress_kind {
  STRESS_NONE, /* removed by shrinking */
  STRESS_UNARY, STRESS_BINARY, STRESS_MATMUL, STRESS_TRANSPOSE, STRESS_SUM,
  STRESS_SOFTMAX, STRESS_REDIST, STRESS_KINDS,
  STRESS_INPUT /* made by generation only, not drawn */
} stress_kind;

/* value i = step i applied to earlier values a, b */
typedef struct stress_step {
  stress_kind k;
  int a, b, arg;
  dt_placement pl[2];     /* INPUT: its placements; REDIST: the target */
  uint64_t seed;          /* INPUT: its values */
} stress_step;

typedef struct stress_program {
  uint64_t seed;
  dt_dtype dtype;
  int mesh_ndim;
  int64_t mesh[2];
  int n;
  stress_step s[STRESS_MAX_STEPS];
  int64_t rows[STRESS_MAX_STEPS], cols[STRESS_MAX_STEPS];
} stress_program;

void stress_generate(stress_program *p, uint64_t seed, int ranks);
/* Runs p on mesh m (NULL: this thread's runtime, one device) and writes
 * every value (stress_out_size doubles); on failure the status and msg. */
dt_status stress_execute(const stress_program *p, dt_mesh *m, double *out,
                         char *msg, size_t len);
size_t stress_out_size(const stress_program *p);
void stress_print(FILE *f, const stress_program *p);
/* a later step reads value i */
bool stress_used(const stress_program *p, int i);

int tool_stress(int argc, char **argv);

#endif
