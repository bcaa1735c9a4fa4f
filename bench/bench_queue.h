/* `bench_sched_ring`: the broadcast op ring's publish cost (bench_ring.c). */
#ifndef BENCH_BENCH_RING_H
#define BENCH_BENCH_RING_H

void bench_sched_ring(int reps);

#endif
