/* cudaprobe: THE test program that drives the CUDA driver API from a script of operations, the
 * way an application reaches the driver.  The libvgpu, simulated-driver, eBPF audit, end-to-end
 * tests and the benchmarks all run it; tests/cudaprobe.py builds it and reads its output.
 *
 *   cudaprobe OP...        one operation a word: NAME or NAME:ARG:ARG...
 *
 * Arguments are numbers (decimal, or hex with 0x); an array format is a number or float, half,
 * u8.  The first line is "cudaprobe pid=<pid> entry=<how>", then one line per operation once
 * its call returned:  "<OP> rc=<CUresult> [key=value ...]".  A failed call does not stop the
 * script: the next operation runs.  Bad scripts (unknown operation, wrong arguments) end with
 * exit status 2 and a message on stderr; a missing driver or entry point with status 3.
 *
 * How the entry points are reached (the first operation may choose; default dlsym):
 *   entry:dlsym      dlopen("libcuda.so.1") + dlsym of the ABI names (what the CUDA runtime does)
 *   entry:procaddr   dlsym("cuGetProcAddress_v2"), then cuGetProcAddress(base name, 13000)
 *   (built with -DGW_DIRECT and -lcuda: the names linked at build time; entry=direct)
 *
 * Contexts:   init  primary:DEV (retain + make current)  ctx:DEV (cuCtxCreate)  release:DEV
 *             destroy (the last created)  push (the last created)  pop  sync
 * Memory (each success is object number K, counted from 0 in creation order; printed obj=K):
 *   alloc:BYTES  managed:BYTES  async:BYTES  pool:BYTES (device 0's default pool)
 *   pitch:WIDTH:HEIGHT:ELEMBYTES  vmm:BYTES:DEV (cuMemCreate)
 *   vmmmap:BYTES (rounded up to the granularity, created, mapped and made accessible on dev 0)
 *   array:W:H:FMT:CH  array3d:W:H:D:FMT:CH  mip:W:H:D:FMT:CH:LEVELS
 *   free:K (object K, whatever its kind; async ones are synchronised)  free (the newest live)
 *   freeall (every live object, newest first)  freeunknown (an address never allocated)
 *   fill:BYTES (allocate until refused; count=)  loop:PAIRS:BYTES (alloc+free pairs, timed)
 *   info (cuMemGetInfo: free= total=)  total (cuDeviceTotalMem of device 0: total=)
 * Kernels:    launch:COUNT:GRID (back to back; a simulated kernel runs GRID microseconds)
 *             duty:ON_MS:OFF_MS:TOTAL_MS (ON_MS kernel, sync, OFF_MS pause, for TOTAL_MS)
 * Control:    wait (prints its line, then waits for a line or the end of stdin)
 *             stdin (read further operations from stdin, one a line, until its end)
 *             sleep:MS (a workload's pause, not synchronisation)  exit (_exit(0) at once)
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_api.h"

#define GW_CUDA_FN(name, params) static CUresult(*p_##name) params;
#include "cuda_api_functions.h"
#undef GW_CUDA_FN

#define MAX_ARGS 7
#define MAX_OBJS (1 << 17)

enum kind { K_PTR, K_ASYNC, K_VMM, K_ARRAY, K_MIP };
struct obj {
    enum kind kind;
    int live;
    unsigned long long key;
};
static struct obj objs[MAX_OBJS];
static int nobj;
static CUcontext last_ctx;
static CUfunction kernel;
static const char *entry = "dlsym";

/* ---- entry points */

static void *need(void *fn, const char *name)
{
    if (fn == NULL) {
        fprintf(stderr, "cudaprobe: the driver has no %s (entry %s)\n", name, entry);
        exit(3);
    }
    return fn;
}
/* F(cuMemAlloc_v2): the entry point, or exit 3 naming it when the driver lacks it. */
#define F(name) ((__typeof__(p_##name))need((void *)p_##name, #name))

#ifdef GW_DIRECT
static void load(void)
{
    entry = "direct";
#define GW_CUDA_FN(name, params) p_##name = &name;
#include "cuda_api_functions.h"
#undef GW_CUDA_FN
}
#else
/* cuMemAlloc_v2 -> cuMemAlloc, cuLaunchKernel_ptsz -> cuLaunchKernel (+ the per-thread flag) */
static void *by_proc_address(const char *abi)
{
    char base[128];
    snprintf(base, sizeof base, "%s", abi);
    size_t n = strlen(base);
    cuuint64_t flags = 0;
    if (n > 5 && strcmp(base + n - 5, "_ptsz") == 0) {
        base[n -= 5] = '\0';
        flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    }
    char *v = strrchr(base, '_');
    if (v != NULL && v[1] == 'v' && v[2] >= '0' && v[2] <= '9')
        *v = '\0';
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    if (p_cuGetProcAddress_v2(base, &fn, 13000, flags, &st) != CUDA_SUCCESS)
        return NULL;
    return fn;
}

static void load(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "cudaprobe: dlopen(libcuda.so.1): %s\n", dlerror());
        exit(3);
    }
    *(void **)&p_cuGetProcAddress_v2 = dlsym(lib, "cuGetProcAddress_v2");
    int procaddr = strcmp(entry, "procaddr") == 0;
    if (procaddr)
        need((void *)p_cuGetProcAddress_v2, "cuGetProcAddress_v2");
#define GW_CUDA_FN(name, params)                                                                   \
    *(void **)&p_##name = procaddr ? by_proc_address(#name) : dlsym(lib, #name);
#include "cuda_api_functions.h"
#undef GW_CUDA_FN
}
#endif

/* ---- the script */

struct op {
    const char *text;       /* the whole word, echoed on the output line */
    char name[32];          /* before the first ':' */
    int nargs;
    const char *args[MAX_ARGS];
    char buf[256];
};

static void bad(const struct op *op, const char *why)
{
    fprintf(stderr, "cudaprobe: operation '%s': %s (see tests/progs/cudaprobe.c for the list)\n",
            op->text, why);
    exit(2);
}

static unsigned long long num(const struct op *op, int i)
{
    const char *s = op->args[i];
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (*s == '\0' || *s == '-' || *end != '\0' || errno != 0) {
        char why[160];
        snprintf(why, sizeof why, "argument %d '%s' is not a number (decimal or 0x hex)", i + 1,
                 s);
        bad(op, why);
    }
    return v;
}

static CUarray_format format(const struct op *op, int i)
{
    static const struct {
        const char *name;
        CUarray_format fmt;
    } names[] = {{"float", CU_AD_FORMAT_FLOAT}, {"half", CU_AD_FORMAT_HALF},
                 {"u8", CU_AD_FORMAT_UNSIGNED_INT8}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (strcmp(op->args[i], names[k].name) == 0)
            return names[k].fmt;
    return (CUarray_format)num(op, i);
}

static void split(struct op *op, const char *text)
{
    memset(op, 0, sizeof *op);
    op->text = text;
    snprintf(op->buf, sizeof op->buf, "%s", text);
    char *save = NULL, *tok = strtok_r(op->buf, ":", &save);
    snprintf(op->name, sizeof op->name, "%s", tok ? tok : "");
    while ((tok = strtok_r(NULL, ":", &save)) != NULL) {
        if (op->nargs == MAX_ARGS)
            bad(op, "too many arguments");
        op->args[op->nargs++] = tok;
    }
}

static int add(enum kind k, unsigned long long key)
{
    if (nobj == MAX_OBJS) {
        fprintf(stderr, "cudaprobe: more than %d objects\n", MAX_OBJS);
        exit(2);
    }
    objs[nobj] = (struct obj){k, 1, key};
    return nobj++;
}

static CUresult release(int k)
{
    struct obj *o = &objs[k];
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    switch (o->kind) {
    case K_PTR:
        rc = F(cuMemFree_v2)(o->key);
        break;
    case K_ASYNC:
        rc = F(cuMemFreeAsync)(o->key, NULL);
        if (rc == CUDA_SUCCESS)
            rc = F(cuCtxSynchronize)();
        break;
    case K_VMM:
        rc = F(cuMemRelease)(o->key);
        break;
    case K_ARRAY:
        rc = F(cuArrayDestroy)((CUarray)(uintptr_t)o->key);
        break;
    case K_MIP:
        rc = F(cuMipmappedArrayDestroy)((CUmipmappedArray)(uintptr_t)o->key);
        break;
    }
    if (rc == CUDA_SUCCESS)
        o->live = 0;
    return rc;
}

static int newest_live(void)
{
    int k = nobj - 1;
    while (k >= 0 && !objs[k].live)
        k--;
    return k;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void sleep_ms(unsigned long long ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A driver that checks function handles (the simulator) needs a loaded one; a stand-in driver
 * without modules gets any non-NULL pointer. */
static CUfunction need_kernel(void)
{
    static char stand_in[64];
    if (kernel != NULL)
        return kernel;
    kernel = (CUfunction)stand_in;
    CUmodule mod = NULL;
    if (p_cuModuleLoadData != NULL && p_cuModuleGetFunction != NULL &&
        p_cuModuleLoadData(&mod, "cudaprobe image") == CUDA_SUCCESS)
        p_cuModuleGetFunction(&kernel, mod, "busy");
    return kernel;
}

static CUmemAllocationProp device_prop(int dev)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    return prop;
}

/* The fields of the operation's line, printed after its rc once the call returned. */
static char fields[512];
#define OUT(...)                                                                                   \
    do {                                                                                           \
        size_t used_ = strlen(fields);                                                             \
        snprintf(fields + used_, sizeof fields - used_, " " __VA_ARGS__);                          \
    } while (0)
#define TRACK(kind, key)                                                                           \
    do {                                                                                           \
        if (rc == CUDA_SUCCESS)                                                                    \
            OUT("obj=%d", add(kind, (unsigned long long)(key)));                                  \
    } while (0)

static void run_script(int n, char **words);

/* One operation: its arguments checked, its call(s) made, its output line printed. */
static void run(struct op *op)
{
    static const struct {
        const char *name;
        int nargs;
        const char *usage;
    } arity[] = {
        {"entry", 1, "entry:dlsym|procaddr"},  {"init", 0, "init"},
        {"primary", 1, "primary:DEV"},           {"ctx", 1, "ctx:DEV"},
        {"release", 1, "release:DEV"},           {"destroy", 0, "destroy"},
        {"push", 0, "push"},                     {"pop", 0, "pop"},
        {"sync", 0, "sync"},                     {"alloc", 1, "alloc:BYTES"},
        {"managed", 1, "managed:BYTES"},         {"async", 1, "async:BYTES"},
        {"pool", 1, "pool:BYTES"},               {"pitch", 3, "pitch:WIDTH:HEIGHT:ELEMBYTES"},
        {"vmm", 2, "vmm:BYTES:DEV"},             {"vmmmap", 1, "vmmmap:BYTES"},
        {"array", 4, "array:W:H:FMT:CH"},        {"array3d", 5, "array3d:W:H:D:FMT:CH"},
        {"mip", 6, "mip:W:H:D:FMT:CH:LEVELS"},   {"free", -1, "free or free:K"},
        {"freeall", 0, "freeall"},               {"freeunknown", 0, "freeunknown"},
        {"fill", 1, "fill:BYTES"},               {"loop", 2, "loop:PAIRS:BYTES"},
        {"info", 0, "info"},                     {"total", 0, "total"},
        {"launch", 2, "launch:COUNT:GRID"},      {"duty", 3, "duty:ON_MS:OFF_MS:TOTAL_MS"},
        {"wait", 0, "wait"},                     {"stdin", 0, "stdin"},
        {"sleep", 1, "sleep:MS"},                {"exit", 0, "exit"},
    };
    size_t a = 0;
    while (a < sizeof arity / sizeof arity[0] && strcmp(arity[a].name, op->name) != 0)
        a++;
    if (a == sizeof arity / sizeof arity[0])
        bad(op, "unknown operation");
    int want = arity[a].nargs;
    if (want >= 0 ? op->nargs != want : op->nargs > 1) {
        char why[160];
        snprintf(why, sizeof why, "wrong number of arguments; the form is %s", arity[a].usage);
        bad(op, why);
    }

    const char *n = op->name;
    CUresult rc = CUDA_SUCCESS;
    CUdeviceptr d = 0;
    if (strcmp(n, "entry") == 0) {
        bad(op, "must be the first operation");
    } else if (strcmp(n, "stdin") == 0) {
        char line[256];
        while (fgets(line, sizeof line, stdin) != NULL) {
            line[strcspn(line, "\n")] = '\0';
            char *w = line;
            run_script(1, &w);
        }
        printf("%s rc=0\n", op->text);
        return;
    } else if (strcmp(n, "wait") == 0) {
        char line[64];
        printf("%s rc=0\n", op->text);
        if (fgets(line, sizeof line, stdin) == NULL) {
            /* the end of stdin: carry on */
        }
        return;
    } else if (strcmp(n, "exit") == 0) {
        printf("%s rc=0\n", op->text);
        _exit(0);
    }

    fields[0] = '\0';
    if (strcmp(n, "init") == 0) {
        rc = F(cuInit)(0);
    } else if (strcmp(n, "primary") == 0) {
        rc = F(cuDevicePrimaryCtxRetain)(&last_ctx, (CUdevice)num(op, 0));
        if (rc == CUDA_SUCCESS)
            rc = F(cuCtxSetCurrent)(last_ctx);
        OUT("ctx=%p", (void *)last_ctx);
    } else if (strcmp(n, "ctx") == 0) {
        rc = F(cuCtxCreate_v2)(&last_ctx, 0, (CUdevice)num(op, 0));
        OUT("ctx=%p", (void *)last_ctx);
    } else if (strcmp(n, "release") == 0) {
        rc = F(cuDevicePrimaryCtxRelease_v2)((CUdevice)num(op, 0));
    } else if (strcmp(n, "destroy") == 0) {
        rc = F(cuCtxDestroy_v2)(last_ctx);
    } else if (strcmp(n, "push") == 0) {
        rc = F(cuCtxPushCurrent_v2)(last_ctx);
    } else if (strcmp(n, "pop") == 0) {
        CUcontext c = NULL;
        rc = F(cuCtxPopCurrent_v2)(&c);
    } else if (strcmp(n, "sync") == 0) {
        double t0 = now_ns();
        rc = F(cuCtxSynchronize)();
        OUT("ns=%.0f", now_ns() - t0);
    } else if (strcmp(n, "alloc") == 0) {
        size_t bytes = (size_t)num(op, 0);
        rc = F(cuMemAlloc_v2)(&d, bytes);
        OUT("ptr=0x%llx bytes=%zu", d, bytes);
        TRACK(K_PTR, d);
    } else if (strcmp(n, "managed") == 0) {
        size_t bytes = (size_t)num(op, 0);
        rc = F(cuMemAllocManaged)(&d, bytes, CU_MEM_ATTACH_GLOBAL);
        OUT("ptr=0x%llx bytes=%zu", d, bytes);
        TRACK(K_PTR, d);
    } else if (strcmp(n, "async") == 0) {
        size_t bytes = (size_t)num(op, 0);
        rc = F(cuMemAllocAsync)(&d, bytes, NULL);
        OUT("ptr=0x%llx bytes=%zu", d, bytes);
        TRACK(K_ASYNC, d);
    } else if (strcmp(n, "pool") == 0) {
        size_t bytes = (size_t)num(op, 0);
        CUmemoryPool pool = NULL;
        rc = F(cuDeviceGetDefaultMemPool)(&pool, 0);
        if (rc == CUDA_SUCCESS)
            rc = F(cuMemAllocFromPoolAsync)(&d, bytes, pool, NULL);
        OUT("ptr=0x%llx bytes=%zu", d, bytes);
        TRACK(K_ASYNC, d);
    } else if (strcmp(n, "pitch") == 0) {
        size_t w = (size_t)num(op, 0), h = (size_t)num(op, 1), pitch = 0;
        rc = F(cuMemAllocPitch_v2)(&d, &pitch, w, h, (unsigned)num(op, 2));
        OUT("ptr=0x%llx pitch=%zu bytes=%zu", d, pitch, pitch * h);
        TRACK(K_PTR, d);
    } else if (strcmp(n, "vmm") == 0) {
        size_t bytes = (size_t)num(op, 0);
        CUmemAllocationProp prop = device_prop((int)num(op, 1));
        CUmemGenericAllocationHandle h = 0;
        rc = F(cuMemCreate)(&h, bytes, &prop, 0);
        OUT("handle=0x%llx bytes=%zu", h, bytes);
        TRACK(K_VMM, h);
    } else if (strcmp(n, "vmmmap") == 0) {
        size_t bytes = (size_t)num(op, 0), gran = 0;
        CUmemAllocationProp prop = device_prop(0);
        CUmemGenericAllocationHandle h = 0;
        rc = F(cuMemGetAllocationGranularity)(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        if (rc == CUDA_SUCCESS) {
            bytes = (bytes + gran - 1) / gran * gran;
            rc = F(cuMemCreate)(&h, bytes, &prop, 0);
        }
        if (rc == CUDA_SUCCESS)
            rc = F(cuMemAddressReserve)(&d, bytes, 0, 0, 0);
        if (rc == CUDA_SUCCESS)
            rc = F(cuMemMap)(d, bytes, 0, h, 0);
        if (rc == CUDA_SUCCESS) {
            CUmemAccessDesc desc = {.location = prop.location,
                                    .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
            rc = F(cuMemSetAccess)(d, bytes, &desc, 1);
        }
        OUT("va=0x%llx handle=0x%llx bytes=%zu", d, h, bytes);
        TRACK(K_VMM, h);
    } else if (strcmp(n, "array") == 0) {
        CUarray h = NULL;
        CUDA_ARRAY_DESCRIPTOR desc = {.Width = (size_t)num(op, 0), .Height = (size_t)num(op, 1),
                                      .Format = format(op, 2),
                                      .NumChannels = (unsigned)num(op, 3)};
        rc = F(cuArrayCreate_v2)(&h, &desc);
        OUT("handle=%p", (void *)h);
        TRACK(K_ARRAY, (uintptr_t)h);
    } else if (strcmp(n, "array3d") == 0 || strcmp(n, "mip") == 0) {
        CUDA_ARRAY3D_DESCRIPTOR desc = {.Width = (size_t)num(op, 0),
                                        .Height = (size_t)num(op, 1),
                                        .Depth = (size_t)num(op, 2), .Format = format(op, 3),
                                        .NumChannels = (unsigned)num(op, 4), .Flags = 0};
        if (n[0] == 'a') {
            CUarray h = NULL;
            rc = F(cuArray3DCreate_v2)(&h, &desc);
            OUT("handle=%p", (void *)h);
            TRACK(K_ARRAY, (uintptr_t)h);
        } else {
            CUmipmappedArray h = NULL;
            rc = F(cuMipmappedArrayCreate)(&h, &desc, (unsigned)num(op, 5));
            OUT("handle=%p", (void *)h);
            TRACK(K_MIP, (uintptr_t)h);
        }
    } else if (strcmp(n, "free") == 0) {
        int k = op->nargs == 1 ? (int)num(op, 0) : newest_live();
        if (op->nargs == 1 && (k >= nobj || !objs[k].live))
            bad(op, "no such live object (objects are numbered from 0 in creation order)");
        if (k >= 0)
            rc = release(k);
    } else if (strcmp(n, "freeall") == 0) {
        for (int k = newest_live(); k >= 0 && rc == CUDA_SUCCESS; k = newest_live())
            rc = release(k);
    } else if (strcmp(n, "freeunknown") == 0) {
        rc = F(cuMemFree_v2)((CUdeviceptr)0x7ead0000ull);
    } else if (strcmp(n, "fill") == 0) {
        size_t bytes = (size_t)num(op, 0);
        unsigned long long count = 0;
        while (nobj < MAX_OBJS && (rc = F(cuMemAlloc_v2)(&d, bytes)) == CUDA_SUCCESS) {
            add(K_PTR, d);
            count++;
        }
        OUT("count=%llu", count);
    } else if (strcmp(n, "loop") == 0) {
        unsigned long long pairs = num(op, 0);
        size_t bytes = (size_t)num(op, 1);
        __typeof__(p_cuMemAlloc_v2) alloc = F(cuMemAlloc_v2);
        __typeof__(p_cuMemFree_v2) mfree = F(cuMemFree_v2);
        double t0 = now_ns();
        for (unsigned long long k = 0; k < pairs && rc == CUDA_SUCCESS; k++) {
            rc = alloc(&d, bytes);
            if (rc == CUDA_SUCCESS)
                rc = mfree(d);
        }
        OUT("pairs=%llu ns_per_pair=%.1f", pairs, pairs ? (now_ns() - t0) / (double)pairs : 0.0);
    } else if (strcmp(n, "info") == 0) {
        size_t fr = 0, tot = 0;
        rc = F(cuMemGetInfo_v2)(&fr, &tot);
        OUT("free=%zu total=%zu", fr, tot);
    } else if (strcmp(n, "total") == 0) {
        size_t tot = 0;
        rc = F(cuDeviceTotalMem_v2)(&tot, 0);
        OUT("total=%zu", tot);
    } else if (strcmp(n, "launch") == 0) {
        unsigned long long count = num(op, 0);
        unsigned grid = (unsigned)num(op, 1);
        __typeof__(p_cuLaunchKernel) launch = F(cuLaunchKernel);
        CUfunction f = need_kernel();
        double t0 = now_ns();
        for (unsigned long long k = 0; k < count && rc == CUDA_SUCCESS; k++)
            rc = launch(f, grid, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
        OUT("launches=%llu ns_per_launch=%.1f", count,
            count ? (now_ns() - t0) / (double)count : 0.0);
    } else if (strcmp(n, "duty") == 0) {
        unsigned long long on = num(op, 0), off = num(op, 1), total = num(op, 2), kernels = 0;
        CUfunction f = need_kernel();
        double end = now_ns() + (double)total * 1e6;
        while (rc == CUDA_SUCCESS && now_ns() < end) {
            rc = F(cuLaunchKernel)(f, (unsigned)(on * 1000), 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
            if (rc == CUDA_SUCCESS)
                rc = F(cuCtxSynchronize)();
            sleep_ms(off);
            kernels++;
        }
        OUT("kernels=%llu", kernels);
    } else if (strcmp(n, "sleep") == 0) {
        sleep_ms(num(op, 0));
    }
    printf("%s rc=%d%s\n", op->text, (int)rc, fields);
}

static void run_script(int n, char **words)
{
    for (int i = 0; i < n; i++) {
        struct op op;
        split(&op, words[i]);
        run(&op);
    }
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int first = 1;
    if (argc > 1 && strncmp(argv[1], "entry:", 6) == 0) {
        struct op op;
        split(&op, argv[1]);
#ifdef GW_DIRECT
        bad(&op, "this build links the driver directly; it has no other entry");
#else
        if (op.nargs != 1 || (strcmp(op.args[0], "dlsym") != 0 &&
                              strcmp(op.args[0], "procaddr") != 0))
            bad(&op, "the form is entry:dlsym or entry:procaddr");
        entry = argv[1] + 6;
#endif
        first = 2;
    }
    load();
    printf("cudaprobe pid=%d entry=%s\n", (int)getpid(), entry);
    run_script(argc - first, argv + first);
    return 0;
}
