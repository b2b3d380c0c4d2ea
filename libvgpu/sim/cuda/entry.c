/* entry.c - initialization, versions, error strings, devices and entry-point lookup. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudasim.h"

struct gwsim_cuda g_sim = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .kernel_scale = 1.0,
};

/* A number from 0 to `max` in the variable `name`; `unset` when it is not set, and when it is
 * not valid (after one message that says what is, `valid`, and what happens instead, `instead`). */
static double read_number(const char *name, double max, double unset, const char *valid,
                          const char *instead)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return unset;
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || *end != '\0' || !(x >= 0.0) || x > max) {
        gwsim_error("%s=\"%s\" is not valid: use %s; %s", name, v, valid, instead);
        return unset;
    }
    return x;
}

static double read_kernel_scale(void)
{
    return read_number("GPUWARDEN_SIM_KERNEL_SCALE", 1e6, 1.0,
                       "a number from 0 to 1e6 (a kernel lasts gridX*gridY*gridZ microseconds "
                       "times it)", "using 1.0");
}

static void read_visible(const struct gwsim_state *st);

/* GPUWARDEN_SIM_JITTER=PCT: each kernel lasts its time times 1 + PCT/100 x u, u drawn uniformly
 * from [0, 1) per kernel, as a real GPU's kernel times vary with its clock and memory traffic
 * (so the smallest of several samples sits under their mean). */
static double read_jitter(void)
{
    return read_number("GPUWARDEN_SIM_JITTER", 100.0, 0.0,
                       "a percentage from 0 to 100 (each kernel lasts up to that much longer, "
                       "drawn uniformly)", "no jitter") / 100.0;
}

/* GPUWARDEN_SIM_LAUNCH_STALL=N:US: every Nth kernel launch returns US microseconds after its
 * kernel was queued, as when the launching thread is preempted right after the submission. */
static void read_launch_stall(void)
{
    const char *v = getenv("GPUWARDEN_SIM_LAUNCH_STALL");
    unsigned n = 0, us = 0;
    char tail = 0;
    if (v == NULL || *v == '\0')
        return;
    if (sscanf(v, "%u:%u%c", &n, &us, &tail) != 2 || n == 0 || us > 1000000u) {
        gwsim_error("GPUWARDEN_SIM_LAUNCH_STALL=\"%s\" is not valid: use N:US (every Nth launch "
                    "returns US microseconds late, N >= 1, US <= 1000000); no stalls", v);
        return;
    }
    g_sim.stall_every = n;
    g_sim.stall_us = us;
}

/* GPUWARDEN_SIM_LAZY_LOAD_US=US: the first launch of each function spends US microseconds in
 * the call (the k-th function loaded (1 + k % 4) times that) before its kernel is queued, as
 * CUDA's lazy module loading (the default since CUDA 12.2) loads a kernel's module on its first
 * launch: 0.5 to 2.6 ms for PyTorch's and cuBLAS's kernels on the H200. */
static void read_lazy_load(void)
{
    const char *v = getenv("GPUWARDEN_SIM_LAZY_LOAD_US");
    unsigned us = 0;
    char tail = 0;
    if (v == NULL || *v == '\0')
        return;
    if (sscanf(v, "%u%c", &us, &tail) != 1 || us > 10000000u) {
        gwsim_error("GPUWARDEN_SIM_LAZY_LOAD_US=\"%s\" is not valid: use microseconds from 0 "
                    "to 10000000 (a function's first launch spends them loading it); no loading",
                    v);
        return;
    }
    g_sim.lazy_load_us = us;
}

/* GPUWARDEN_SIM_CALL_NS=L,R,Q: the CPU time (ns, spun) of a kernel or graph launch, of
 * cuEventRecord, and of cuEventQuery / cuStreamQuery, as a real driver spends it (H200, driver
 * 580: 2900,1100,150; tests/benchmarks/bench_driver_calls.c measures them). */
static void read_call_cost(void)
{
    const char *v = getenv("GPUWARDEN_SIM_CALL_NS");
    unsigned long long l = 0, r = 0, q = 0;
    char tail = 0;
    if (v == NULL || *v == '\0')
        return;
    if (sscanf(v, "%llu,%llu,%llu%c", &l, &r, &q, &tail) != 3 || l > 1000000000ull ||
        r > 1000000000ull || q > 1000000000ull) {
        gwsim_error("GPUWARDEN_SIM_CALL_NS=\"%s\" is not valid: use LAUNCH,RECORD,QUERY "
                    "(nanoseconds of CPU each call spends, each <= 1000000000); no call costs", v);
        return;
    }
    g_sim.call_ns[GWSIM_CALL_LAUNCH] = l;
    g_sim.call_ns[GWSIM_CALL_RECORD] = r;
    g_sim.call_ns[GWSIM_CALL_QUERY] = q;
}

/* GPUWARDEN_SIM_SYNC=spin|sleep: how a synchronisation waits for the GPU.  CUDA's default
 * schedule (cudaDeviceScheduleAuto) spins while a process has no more active contexts than
 * logical CPUs, so a real launching thread is busy on its CPU until its work ends; the
 * simulator sleeps unless told to spin. */
static void read_sync(void)
{
    const char *v = getenv("GPUWARDEN_SIM_SYNC");
    if (v == NULL || *v == '\0' || strcmp(v, "sleep") == 0)
        return;
    if (strcmp(v, "spin") == 0) {
        g_sim.sync_spin = 1;
        return;
    }
    gwsim_error("GPUWARDEN_SIM_SYNC=\"%s\" is not valid: use spin or sleep (how a "
                "synchronisation waits for the GPU); sleeping", v);
}

void gwsim_sync_wait(uint64_t mono_ns)
{
    if (!g_sim.sync_spin) {
        gwsim_sleep_until(mono_ns);
        return;
    }
    while (gwsim_now_ns() < mono_ns)
        ;
}

void gwsim_sync_ticket(int device, struct gwsim_ticket *t)
{
    gwsim_ticket_wait((unsigned)device, t, g_sim.sync_spin);
}

void gwsim_call_cost(int which)
{
    uint64_t ns = g_sim.call_ns[which];
    if (ns != 0) {
        uint64_t until = gwsim_now_ns() + ns;
        while (gwsim_now_ns() < until)
            ;
    }
}

GWSIM_EXPORT CUresult cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (gwsim_state() == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_sim.lock);
    if (!g_sim.initialized) {
        g_sim.kernel_scale = read_kernel_scale();
        g_sim.jitter = read_jitter();
        read_launch_stall();
        read_call_cost();
        read_lazy_load();
        read_sync();
        read_visible(gwsim_state());
        g_sim.initialized = 1;
    }
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

CUresult gwsim_check_init(void)
{
    return __atomic_load_n(&g_sim.initialized, __ATOMIC_ACQUIRE) ? CUDA_SUCCESS
                                                                  : CUDA_ERROR_NOT_INITIALIZED;
}

/* CUDA_VISIBLE_DEVICES, read at cuInit as CUDA reads it: indices or GPU UUID prefixes, up to the
 * first entry that names no device (or names one twice).  A CUdevice is an ordinal among the
 * visible devices, as in CUDA; the simulator's state is indexed by the physical device. */
static int g_visible[GWSIM_MAX_DEVICES];
static int g_nvisible = -1; /* -1: every device, in order */

static int uuid_matches(const uint8_t u[16], const char *prefix)
{
    char text[GWSIM_UUID_TEXT];
    gwsim_uuid_text(u, text);
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

static void read_visible(const struct gwsim_state *st)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    char buf[1024];
    int n = 0;
    if (v == NULL || st == NULL)
        return;
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL && n < (int)GWSIM_MAX_DEVICES;
         tok = strtok_r(NULL, ",", &save)) {
        int phys = -1, dup = 0;
        while (*tok == ' ')
            tok++;
        if (*tok >= '0' && *tok <= '9') {
            char *end = NULL;
            long i = strtol(tok, &end, 10);
            if (*end == '\0' && i >= 0 && i < (long)st->num_devices)
                phys = (int)i;
        } else if (strncmp(tok, "GPU-", 4) == 0) {
            for (unsigned d = 0; d < st->num_devices; d++)
                if (uuid_matches(st->dev[d].uuid, tok))
                    phys = phys == -1 ? (int)d : -2; /* ambiguous prefix: names none */
        }
        for (int j = 0; j < n; j++)
            dup |= g_visible[j] == phys;
        if (phys < 0 || dup)
            break;
        g_visible[n++] = phys;
    }
    g_nvisible = n;
}

int gwsim_device_count(void)
{
    struct gwsim_state *st = gwsim_state();
    if (st == NULL)
        return 0;
    return g_nvisible >= 0 ? g_nvisible : (int)st->num_devices;
}

CUresult gwsim_resolve_device(CUdevice *dev)
{
    if (*dev < 0 || *dev >= gwsim_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    if (g_nvisible >= 0)
        *dev = g_visible[*dev];
    return CUDA_SUCCESS;
}

CUdevice gwsim_ordinal_of(int phys)
{
    for (int i = 0; i < g_nvisible; i++)
        if (g_visible[i] == phys)
            return i;
    return phys;
}

GWSIM_EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
    if (driverVersion == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = GW_CUDA_API_VERSION;
    return CUDA_SUCCESS;
}

/* ---- errors ---------------------------------------------------------------------------------- */
static const struct { CUresult code; const char *name; const char *text; } g_errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
    {CUDA_ERROR_NOT_MAPPED, "CUDA_ERROR_NOT_MAPPED", "resource not mapped"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED",
     "context is destroyed"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_index(CUresult error)
{
    for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
        if (g_errors[i].code == error)
            return (int)i;
    return -1;
}

GWSIM_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (pStr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    int i = error_index(error);
    *pStr = i < 0 ? NULL : g_errors[i].name;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (pStr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    int i = error_index(error);
    *pStr = i < 0 ? NULL : g_errors[i].text;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    if (ppExportTable == NULL || pExportTableId == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED; /* private tables of the real driver: none here */
}

/* ---- devices --------------------------------------------------------------------------------- */
GWSIM_EXPORT CUresult cuDeviceGetCount(int *count)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (count == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *count = gwsim_device_count();
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUdevice phys = ordinal;
    if (gwsim_resolve_device(&phys) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (name == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = gwsim_resolve_device(&dev)) != CUDA_SUCCESS)
        return rc;
    const char *src = gwsim_state()->dev[dev].name;
    size_t n = strnlen(src, GWSIM_NAME_LEN);
    if (n >= (size_t)len)
        n = (size_t)len - 1;
    memcpy(name, src, n);
    name[n] = '\0';
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (uuid == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = gwsim_resolve_device(&dev)) != CUDA_SUCCESS)
        return rc;
    memcpy(uuid->bytes, gwsim_state()->dev[dev].uuid, sizeof uuid->bytes);
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return cuDeviceGetUuid_v2(uuid, dev);
}

GWSIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (bytes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = gwsim_resolve_device(&dev)) != CUDA_SUCCESS)
        return rc;
    *bytes = (size_t)gwsim_state()->dev[dev].total_bytes;
    return CUDA_SUCCESS;
}

/* An H200-like device (compute capability 9.0). */
static int attribute_value(CUdevice_attribute attrib, CUdevice dev, int *known)
{
    *known = 1;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        return (int)gwsim_state()->dev[dev].sm_count;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 0x18 + dev;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 6144;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    default:
        *known = 0;
        return 0;
    }
}

GWSIM_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pi == NULL || (int)attrib <= 0 || (int)attrib > 200)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = gwsim_resolve_device(&dev)) != CUDA_SUCCESS)
        return rc;
    int known;
    *pi = attribute_value(attrib, dev, &known); /* others read as 0 ("not supported") */
    return CUDA_SUCCESS;
}

/* ---- entry-point lookup --------------------------------------------------------------------- */
struct gwsim_entry {
    const char *name;
    void *fn;
};

static const struct gwsim_entry g_entries[] = {
#define GW_CUDA_FN(name, params) {#name, (void *)name},
#include "../../include/cuda_api_functions.h"
#undef GW_CUDA_FN
};

/* The newest version of a base name a caller of cudaVersion gets: cuGetProcAddress is asked for
 * "cuMemAlloc", and answers with cuMemAlloc_v2; the per-thread-stream flag picks _ptsz. */
static void *find_entry(const char *name)
{
    for (size_t i = 0; i < sizeof g_entries / sizeof g_entries[0]; i++)
        if (strcmp(g_entries[i].name, name) == 0)
            return g_entries[i].fn;
    return NULL;
}

static void *lookup(const char *symbol, int cudaVersion, cuuint64_t flags)
{
    char buf[160];
    if (strlen(symbol) > sizeof buf - 8)
        return NULL;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
        snprintf(buf, sizeof buf, "%s_ptsz", symbol);
        void *fn = find_entry(buf);
        if (fn)
            return fn;
    }
    if (strcmp(symbol, "cuGetProcAddress") == 0 && cudaVersion >= 12000)
        return find_entry("cuGetProcAddress_v2");
    if (strcmp(symbol, "cuGraphInstantiate") == 0 && cudaVersion >= 12000)
        return find_entry("cuGraphInstantiateWithFlags");
    if (strcmp(symbol, "cuEventElapsedTime") == 0 && cudaVersion >= 12080)
        return find_entry("cuEventElapsedTime_v2");
    if (strcmp(symbol, "cuDeviceGetUuid") == 0 && cudaVersion >= 11040)
        return find_entry("cuDeviceGetUuid_v2");
    if (strcmp(symbol, "cuGetProcAddress") != 0 && strcmp(symbol, "cuEventElapsedTime") != 0 &&
        strcmp(symbol, "cuDeviceGetUuid") != 0 && cudaVersion >= 3020) {
        snprintf(buf, sizeof buf, "%s_v2", symbol);
        void *fn = find_entry(buf);
        if (fn)
            return fn;
    }
    return find_entry(symbol);
}

GWSIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                          cuuint64_t flags,
                                          CUdriverProcAddressQueryResult *symbolStatus)
{
    if (symbol == NULL || pfn == NULL || flags > 3)
        return CUDA_ERROR_INVALID_VALUE;
    void *fn = lookup(symbol, cudaVersion, flags);
    *pfn = fn;
    if (symbolStatus != NULL)
        *symbolStatus = fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

GWSIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
