/* The CPU pressure edge: which PSI file tells how long the container's tasks waited for a CPU,
 * and reading it.  The decision is lim_wait_choose (limiter.c). */
#include "pressure.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_state.h"
#include "limiter.h"
#include "log.h"
#include "region.h"

#define PRESSURE_EVERY_NS 1000000000ull /* PSI's shortest average is over 10 s */

static char g_path[512];
static int g_resolved;
static int g_from_env; /* g_path is GPUWARDEN_CPU_PRESSURE's */
static uint64_t g_next_ns;

/* GPUWARDEN_CPU_PRESSURE if set; else the cgroup v2 group's cpu.pressure (the container's own,
 * in its cgroup namespace); else the node's /proc/pressure/cpu. */
static void resolve(void)
{
    const char *env = getenv("GPUWARDEN_CPU_PRESSURE");
    char cg[4096], group[400], probe[64];

    g_resolved = 1;
    if (env != NULL && env[0] != '\0') {
        snprintf(g_path, sizeof g_path, "%s", env);
        g_from_env = 1;
        return;
    }
    if (vgpu_read_small("/proc/self/cgroup", cg, sizeof cg) > 0 &&
        lim_cgroup2_path(cg, group, sizeof group) == 0) {
        snprintf(g_path, sizeof g_path, "/sys/fs/cgroup%s%scpu.pressure", group,
                 strcmp(group, "/") == 0 ? "" : "/");
        if (vgpu_read_small(g_path, probe, sizeof probe) > 0)
            return;
    }
    snprintf(g_path, sizeof g_path, "/proc/pressure/cpu");
}

void vgpu_pressure_tick(uint64_t now)
{
    char text[256];
    uint32_t x100 = 0;

    if (vgpu_cs.gate_wait_cfg != LIM_WAIT_AUTO || now < g_next_ns)
        return;
    g_next_ns = now + PRESSURE_EVERY_NS;
    if (!g_resolved)
        resolve();
    if (vgpu_read_small(g_path, text, sizeof text) <= 0 ||
        lim_parse_psi_some_avg10(text, &x100) != 0) {
        static int told;
        if (!told && g_from_env)
            vgpu_log(VGPU_LOG_ERROR, "GPUWARDEN_CPU_PRESSURE='%s' is not a readable CPU pressure "
                     "file (valid: a Linux PSI file whose first line is 'some avg10=N.NN ...', "
                     "such as /proc/pressure/cpu); gate waits sleep", g_path);
        else if (!told)
            vgpu_log(VGPU_LOG_INFO, "compute: no CPU pressure from %s; gate waits sleep", g_path);
        told = 1;
        ST(&vgpu_cs.gate_wait, LIM_WAIT_SLEEP);
        return;
    }
    ST(&vgpu_cs.gate_wait, lim_wait_choose(LD(&vgpu_cs.gate_wait), x100));
}
