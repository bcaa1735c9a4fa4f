/* `dtorch bench sched`: the scheduler's figures (JSON lines). */
#ifndef BENCH_BENCH_SCHED_H
#define BENCH_BENCH_SCHED_H

/* the work-stealing deque: push+pop, steal, and tiny-task throughput
 * against a mutex+condvar queue; best of `reps` runs each */
void bench_sched_deque(int reps);

#endif
