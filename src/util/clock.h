/* clock.h — monotonic time for budgets and measurements. */
#ifndef SV_UTIL_CLOCK_H
#define SV_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic nanoseconds since an arbitrary origin. */
static inline uint64_t sv_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
