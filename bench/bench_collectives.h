/* `dtorch bench collectives [--max-bytes N] [--reps N] [--ranks R]`: the
 * emulated collectives (sim/collectives.h) against the memory bound
 * measured in the same run (bench_collectives.c explains the figures). */
#ifndef BENCH_BENCH_COLLECTIVES_H
#define BENCH_BENCH_COLLECTIVES_H

int bench_collectives(int argc, char **argv);

#endif
