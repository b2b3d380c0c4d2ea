/* The CPU wait edge for GPUWARDEN_GATE_WAIT=auto: how long the thread that waits in the gate
 * was runnable without a CPU (its scheduler run delay), and whether the container's CPU quota
 * throttled it.  The decision is lim_wait_choose (limiter.c). */
#include "pressure.h"

#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "compute_state.h"
#include "limiter.h"
#include "log.h"
#include "region.h"

#define PRESSURE_EVERY_NS 500000000ull      /* a run-delay sample */

static uint32_t g_tid;         /* the thread sampled, 0 none yet */
static uint64_t g_delay, g_at; /* its run delay at g_at */
static uint32_t g_avg;         /* lim_cpu_wait_avg */
static uint64_t g_next_ns, g_throttled_at; /* the quota last seen throttling, 0 never */
static char g_cpu_stat[512];   /* the cgroup v2 group's cpu.stat, "" where there is none */
static uint64_t g_throttled;   /* its nr_throttled when last read */
static int g_resolved, g_no_schedstat, g_told_quota;

/* This thread's id, cached: a wait chunk must not cost a system call.  A fork's child thread
 * has the forking thread's cache and another id, so the pid it was read in goes with it. */
static _Thread_local uint32_t t_tid;
static _Thread_local pid_t t_pid;

void vgpu_pressure_note_waiter(void)
{
    pid_t pid = vgpu_cs.pid;
    if (t_tid == 0 || t_pid != pid)
        t_tid = (uint32_t)syscall(SYS_gettid), t_pid = pid;
    ST(&vgpu_cs.waiter_tid, t_tid);
}

/* Whether threads' run delays can be read; the container's cgroup v2 cpu.stat (its own group,
 * in its cgroup namespace), if readable. */
static void resolve(void)
{
    char cg[4096], group[400], text[512];
    uint64_t delay;

    g_resolved = 1;
    if (vgpu_read_small("/proc/thread-self/schedstat", text, sizeof text) <= 0 ||
        lim_parse_schedstat(text, &delay) != 0) {
        g_no_schedstat = 1;
        vgpu_log(VGPU_LOG_INFO, "compute: no run delay in /proc/thread-self/schedstat (a kernel "
                 "without CONFIG_SCHED_INFO); GPUWARDEN_GATE_WAIT=auto waits sleep");
    }
    if (vgpu_read_small("/proc/self/cgroup", cg, sizeof cg) > 0 &&
        lim_cgroup2_path(cg, group, sizeof group) == 0) {
        snprintf(g_cpu_stat, sizeof g_cpu_stat, "/sys/fs/cgroup%s%scpu.stat", group,
                 strcmp(group, "/") == 0 ? "" : "/");
        if (vgpu_read_small(g_cpu_stat, text, sizeof text) > 0 &&
            lim_parse_nr_throttled(text, &g_throttled) == 0)
            return;
    }
    g_cpu_stat[0] = '\0';
}

/* Whether the quota throttled the container since the last call (none without a cpu.stat). */
static int throttled(void)
{
    char text[512];
    uint64_t n;

    if (g_cpu_stat[0] == '\0' || vgpu_read_small(g_cpu_stat, text, sizeof text) <= 0 ||
        lim_parse_nr_throttled(text, &n) != 0)
        return 0;
    int more = n > g_throttled;
    g_throttled = n;
    return more;
}

void vgpu_pressure_tick(uint64_t now)
{
    char path[64], text[128];
    uint64_t delay;

    if (vgpu_cs.gate_wait_cfg != LIM_WAIT_AUTO || now < g_next_ns)
        return;
    g_next_ns = now + PRESSURE_EVERY_NS;
    if (!g_resolved)
        resolve(); /* reads cpu.stat's count: throttled() counts from there */
    else if (throttled())
        g_throttled_at = now;
    if (g_no_schedstat)
        return;
    uint32_t tid = LD(&vgpu_cs.waiter_tid);
    if (tid == 0)
        return;
    snprintf(path, sizeof path, "/proc/self/task/%u/schedstat", tid);
    if (vgpu_read_small(path, text, sizeof text) <= 0 || lim_parse_schedstat(text, &delay) != 0) {
        g_tid = 0; /* the thread exited: start again from the next one that waits */
        return;
    }
    if (tid != g_tid) {
        g_tid = tid, g_delay = delay, g_at = now;
        return;
    }
    g_avg = lim_cpu_wait_avg(g_avg, delay - g_delay, now - g_at);
    g_delay = delay, g_at = now;
    uint32_t was = LD(&vgpu_cs.gate_wait);
    uint32_t want = lim_wait_choose(was, g_avg, now, 0);
    uint32_t way = lim_wait_choose(was, g_avg, now, g_throttled_at);
    if (way != was)
        vgpu_log(VGPU_LOG_INFO, "compute: the launching thread waited for a CPU %u.%02u %% of the "
                 "time: gate waits %s", g_avg / 100u, g_avg % 100u,
                 way == LIM_WAIT_YIELD ? "yield" : "sleep");
    if (want != way && !g_told_quota) {
        g_told_quota = 1;
        vgpu_log(VGPU_LOG_INFO, "compute: the launching thread waited for a CPU %u.%02u %% of the "
                 "time, but the container's CPU quota throttles it (%s): gate waits sleep",
                 g_avg / 100u, g_avg % 100u, g_cpu_stat);
    }
    ST(&vgpu_cs.gate_wait, way);
}
