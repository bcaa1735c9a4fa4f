/* `dtorch bench sched`: the scheduler's figures (JSON lines). */
#ifndef BENCH_BENCH_SCHED_H
#define BENCH_BENCH_SCHED_H

/* the work-stealing deque: push+pop, steal, and tiny-task throughput
 * against a mutex+condvar queue; best of `reps` runs each */
void bench_sched_deque(int reps);
/* the pool's records + sched_parallel_for against a mutex + condvar pool
 * with the same threads and spin-then-sleep policy (bench_pool.c) */
void bench_spawn_pool(int reps);

#endif
