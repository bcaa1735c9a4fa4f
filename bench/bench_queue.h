/* `bench_sched_queue`: a rank queue's claim + commit cost (bench_queue.c). */
#ifndef BENCH_BENCH_QUEUE_H
#define BENCH_BENCH_QUEUE_H

void bench_sched_queue(int reps);

#endif
