/* core.c: see core.h. */
#include "core.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "env.h"
#include "log.h"
#include "real.h"

struct vgpu_core vgpu_core;
int vgpu_core_state;
__thread int vgpu_in_driver __attribute__((tls_model("initial-exec")));

static pthread_once_t vgpu_core_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t vgpu_slot_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t vgpu_last_reclaim_ns;

static const char *vgpu_getenv(const char *name)
{
    return getenv(name);
}

static const char *vgpu_region_path(void)
{
    const char *path = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
    return path != NULL ? path : "(unset)";
}

static void vgpu_open_region(void)
{
    const char *path = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
    char why[256];
    if (path != NULL && path[0] != '\0') {
        if (vgpu_region_open(path, &vgpu_core.region, why, sizeof why) == 0)
            return;
        vgpu_log(VGPU_LOG_ERROR, "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s: refusing this region: %s; "
                 "to stay inside the container's limit, this process admits no device memory "
                 "(allocations fail with CUDA_ERROR_OUT_OF_MEMORY)", path, why);
        vgpu_core.refuse_all = 1;
    }
    if (vgpu_region_open_private(&vgpu_core.region) != 0) {
        vgpu_log(VGPU_LOG_ERROR, "cannot map a process-local region; admitting no device memory");
        vgpu_core.region.r = NULL;
        vgpu_core.refuse_all = 1;
    }
}

/* CUDA ordinal -> UUID -> region entry, for every device CUDA shows this process. */
static void vgpu_map_devices(const struct vgpu_env_limits *lim)
{
    int count = 0;
    if (vgpu_cuda_ready() != 0 || vgpu_cu.cuInit == NULL || vgpu_cu.cuInit(0) != CUDA_SUCCESS ||
        vgpu_cu.cuDeviceGetCount(&count) != CUDA_SUCCESS) {
        vgpu_core.unmapped = 1; /* devices that could not be mapped are refused, never unlimited */
        return;
    }
    if (count > (int)VGPU_MAX_DEVICES) {
        vgpu_log(VGPU_LOG_ERROR, "%d devices visible, a region holds %u: the others admit no "
                 "device memory", count, VGPU_MAX_DEVICES);
        vgpu_core.unmapped = 1;
        count = (int)VGPU_MAX_DEVICES;
    }
    __typeof__(vgpu_cu.cuDeviceGetUuid) get_uuid =
        vgpu_cu.cuDeviceGetUuid_v2 != NULL ? vgpu_cu.cuDeviceGetUuid_v2 : vgpu_cu.cuDeviceGetUuid;
    for (int i = 0; i < count; i++) {
        CUuuid uuid;
        vgpu_core.entry[i] = VGPU_ENTRY_REFUSE; /* until registered */
        if (vgpu_cu.cuDeviceGet(&vgpu_core.cu_dev[i], i) != CUDA_SUCCESS || get_uuid == NULL ||
            get_uuid(&uuid, vgpu_core.cu_dev[i]) != CUDA_SUCCESS) {
            vgpu_core.unmapped = 1;
            continue;
        }
        uint64_t limit = vgpu_core.refuse_all ? 0 : lim->limit[i];
        int e = vgpu_region_add_device(&vgpu_core.region, (const uint8_t *)uuid.bytes, limit);
        vgpu_core.entry[i] = e >= 0 ? e : VGPU_ENTRY_REFUSE;
        if (e == VGPU_REGION_TABLE_FULL)
            vgpu_log(VGPU_LOG_ERROR, "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s: the region has no free "
                     "device entry for CUDA device %d: it admits no device memory (allocations "
                     "fail with CUDA_ERROR_OUT_OF_MEMORY)", vgpu_region_path(), i);
        else if (e == VGPU_REGION_LOCK_TIMEOUT)
            vgpu_log(VGPU_LOG_ERROR, "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s: another process has held "
                     "the region's lock for more than %u ms (stopped?), so CUDA device %d could "
                     "not be registered: it admits no device memory (allocations fail with "
                     "CUDA_ERROR_OUT_OF_MEMORY)", vgpu_region_path(), VGPU_REGION_LOCK_WAIT_MS, i);
    }
    vgpu_core.ndev = count;
}

static void vgpu_after_fork_child(void)
{
    /* the parent's allocations and slot are not the child's */
    __atomic_store_n(&vgpu_core.slot, NULL, __ATOMIC_RELAXED);
    memset(vgpu_core.ctx_charged, 0, sizeof vgpu_core.ctx_charged);
    pthread_mutex_init(&vgpu_slot_lock, NULL);
    vgpu_ptrtab_reset(&vgpu_core.ptrs);
    vgpu_ptrtab_reset(&vgpu_core.handles);
    vgpu_ptrtab_reset(&vgpu_core.arrays);
    if (vgpu_core.region.fd < 0 && vgpu_core.region.r != NULL) {
        /* a process-local region was copied: start it empty */
        for (unsigned d = 0; d < VGPU_MAX_DEVICES; d++)
            vgpu_core.region.r->devices[d].used_bytes = 0;
        memset(vgpu_core.region.r->procs, 0, sizeof vgpu_core.region.r->procs);
    }
}

static void vgpu_at_exit(void)
{
    struct vgpu_region_proc *s = __atomic_load_n(&vgpu_core.slot, __ATOMIC_ACQUIRE);
    if (s != NULL && vgpu_core.region.fd >= 0 && s->pid == (uint32_t)getpid())
        vgpu_region_release_slot(vgpu_core.region.r, s);
}

static void vgpu_core_init_once(void)
{
    struct vgpu_env_limits lim;
    vgpu_log_init();
    for (unsigned i = 0; i < VGPU_MAX_DEVICES; i++)
        vgpu_core.entry[i] = -1;
    vgpu_env_memory_limits(vgpu_getenv, &lim);
    if (vgpu_ptrtab_init(&vgpu_core.ptrs, 16) != 0 || vgpu_ptrtab_init(&vgpu_core.handles, 14) != 0 ||
        vgpu_ptrtab_init(&vgpu_core.arrays, 12) != 0)
        vgpu_log(VGPU_LOG_ERROR, "cannot map the allocation tables; frees use the overflow list");
    vgpu_open_region();
    if (vgpu_core.region.r != NULL) {
        vgpu_map_devices(&lim);
        if (vgpu_core.region.fd >= 0)
            vgpu_region_reclaim(&vgpu_core.region, vgpu_proc_alive);
    }
    pthread_atfork(NULL, NULL, vgpu_after_fork_child);
    atexit(vgpu_at_exit);
    __atomic_store_n(&vgpu_core_state, 1, __ATOMIC_RELEASE);
}

int vgpu_core_init(void)
{
    pthread_once(&vgpu_core_once, vgpu_core_init_once);
    return vgpu_core.region.r != NULL ? 0 : -1;
}

int vgpu_entry_of(CUdevice dev)
{
    for (int i = 0; i < vgpu_core.ndev; i++)
        if (vgpu_core.cu_dev[i] == dev)
            return vgpu_core.entry[i];
    /* not a device this process mapped: one it could not map is refused; anything else is not a
     * device at all, and the driver answers it */
    return vgpu_core.unmapped ? VGPU_ENTRY_REFUSE : VGPU_ENTRY_NONE;
}

int vgpu_entry_of_ordinal(int ordinal)
{
    CUdevice dev;
    if (vgpu_cu.cuDeviceGet == NULL || vgpu_cu.cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS)
        return VGPU_ENTRY_NONE;
    return vgpu_entry_of(dev);
}

int vgpu_current_entry(void)
{
    CUdevice dev;
    if (vgpu_cu.cuCtxGetDevice == NULL || vgpu_cu.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return VGPU_ENTRY_NONE;
    return vgpu_entry_of(dev);
}

static int vgpu_parse_uuid(const char *text, uint8_t out[16])
{
    /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (or MIG-): 32 hex digits, dashes ignored */
    const char *p = strchr(text, '-');
    if (p == NULL)
        return -1;
    unsigned n = 0;
    for (p++; *p != '\0' && n < 32; p++) {
        int v;
        if (*p == '-')
            continue;
        if (*p >= '0' && *p <= '9')
            v = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            v = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            v = *p - 'A' + 10;
        else
            return -1;
        if (n % 2 == 0)
            out[n / 2] = (uint8_t)(v << 4);
        else
            out[n / 2] = (uint8_t)(out[n / 2] | v);
        n++;
    }
    return n == 32 ? 0 : -1;
}

int vgpu_entry_of_nvml(nvmlDevice_t device)
{
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    uint8_t uuid[16];
    if (vgpu_core_ready() != 0 || vgpu_nvml.nvmlDeviceGetUUID == NULL ||
        vgpu_nvml.nvmlDeviceGetUUID(device, text, sizeof text) != NVML_SUCCESS ||
        vgpu_parse_uuid(text, uuid) != 0)
        return -1;
    return vgpu_region_find_device(vgpu_core.region.r, uuid);
}

static struct vgpu_region_proc *vgpu_slot(void)
{
    struct vgpu_region_proc *s = __atomic_load_n(&vgpu_core.slot, __ATOMIC_ACQUIRE);
    if (__builtin_expect(s != NULL, 1))
        return s;
    pthread_mutex_lock(&vgpu_slot_lock); /* once per process */
    s = vgpu_core.slot;
    if (s == NULL) {
        uint32_t pid = (uint32_t)getpid();
        uint64_t start_time = vgpu_proc_start_time(pid);
        if (vgpu_core.region.fd >= 0) {
            uint64_t gone = vgpu_region_release_previous(vgpu_core.region.r, pid, start_time);
            if (gone != 0)
                vgpu_log(VGPU_LOG_INFO, "gave back the %llu bytes of this process's program "
                         "before its exec", (unsigned long long)gone);
        }
        s = vgpu_region_claim_slot(vgpu_core.region.r, pid, start_time);
        if (s == NULL && vgpu_core.region.fd >= 0) {
            vgpu_region_reclaim(&vgpu_core.region, vgpu_proc_alive);
            s = vgpu_region_claim_slot(vgpu_core.region.r, pid, start_time);
        }
        if (s == NULL)
            vgpu_log(VGPU_LOG_WARN, "no free process slot in the region; this process's usage "
                     "is counted for the container but not per process");
        __atomic_store_n(&vgpu_core.slot, s, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&vgpu_slot_lock);
    return s;
}

static uint64_t vgpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void vgpu_maybe_reclaim(void)
{
    if (vgpu_core.region.fd < 0)
        return;
    uint64_t now = vgpu_now_ns();
    uint64_t last = __atomic_load_n(&vgpu_last_reclaim_ns, __ATOMIC_RELAXED);
    if (now - last < 100000000u ||
        !__atomic_compare_exchange_n(&vgpu_last_reclaim_ns, &last, now, 0, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        return;
    vgpu_region_reclaim(&vgpu_core.region, vgpu_proc_alive);
}

int vgpu_admit(int entry, uint64_t bytes)
{
    if (vgpu_core.refuse_all)
        return -1;
    unsigned e = (unsigned)entry;
    if (__builtin_expect(__atomic_load_n(&vgpu_core.ctx_charged[e], __ATOMIC_RELAXED) == 0, 0) &&
        vgpu_charge_context(entry) != 0)
        return -1;
    struct vgpu_region_proc *s = vgpu_slot();
    if (vgpu_budget_reserve(vgpu_core.region.r, s, e, bytes) == 0)
        return 0;
    /* before refusing: give back what dead processes still hold, then try once more */
    if (vgpu_core.region.fd < 0 || vgpu_region_reclaim(&vgpu_core.region, vgpu_proc_alive) == 0)
        return -1;
    return vgpu_budget_reserve(vgpu_core.region.r, s, e, bytes);
}

void vgpu_release(int entry, uint64_t bytes)
{
    vgpu_budget_release(vgpu_core.region.r, vgpu_slot(), (unsigned)entry, bytes);
}

/* ---- context overhead (docs/libvgpu.md, "Contexts") -------------------------------------------
 * NVML lists processes by host PID; a process in a container's PID namespace has another getpid().
 * So the pids on the device are read just before the process creates its context there, and the
 * process is the one that appears: NVML then lists it by a pid this process learns once
 * (vgpu_host_pid) and matches exactly on its other devices. */
#define VGPU_CTX_PIDS 256u
static struct {
    int taken;
    unsigned n;
    unsigned pid[VGPU_CTX_PIDS];
} vgpu_ctx_before[VGPU_MAX_DEVICES];
static unsigned vgpu_host_pid; /* this process as NVML lists it, once known; 0 unknown */
static pthread_mutex_t vgpu_ctx_lock = PTHREAD_MUTEX_INITIALIZER;

/* NVML's compute processes on an entry's GPU (malloc'ed, *n entries), or NULL.  NVML must be
 * initialised by the caller. */
static nvmlProcessInfo_t *vgpu_nvml_procs(int entry, unsigned *n)
{
    nvmlProcessInfo_t *infos = NULL;
    nvmlDevice_t dev;
    char text[VGPU_UUID_TEXT];
    nvmlReturn_t rc = NVML_ERROR_INSUFFICIENT_SIZE;
    unsigned want = 64, cap = 0;

    vgpu_uuid_text(vgpu_core.region.r->devices[entry].uuid, text);
    if (vgpu_nvml.nvmlDeviceGetHandleByUUID(text, &dev) != NVML_SUCCESS ||
        vgpu_nvml.nvmlDeviceGetComputeRunningProcesses_v3 == NULL)
        return NULL;
    /* Not a hot path (once per process and device): size the buffer to what NVML says it needs,
     * with room for processes starting meanwhile, a few tries at most. */
    for (int tries = 0; tries < 4 && rc == NVML_ERROR_INSUFFICIENT_SIZE; tries++) {
        nvmlProcessInfo_t *grown = realloc(infos, (size_t)(want + 16) * sizeof *infos);
        if (grown == NULL)
            break;
        infos = grown;
        cap = want + 16;
        want = cap;
        rc = vgpu_nvml.nvmlDeviceGetComputeRunningProcesses_v3(dev, &want, infos);
    }
    if (rc != NVML_SUCCESS) {
        free(infos);
        return NULL;
    }
    *n = want < cap ? want : cap;
    return infos;
}

static int vgpu_nvml_open(void)
{
    return vgpu_nvml_ready() == 0 && vgpu_nvml.nvmlInit_v2 != NULL &&
           vgpu_nvml.nvmlInit_v2() == NVML_SUCCESS;
}

void vgpu_context_before(int entry)
{
    nvmlProcessInfo_t *infos;
    unsigned n = 0;

    if (vgpu_core.region.r != NULL)
        (void)vgpu_slot();
    if (entry < 0 || vgpu_core.region.r == NULL || vgpu_host_pid != 0 ||
        __atomic_load_n(&vgpu_core.ctx_charged[entry], __ATOMIC_ACQUIRE) != 0 || !vgpu_nvml_open())
        return;
    infos = vgpu_nvml_procs(entry, &n);
    pthread_mutex_lock(&vgpu_ctx_lock);
    if (infos != NULL && !vgpu_ctx_before[entry].taken) {
        for (unsigned i = 0; i < n && i < VGPU_CTX_PIDS; i++)
            vgpu_ctx_before[entry].pid[i] = infos[i].pid;
        vgpu_ctx_before[entry].n = n < VGPU_CTX_PIDS ? n : VGPU_CTX_PIDS;
        vgpu_ctx_before[entry].taken = n <= VGPU_CTX_PIDS; /* a partial list proves nothing */
    }
    pthread_mutex_unlock(&vgpu_ctx_lock);
    free(infos);
    vgpu_nvml.nvmlShutdown();
}

static int vgpu_was_there(int entry, unsigned pid)
{
    for (unsigned i = 0; i < vgpu_ctx_before[entry].n; i++)
        if (vgpu_ctx_before[entry].pid[i] == pid)
            return 1;
    return 0;
}

/* This process's context overhead on an entry: NVML's usage for this process minus what the shim
 * already counted for it there.  Which of NVML's entries is this process, in order: the host pid
 * once known; getpid() unless that pid was on the GPU before this context (then it is another
 * namespace's process); the one process that appeared since vgpu_context_before; getpid()
 * anyway when none appeared (a context made before, unhooked); the largest of several that
 * appeared at once (the safe side).  0 when none is found or NVML is absent. */
static uint64_t vgpu_measure_context(int entry, struct vgpu_region_proc *s)
{
    nvmlProcessInfo_t *infos;
    unsigned n = 0, me = (unsigned)getpid(), appeared = 0;
    int mine = -1, largest = -1, pick = -1;
    uint64_t used, tracked;
    const char *how;

    if (!vgpu_nvml_open())
        return 0;
    infos = vgpu_nvml_procs(entry, &n);
    pthread_mutex_lock(&vgpu_ctx_lock);
    for (unsigned i = 0; infos != NULL && i < n; i++) {
        if (infos[i].usedGpuMemory == (unsigned long long)NVML_VALUE_NOT_AVAILABLE)
            continue;
        if (infos[i].pid == (vgpu_host_pid != 0 ? vgpu_host_pid : me))
            mine = (int)i;
        if (vgpu_ctx_before[entry].taken && !vgpu_was_there(entry, infos[i].pid)) {
            appeared++;
            if (largest < 0 || infos[i].usedGpuMemory > infos[largest].usedGpuMemory)
                largest = (int)i;
        }
    }
    if (vgpu_host_pid != 0) {
        pick = mine, how = "by host pid";
    } else if (mine >= 0 && !(vgpu_ctx_before[entry].taken && vgpu_was_there(entry, me))) {
        pick = mine, how = "by pid";
    } else if (appeared == 1) {
        pick = largest, how = "as the process that appeared";
        vgpu_host_pid = infos[largest].pid;
    } else if (appeared == 0) {
        pick = mine, how = mine >= 0 ? "by pid, on the GPU before" : "not listed by NVML";
    } else {
        pick = largest, how = "as the largest of the processes that appeared";
    }
    used = pick >= 0 ? infos[pick].usedGpuMemory : 0;
    vgpu_log(VGPU_LOG_INFO, "context on device entry %d: NVML pid %u (%s), %llu bytes used", entry,
             pick >= 0 ? infos[pick].pid : 0u, how, (unsigned long long)used);
    vgpu_ctx_before[entry].taken = 0;
    pthread_mutex_unlock(&vgpu_ctx_lock);
    free(infos);
    vgpu_nvml.nvmlShutdown();
    tracked = s != NULL ? __atomic_load_n(&s->used_bytes[entry], __ATOMIC_RELAXED) : 0;
    return used > tracked ? used - tracked : 0;
}

int vgpu_charge_context(int entry)
{
    uint32_t zero = 0;
    if (entry == VGPU_ENTRY_REFUSE)
        return -1;
    if (entry < 0 || vgpu_core.region.r == NULL ||
        !__atomic_compare_exchange_n(&vgpu_core.ctx_charged[entry], &zero, 1, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return 0;
    struct vgpu_region_proc *s = vgpu_slot();
    uint64_t bytes = vgpu_measure_context(entry, s);
    if (bytes == 0)
        return 0;
    /* admitted like any allocation: a context that does not fit is refused */
    if (vgpu_core.refuse_all || vgpu_budget_reserve(vgpu_core.region.r, s, (unsigned)entry,
                                                    bytes) != 0) {
        if (vgpu_core.region.fd < 0 || vgpu_core.refuse_all ||
            vgpu_region_reclaim(&vgpu_core.region, vgpu_proc_alive) == 0 ||
            vgpu_budget_reserve(vgpu_core.region.r, s, (unsigned)entry, bytes) != 0) {
            __atomic_store_n(&vgpu_core.ctx_charged[entry], 0, __ATOMIC_RELEASE);
            return -1;
        }
    }
    if (s != NULL)
        __atomic_fetch_add(&s->context_bytes[entry], bytes, __ATOMIC_RELAXED);
    return 0;
}
