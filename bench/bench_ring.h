/* `bench_sched_ring`: the broadcast op ring's publish cost (bench_ring.c). */
#ifndef DT_BENCH_BENCH_RING_H
#define DT_BENCH_BENCH_RING_H

void bench_sched_ring(int reps);

#endif
