/* timer.h - monotonic clock in seconds / microseconds. */
#ifndef MF_CORE_TIMER_H
#define MF_CORE_TIMER_H

#include <stdint.h>
#include <time.h>

static inline double mf_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int64_t mf_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

#endif
