/* cuda_ops: drive libcuda.so.1 (the simulated driver, or any libcuda) from a script on argv,
 * for the eBPF audit tests and benchmark.  Each operation prints one line after the call
 * returns ("returned <op> ..."), so a test can tell whether a call ever came back.
 *
 *   init | ctx DEV | primary DEV | release DEV | destroy | push | pop
 *   alloc N | managed N | async N | pool N | pitch WIDTH HEIGHT ELEM | vmm N DEV
 *   array W H FMT CH | array3d W H D FMT CH | mipmap W H D FMT CH LEVELS
 *   free | freeall | loop N SIZE | launch N | wait | exit
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUarray;
typedef void *CUmipmappedArray;
typedef void *CUfunction;
typedef void *CUmemoryPool;
typedef unsigned long long CUmemGenericAllocationHandle;

typedef struct {
	int type;
	int requestedHandleTypes;
	struct {
		int type;
		int id;
	} location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} MemProp;

typedef struct {
	size_t Width, Height;
	int Format;
	unsigned NumChannels;
} ArrayDesc;

typedef struct {
	size_t Width, Height, Depth;
	int Format;
	unsigned NumChannels, Flags;
} Array3DDesc;

enum { NS_DEVPTR, NS_ASYNC, NS_VMM, NS_ARRAY, NS_MIPMAP };

struct live {
	int ns;
	uint64_t handle;
};

static void *lib;
static struct live lives[4096];
static int nlive;
static CUcontext last_ctx;

static void *sym(const char *name)
{
	void *p = dlsym(lib, name);
	if (!p) {
		fprintf(stderr, "cuda_ops: libcuda.so.1 has no %s\n", name);
		exit(3);
	}
	return p;
}

#define CALL(type, name, ...) (((type)sym(name))(__VA_ARGS__))

static unsigned long long num(char **argv, int *i, int argc)
{
	if (*i + 1 >= argc) {
		fprintf(stderr, "cuda_ops: %s needs more arguments\n", argv[*i]);
		exit(2);
	}
	*i += 1;
	return strtoull(argv[*i], NULL, 0);
}

static void track(int ns, uint64_t handle)
{
	if (nlive < 4096)
		lives[nlive++] = (struct live){ns, handle};
}

static CUresult release(struct live l)
{
	switch (l.ns) {
	case NS_ASYNC:
		return CALL(CUresult (*)(CUdeviceptr, CUstream), "cuMemFreeAsync", l.handle, NULL);
	case NS_VMM:
		return CALL(CUresult (*)(CUmemGenericAllocationHandle), "cuMemRelease", l.handle);
	case NS_ARRAY:
		return CALL(CUresult (*)(CUarray), "cuArrayDestroy", (CUarray)l.handle);
	case NS_MIPMAP:
		return CALL(CUresult (*)(CUmipmappedArray), "cuMipmappedArrayDestroy",
			    (CUmipmappedArray)l.handle);
	default:
		return CALL(CUresult (*)(CUdeviceptr), "cuMemFree_v2", l.handle);
	}
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "cuda_ops: %s\n", dlerror());
		return 3;
	}
	printf("pid %d\n", (int)getpid());
	for (int i = 1; i < argc; i++) {
		const char *op = argv[i];
		CUresult rc = 0;
		CUdeviceptr d = 0;
		if (!strcmp(op, "init")) {
			rc = CALL(CUresult (*)(unsigned), "cuInit", 0);
			printf("returned init rc=%d\n", rc);
		} else if (!strcmp(op, "ctx")) {
			int dev = (int)num(argv, &i, argc);
			rc = CALL(CUresult (*)(CUcontext *, unsigned, int), "cuCtxCreate_v2", &last_ctx, 0,
				  dev);
			printf("returned ctx rc=%d ctx=%p\n", rc, last_ctx);
		} else if (!strcmp(op, "primary")) {
			int dev = (int)num(argv, &i, argc);
			rc = CALL(CUresult (*)(CUcontext *, int), "cuDevicePrimaryCtxRetain", &last_ctx,
				  dev);
			if (!rc)
				rc = CALL(CUresult (*)(CUcontext), "cuCtxSetCurrent", last_ctx);
			printf("returned primary rc=%d ctx=%p\n", rc, last_ctx);
		} else if (!strcmp(op, "release")) {
			int dev = (int)num(argv, &i, argc);
			rc = CALL(CUresult (*)(int), "cuDevicePrimaryCtxRelease_v2", dev);
			printf("returned release rc=%d\n", rc);
		} else if (!strcmp(op, "destroy")) {
			rc = CALL(CUresult (*)(CUcontext), "cuCtxDestroy_v2", last_ctx);
			printf("returned destroy rc=%d\n", rc);
		} else if (!strcmp(op, "push")) {
			rc = CALL(CUresult (*)(CUcontext), "cuCtxPushCurrent_v2", last_ctx);
			printf("returned push rc=%d\n", rc);
		} else if (!strcmp(op, "pop")) {
			CUcontext c = NULL;
			rc = CALL(CUresult (*)(CUcontext *), "cuCtxPopCurrent_v2", &c);
			printf("returned pop rc=%d\n", rc);
		} else if (!strcmp(op, "alloc") || !strcmp(op, "managed") || !strcmp(op, "async") ||
			   !strcmp(op, "pool")) {
			size_t n = (size_t)num(argv, &i, argc);
			int ns = NS_DEVPTR;
			if (op[0] == 'a' && op[1] == 'l') {
				rc = CALL(CUresult (*)(CUdeviceptr *, size_t), "cuMemAlloc_v2", &d, n);
			} else if (op[0] == 'm') {
				rc = CALL(CUresult (*)(CUdeviceptr *, size_t, unsigned), "cuMemAllocManaged",
					  &d, n, 1u);
			} else if (op[0] == 'a') {
				rc = CALL(CUresult (*)(CUdeviceptr *, size_t, CUstream), "cuMemAllocAsync", &d,
					  n, NULL);
				ns = NS_ASYNC;
			} else {
				CUmemoryPool pool = NULL;
				CALL(CUresult (*)(CUmemoryPool *, int), "cuDeviceGetDefaultMemPool", &pool, 0);
				rc = CALL(CUresult (*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream),
					  "cuMemAllocFromPoolAsync", &d, n, pool, NULL);
				ns = NS_ASYNC;
			}
			if (!rc)
				track(ns, d);
			printf("returned %s rc=%d ptr=0x%llx bytes=%zu\n", op, rc, d, n);
		} else if (!strcmp(op, "pitch")) {
			size_t w = (size_t)num(argv, &i, argc), h = (size_t)num(argv, &i, argc);
			unsigned e = (unsigned)num(argv, &i, argc);
			size_t pitch = 0;
			rc = CALL(CUresult (*)(CUdeviceptr *, size_t *, size_t, size_t, unsigned),
				  "cuMemAllocPitch_v2", &d, &pitch, w, h, e);
			if (!rc)
				track(NS_DEVPTR, d);
			printf("returned pitch rc=%d ptr=0x%llx bytes=%zu pitch=%zu\n", rc, d, pitch * h,
			       pitch);
		} else if (!strcmp(op, "vmm")) {
			size_t n = (size_t)num(argv, &i, argc);
			MemProp prop;
			memset(&prop, 0, sizeof(prop));
			prop.type = 1;          /* CU_MEM_ALLOCATION_TYPE_PINNED */
			prop.location.type = 1; /* CU_MEM_LOCATION_TYPE_DEVICE */
			prop.location.id = (int)num(argv, &i, argc);
			CUmemGenericAllocationHandle h = 0;
			rc = CALL(CUresult (*)(CUmemGenericAllocationHandle *, size_t, const MemProp *,
					       unsigned long long),
				  "cuMemCreate", &h, n, &prop, 0ull);
			if (!rc)
				track(NS_VMM, h);
			printf("returned vmm rc=%d handle=0x%llx bytes=%zu\n", rc, h, n);
		} else if (!strcmp(op, "array")) {
			ArrayDesc a = {0};
			a.Width = (size_t)num(argv, &i, argc);
			a.Height = (size_t)num(argv, &i, argc);
			a.Format = (int)num(argv, &i, argc);
			a.NumChannels = (unsigned)num(argv, &i, argc);
			CUarray arr = NULL;
			rc = CALL(CUresult (*)(CUarray *, const ArrayDesc *), "cuArrayCreate_v2", &arr, &a);
			if (!rc)
				track(NS_ARRAY, (uint64_t)(uintptr_t)arr);
			printf("returned array rc=%d handle=%p\n", rc, arr);
		} else if (!strcmp(op, "array3d") || !strcmp(op, "mipmap")) {
			Array3DDesc a = {0};
			a.Width = (size_t)num(argv, &i, argc);
			a.Height = (size_t)num(argv, &i, argc);
			a.Depth = (size_t)num(argv, &i, argc);
			a.Format = (int)num(argv, &i, argc);
			a.NumChannels = (unsigned)num(argv, &i, argc);
			void *arr = NULL;
			if (op[0] == 'a') {
				rc = CALL(CUresult (*)(CUarray *, const Array3DDesc *), "cuArray3DCreate_v2",
					  &arr, &a);
				if (!rc)
					track(NS_ARRAY, (uint64_t)(uintptr_t)arr);
			} else {
				unsigned levels = (unsigned)num(argv, &i, argc);
				rc = CALL(CUresult (*)(CUmipmappedArray *, const Array3DDesc *, unsigned),
					  "cuMipmappedArrayCreate", &arr, &a, levels);
				if (!rc)
					track(NS_MIPMAP, (uint64_t)(uintptr_t)arr);
			}
			printf("returned %s rc=%d handle=%p\n", op, rc, arr);
		} else if (!strcmp(op, "free")) {
			if (nlive > 0)
				rc = release(lives[--nlive]);
			printf("returned free rc=%d\n", rc);
		} else if (!strcmp(op, "freeall")) {
			while (nlive > 0 && !rc)
				rc = release(lives[--nlive]);
			printf("returned freeall rc=%d\n", rc);
		} else if (!strcmp(op, "loop")) {
			unsigned long long n = num(argv, &i, argc);
			size_t size = (size_t)num(argv, &i, argc);
			CUresult (*alloc)(CUdeviceptr *, size_t) =
				(CUresult (*)(CUdeviceptr *, size_t))sym("cuMemAlloc_v2");
			CUresult (*mfree)(CUdeviceptr) = (CUresult (*)(CUdeviceptr))sym("cuMemFree_v2");
			double t0 = now_ns();
			for (unsigned long long k = 0; k < n && !rc; k++) {
				rc = alloc(&d, size);
				if (!rc)
					rc = mfree(d);
			}
			double t1 = now_ns();
			printf("returned loop rc=%d pairs=%llu ns_per_pair=%.1f\n", rc, n,
			       n ? (t1 - t0) / (double)n : 0.0);
		} else if (!strcmp(op, "launch")) {
			unsigned long long n = num(argv, &i, argc);
			CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
					   unsigned, unsigned, CUstream, void **, void **) =
				(CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
					      unsigned, unsigned, CUstream, void **,
					      void **))sym("cuLaunchKernel");
			static char fake_function[64];
			CUfunction f = (CUfunction)fake_function;
			/* A driver that checks handles (the simulator) needs a real function. */
			CUresult (*load)(void **, const void *) =
				(CUresult (*)(void **, const void *))dlsym(lib, "cuModuleLoadData");
			CUresult (*getf)(CUfunction *, void *, const char *) =
				(CUresult (*)(CUfunction *, void *, const char *))dlsym(
					lib, "cuModuleGetFunction");
			void *mod = NULL;
			if (load && getf && load(&mod, "gpuwarden-audit-test") == 0)
				getf(&f, mod, "kernel");
			double t0 = now_ns();
			for (unsigned long long k = 0; k < n && !rc; k++)
				rc = launch(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
			double t1 = now_ns();
			printf("returned launch rc=%d launches=%llu ns_per_launch=%.1f\n", rc, n,
			       n ? (t1 - t0) / (double)n : 0.0);
		} else if (!strcmp(op, "wait")) {
			char line[64];
			printf("waiting\n");
			if (!fgets(line, sizeof(line), stdin))
				return 0;
		} else if (!strcmp(op, "exit")) {
			printf("exiting\n");
			_exit(0);
		} else {
			fprintf(stderr, "cuda_ops: unknown operation %s\n", op);
			return 2;
		}
		if (rc)
			fprintf(stderr, "cuda_ops: %s failed: CUresult %d\n", op, rc);
	}
	return 0;
}
