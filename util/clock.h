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

/* The CLOCK_MONOTONIC time ms milliseconds from now, for
 * pthread_cond_timedwait on a condition variable whose clock is
 * CLOCK_MONOTONIC. */
static inline struct timespec sv_deadline_ms(uint32_t ms) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

#endif
