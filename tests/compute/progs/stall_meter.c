/* stall_meter: how much of the time a sleeping thread could not run when it woke, as the
 * launching threads of the simulated-GPU scenarios wait asleep for their turns (a hypervisor that
 * steals a vCPU, or another process's real-time or CPU-bound work, delays every wake-up).
 *
 *   stall_meter
 *     sleeps 1 ms at a time until SIGTERM or SIGINT, then prints one line:
 *       stalled  the share of the wall time spent past a wake-up's due time beyond
 *                STALL_SLACK_US (woken late: the time the machine did not give)
 *       worst_us the longest single delay, in microseconds
 *       wakeups  how many sleeps it made
 *
 * A quiet machine reads under 0.002; one whose two CPUs are each taken 3 ms in 10 by a real-time
 * spinner 0.06-0.08 (a thread that wakes on the CPU not taken runs at once), and the scenarios'
 * turns lose their windows with it (tests/compute/rounds.py, MAX_STALLED). */

#include <signal.h>
#include <stdio.h>
#include <time.h>

#define SLEEP_NS 1000000L
#define STALL_SLACK_US 250L /* a wake-up this late is the kernel's timer slack and wake path */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    long long start = now_ns(), stalled = 0, worst = 0, wakeups = 0;
    while (!stop) {
        long long before = now_ns();
        struct timespec d = {.tv_sec = 0, .tv_nsec = SLEEP_NS};
        nanosleep(&d, NULL); /* a signal ends it early: that sleep counts no delay */
        long long late = now_ns() - before - SLEEP_NS - STALL_SLACK_US * 1000L;
        wakeups++;
        if (late > 0 && !stop) {
            stalled += late;
            worst = late > worst ? late : worst;
        }
    }
    long long wall = now_ns() - start;
    printf("stalled=%.4f worst_us=%lld wakeups=%lld\n",
           wall > 0 ? (double)stalled / (double)wall : 0.0, worst / 1000, wakeups);
    return 0;
}
