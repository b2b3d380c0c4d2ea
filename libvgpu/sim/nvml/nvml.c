/* nvml.c - the simulated libnvidia-ml.so.1: devices, memory, processes and utilization, all
 * read from the shared state that the simulated libcuda writes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../include/nvml_api.h"
#include "common/simstate.h"

#define GWSIM_EXPORT __attribute__((visibility("default")))
#define GWSIM_DRIVER_VERSION "580.0.0-sim"
#define GWSIM_NOT_AVAILABLE 0xFFFFFFFFu /* instance ids of a non-MIG device */

struct nvmlDevice_st {
    unsigned index;
};

static struct nvmlDevice_st g_devices[GWSIM_MAX_DEVICES];
static int g_init_count; /* atomic: nvmlInit calls not yet shut down */
static uint64_t g_window_ns = 1000000000ULL;
static int g_samples = 1; /* nvmlDeviceGetSamples answers (GPUWARDEN_SIM_UTIL_SAMPLES) */

static void read_window(void)
{
    const char *s = getenv("GPUWARDEN_SIM_UTIL_SAMPLES");
    if (s != NULL && *s != '\0') {
        if (strcmp(s, "0") != 0 && strcmp(s, "1") != 0)
            gwsim_error("GPUWARDEN_SIM_UTIL_SAMPLES=\"%s\" is not valid: use 1 (nvmlDeviceGetSamples "
                        "gives the utilization of each whole window) or 0 (it is not supported, "
                        "as on a driver without it); using 1", s);
        else
            g_samples = *s == '1';
    }
    const char *v = getenv("GPUWARDEN_SIM_UTIL_WINDOW_MS");
    if (v == NULL || *v == '\0')
        return;
    char *end = NULL;
    long ms = strtol(v, &end, 10);
    if (*end != '\0' || ms < 10 || ms > 60000) {
        gwsim_error("GPUWARDEN_SIM_UTIL_WINDOW_MS=\"%s\" is not valid: use an integer from 10 to "
                    "60000 (the utilization window in milliseconds); using 1000", v);
        return;
    }
    g_window_ns = (uint64_t)ms * 1000000ULL;
}

GWSIM_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    struct gwsim_state *st = gwsim_state();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    if (__atomic_fetch_add(&g_init_count, 1, __ATOMIC_ACQ_REL) == 0) {
        for (unsigned i = 0; i < GWSIM_MAX_DEVICES; i++)
            g_devices[i].index = i;
        read_window();
    }
    return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    return nvmlInitWithFlags(0);
}

GWSIM_EXPORT nvmlReturn_t nvmlShutdown(void)
{
    int n = __atomic_load_n(&g_init_count, __ATOMIC_ACQUIRE);
    do {
        if (n == 0)
            return NVML_ERROR_UNINITIALIZED;
    } while (!__atomic_compare_exchange_n(&g_init_count, &n, n - 1, 1, __ATOMIC_ACQ_REL,
                                          __ATOMIC_ACQUIRE));
    return NVML_SUCCESS;
}

/* GPUWARDEN_SIM_NVML_PID_OFFSET: the pids NVML reports are the processes' own plus this, as a
 * real NVML reports host pids to a process in a container's PID namespace. */
static unsigned nvml_pid(int32_t pid)
{
    static int offset = -1;
    if (__atomic_load_n(&offset, __ATOMIC_RELAXED) < 0) {
        const char *v = getenv("GPUWARDEN_SIM_NVML_PID_OFFSET");
        char *end = NULL;
        long o = v != NULL && *v != '\0' ? strtol(v, &end, 10) : 0;
        if (v != NULL && *v != '\0' && (*end != '\0' || o < 0 || o >= (1L << 30))) {
            gwsim_error("GPUWARDEN_SIM_NVML_PID_OFFSET=\"%s\" is not valid: use an integer from "
                        "0 to 1073741823 (added to the pids NVML reports); using 0", v);
            o = 0;
        }
        __atomic_store_n(&offset, (int)o, __ATOMIC_RELAXED);
    }
    return (unsigned)pid + (unsigned)__atomic_load_n(&offset, __ATOMIC_RELAXED);
}

static struct gwsim_state *ready(void)
{
    return __atomic_load_n(&g_init_count, __ATOMIC_ACQUIRE) > 0 ? gwsim_state() : NULL;
}

/* The device behind a handle, or NULL for a handle we did not give out. */
static const struct gwsim_device *device_of(const struct gwsim_state *st, nvmlDevice_t h)
{
    if (h < &g_devices[0] || h >= &g_devices[GWSIM_MAX_DEVICES] || h->index >= st->num_devices)
        return NULL;
    return &st->dev[h->index];
}

static nvmlReturn_t copy_string(char *dst, unsigned length, const char *src)
{
    size_t n = strlen(src);
    if (dst == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (length <= n)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, n + 1);
    return NVML_SUCCESS;
}

static const struct { nvmlReturn_t code; const char *text; } g_errors[] = {
    {NVML_SUCCESS, "Success"},
    {NVML_ERROR_UNINITIALIZED, "Uninitialized"},
    {NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument"},
    {NVML_ERROR_NOT_SUPPORTED, "Not Supported"},
    {NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"},
    {NVML_ERROR_ALREADY_INITIALIZED, "Already Initialized"},
    {NVML_ERROR_NOT_FOUND, "Not Found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "Insufficient Size"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "Function Not Found"},
    {NVML_ERROR_GPU_IS_LOST, "GPU is lost"},
    {NVML_ERROR_MEMORY, "Insufficient Memory"},
    {NVML_ERROR_NO_DATA, "No data"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "Argument version mismatch"},
    {NVML_ERROR_UNKNOWN, "Unknown Error"},
};

GWSIM_EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
        if (g_errors[i].code == result)
            return g_errors[i].text;
    return "Unknown Error";
}

/* ---- system ------------------------------------------------------------------------------- */
GWSIM_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (ready() == NULL)
        return NVML_ERROR_UNINITIALIZED;
    return copy_string(version, length, GWSIM_DRIVER_VERSION);
}

GWSIM_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    return copy_string(version, length, "13.580.0-sim");
}

GWSIM_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    if (cudaDriverVersion == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = 13000;
    return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

/* ---- devices ------------------------------------------------------------------------------ */
GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    struct gwsim_state *st = ready();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    if (deviceCount == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = st->num_devices;
    return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    struct gwsim_state *st = ready();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= st->num_devices)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &g_devices[index];
    return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    struct gwsim_state *st = ready();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    if (uuid == NULL || device == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    char text[NVML_DEVICE_UUID_BUFFER_SIZE];
    for (unsigned i = 0; i < st->num_devices; i++) {
        gwsim_uuid_text(st->dev[i].uuid, text);
        if (strcmp(text, uuid) == 0) {
            *device = &g_devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    struct gwsim_state *st = ready();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    if (index == NULL || device_of(st, device) == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = device->index;
    return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    struct gwsim_state *st = ready();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    const struct gwsim_device *d = device_of(st, device);
    if (d == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    char text[GWSIM_NAME_LEN + 1];
    snprintf(text, sizeof text, "%.*s", (int)GWSIM_NAME_LEN, d->name);
    return copy_string(name, length, text);
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    struct gwsim_state *st = ready();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    const struct gwsim_device *d = device_of(st, device);
    if (d == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    char text[NVML_DEVICE_UUID_BUFFER_SIZE];
    gwsim_uuid_text(d->uuid, text);
    return copy_string(uuid, length, text);
}

/* ---- memory ------------------------------------------------------------------------------- */
static void memory_now(struct gwsim_state *st, const struct gwsim_device *d, uint64_t *used,
                       uint64_t *free_bytes)
{
    gwsim_reclaim_dead(st);
    uint64_t u = __atomic_load_n(&d->used_bytes, __ATOMIC_ACQUIRE);
    *used = u;
    *free_bytes = u >= d->total_bytes ? 0 : d->total_bytes - u;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    struct gwsim_state *st = ready();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    const struct gwsim_device *d = device_of(st, device);
    if (d == NULL || memory == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t used, free_bytes;
    memory_now(st, d, &used, &free_bytes);
    memory->total = d->total_bytes;
    memory->used = used;
    memory->free = free_bytes;
    return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    struct gwsim_state *st = ready();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    const struct gwsim_device *d = device_of(st, device);
    if (d == NULL || memory == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    uint64_t used, free_bytes;
    memory_now(st, d, &used, &free_bytes);
    memory->total = d->total_bytes;
    memory->reserved = 0;
    memory->used = used;
    memory->free = free_bytes;
    return NVML_SUCCESS;
}

/* ---- processes ---------------------------------------------------------------------------- */
/* Live processes holding a context on the device, in table order (after a dead-process sweep). */
static unsigned processes_on(struct gwsim_state *st, unsigned dev, const struct gwsim_proc **out,
                             unsigned cap)
{
    gwsim_reclaim_dead(st);
    unsigned n = 0;
    for (unsigned i = 0; i < GWSIM_MAX_PROCS; i++) {
        const struct gwsim_proc *p = &st->proc[i];
        if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != GWSIM_PROC_LIVE ||
            !__atomic_load_n(&p->has_ctx[dev], __ATOMIC_ACQUIRE))
            continue;
        if (n < cap)
            out[n] = p;
        n++;
    }
    return n;
}

/* Fill `stride`-byte records (v2 and v3 share the layout) with the device's processes. */
static nvmlReturn_t running_processes(nvmlDevice_t device, unsigned int *infoCount,
                                      nvmlProcessInfo_v2_t *infos)
{
    struct gwsim_state *st = ready();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    if (device_of(st, device) == NULL || infoCount == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    const struct gwsim_proc *procs[GWSIM_MAX_PROCS];
    unsigned n = processes_on(st, device->index, procs, GWSIM_MAX_PROCS);
    if (n > *infoCount || (n > 0 && infos == NULL)) {
        *infoCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; i++) {
        infos[i].pid = nvml_pid(procs[i]->pid);
        infos[i].usedGpuMemory = __atomic_load_n(&procs[i]->used[device->index], __ATOMIC_ACQUIRE);
        infos[i].gpuInstanceId = GWSIM_NOT_AVAILABLE;
        infos[i].computeInstanceId = GWSIM_NOT_AVAILABLE;
    }
    *infoCount = n;
    return NVML_SUCCESS;
}

_Static_assert(sizeof(nvmlProcessInfo_t) == sizeof(nvmlProcessInfo_v2_t),
               "v3 process records have the v2 layout");

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                  unsigned int *infoCount,
                                                                  nvmlProcessInfo_t *infos)
{
    return running_processes(device, infoCount, (nvmlProcessInfo_v2_t *)(void *)infos);
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                  unsigned int *infoCount,
                                                                  nvmlProcessInfo_v2_t *infos)
{
    return running_processes(device, infoCount, infos);
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device,
                                                                   unsigned int *infoCount,
                                                                   nvmlProcessInfo_t *infos)
{
    struct gwsim_state *st = ready();
    (void)infos;
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    if (device_of(st, device) == NULL || infoCount == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *infoCount = 0; /* no graphics on a simulated compute GPU */
    return NVML_SUCCESS;
}

/* ---- utilization -------------------------------------------------------------------------- */
static unsigned percent(uint64_t busy, uint64_t window)
{
    if (window == 0)
        return 0;
    uint64_t p = (busy * 100 + window / 2) / window;
    return p > 100 ? 100u : (unsigned)p;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                        nvmlUtilization_t *utilization)
{
    struct gwsim_state *st = ready();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    if (device_of(st, device) == NULL || utilization == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    gwsim_timeline_settle(device->index); /* what ran until now is in the ring */
    uint64_t now = gwsim_now_ns();
    uint64_t from = now > g_window_ns ? now - g_window_ns : 0;
    utilization->gpu = percent(gwsim_busy_between(st, device->index, 0, from, now), now - from);
    utilization->memory = 0; /* no memory traffic is simulated */
    return NVML_SUCCESS;
}

/* The driver's utilization samples: one per whole window (g_window_ns, aligned on
 * CLOCK_MONOTONIC), stamped with the CLOCK_REALTIME microsecond its window ended, as NVML stamps
 * its own (the H200's: one every 200 ms).  Only the last SAMPLES_KEPT windows: older ones are
 * no longer in the kernel record ring. */
#define SAMPLES_KEPT 8u

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t type,
                                               unsigned long long lastSeenTimeStamp,
                                               nvmlValueType_t *sampleValType,
                                               unsigned int *sampleCount, nvmlSample_t *samples)
{
    struct gwsim_state *st = ready();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    if (device_of(st, device) == NULL || sampleCount == NULL || sampleValType == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!g_samples || type != NVML_GPU_UTILIZATION_SAMPLES)
        return NVML_ERROR_NOT_SUPPORTED;
    gwsim_timeline_settle(device->index);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t now = gwsim_now_ns();
    int64_t off = (int64_t)rt.tv_sec * 1000000000LL + rt.tv_nsec - (int64_t)now;
    uint64_t newest = now - now % g_window_ns;
    /* windows that ended after lastSeenTimeStamp (half a window of slack: the two clocks'
     * offset is read anew on each call) */
    int64_t seen = (int64_t)(lastSeenTimeStamp * 1000ULL) - off + (int64_t)(g_window_ns / 2);
    unsigned n = 0;
    while (n < SAMPLES_KEPT && newest >= (uint64_t)(n + 1) * g_window_ns &&
           (lastSeenTimeStamp == 0 || (int64_t)(newest - (uint64_t)n * g_window_ns) > seen))
        n++;
    if (n == 0)
        return NVML_ERROR_NOT_FOUND;
    *sampleValType = NVML_VALUE_TYPE_UNSIGNED_INT;
    if (samples == NULL) {
        *sampleCount = n;
        return NVML_SUCCESS;
    }
    if (n > *sampleCount)
        n = *sampleCount; /* the newest ones */
    for (unsigned i = 0; i < n; i++) {
        uint64_t end = newest - (uint64_t)(n - 1u - i) * g_window_ns;
        samples[i].timeStamp = (unsigned long long)(((int64_t)end + off) / 1000);
        samples[i].sampleValue.uiVal = percent(
            gwsim_busy_between(st, device->index, 0, end - g_window_ns, end), g_window_ns);
    }
    *sampleCount = n;
    return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                          nvmlProcessUtilizationSample_t *utilization,
                                                          unsigned int *processSamplesCount,
                                                          unsigned long long lastSeenTimeStamp)
{
    struct gwsim_state *st = ready();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    if (device_of(st, device) == NULL || processSamplesCount == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    const struct gwsim_proc *procs[GWSIM_MAX_PROCS];
    unsigned n = processes_on(st, device->index, procs, GWSIM_MAX_PROCS);
    if (utilization == NULL || *processSamplesCount < n) {
        *processSamplesCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    /* One sample per process, stamped now, covering the time since lastSeenTimeStamp (at most
     * one window back): only what is newer than the caller's last sample is reported. */
    gwsim_timeline_settle(device->index);
    uint64_t now_us = gwsim_realtime_us();
    uint64_t now = gwsim_now_ns();
    if (n == 0 || lastSeenTimeStamp >= now_us) {
        *processSamplesCount = 0;
        return NVML_ERROR_NOT_FOUND;
    }
    uint64_t since_ns = (now_us - lastSeenTimeStamp) * 1000ULL;
    if (lastSeenTimeStamp == 0 || since_ns > g_window_ns)
        since_ns = g_window_ns;
    uint64_t from = now > since_ns ? now - since_ns : 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t busy = gwsim_busy_between(st, device->index, (uint32_t)procs[i]->pid, from, now);
        utilization[i].pid = nvml_pid(procs[i]->pid);
        utilization[i].timeStamp = now_us;
        utilization[i].smUtil = percent(busy, now - from);
        utilization[i].memUtil = 0;
        utilization[i].encUtil = 0;
        utilization[i].decUtil = 0;
    }
    *processSamplesCount = n;
    return NVML_SUCCESS;
}

/* ---- clocks and power: the DVFS model (GPUWARDEN_SIM_DVFS, simstate.h) ---------------------- */
/* Without GPUWARDEN_SIM_DVFS the simulated GPU reports neither (NVML_ERROR_NOT_SUPPORTED), as
 * a GPU that does not expose them. */
static nvmlReturn_t dvfs_device(nvmlDevice_t device, const void *out, unsigned *index)
{
    struct gwsim_state *st = ready();
    if (st == NULL)
        return NVML_ERROR_UNINITIALIZED;
    if (device_of(st, device) == NULL || out == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (gwsim_dvfs_params()->max_mhz == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *index = device->index;
    return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                 unsigned int *clock)
{
    unsigned index = 0;
    nvmlReturn_t rc = dvfs_device(device, clock, &index);
    if (rc != NVML_SUCCESS)
        return rc;
    if (type != NVML_CLOCK_SM && type != NVML_CLOCK_GRAPHICS)
        return NVML_ERROR_NOT_SUPPORTED; /* no memory or video clocks are modelled */
    *clock = gwsim_dvfs_clock_now(index, gwsim_now_ns());
    return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    unsigned index = 0;
    nvmlReturn_t rc = dvfs_device(device, power, &index);
    if (rc != NVML_SUCCESS)
        return rc;
    (void)gwsim_dvfs_clock(index, gwsim_now_ns(), power);
    return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    unsigned index = 0;
    nvmlReturn_t rc = dvfs_device(device, limit, &index);
    if (rc != NVML_SUCCESS)
        return rc;
    *limit = GWSIM_POWER_LIMIT_MW;
    return NVML_SUCCESS;
}
