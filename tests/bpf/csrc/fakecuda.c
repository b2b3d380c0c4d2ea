/* fakecuda: the smallest libcuda.so.1 stand-in the audit tests can attach to, independent of
 * the simulated driver: every entry point succeeds, hands out fresh fake handles, and keeps no
 * state.  Used where a second, different libcuda file is needed (rescan, per-file attach),
 * and so the audit's own tests do not depend on the simulator's accounting.
 */
#include <stddef.h>
#include <stdint.h>

#define API __attribute__((visibility("default")))

static uint64_t next_handle = 0x7f0000000000ull;

static uint64_t fresh(size_t bytes)
{
	uint64_t h = __atomic_fetch_add(&next_handle, (bytes + 0xfffu) & ~(uint64_t)0xfffu,
					__ATOMIC_RELAXED);
	return h + 0x1000u;
}

API int cuInit(unsigned flags);
API int cuInit(unsigned flags) { (void)flags; return 0; }
API int cuCtxCreate_v2(uint64_t *pctx, unsigned flags, int dev);
API int cuCtxCreate_v2(uint64_t *pctx, unsigned flags, int dev)
{ (void)flags; *pctx = fresh(64) | (unsigned)dev; return 0; }
API int cuDevicePrimaryCtxRetain(uint64_t *pctx, int dev);
API int cuDevicePrimaryCtxRetain(uint64_t *pctx, int dev) { *pctx = 0x1000u * (unsigned)(dev + 1); return 0; }
API int cuCtxSetCurrent(uint64_t ctx);
API int cuCtxSetCurrent(uint64_t ctx) { (void)ctx; return 0; }
API int cuMemAlloc_v2(uint64_t *dptr, size_t bytes);
API int cuMemAlloc_v2(uint64_t *dptr, size_t bytes) { *dptr = fresh(bytes); return 0; }
API int cuMemFree_v2(uint64_t dptr);
API int cuMemFree_v2(uint64_t dptr) { (void)dptr; return 0; }
API int cuLaunchKernel(void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e,
		       unsigned g, unsigned s, void *st, void **p, void **x);
API int cuLaunchKernel(void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e,
		       unsigned g, unsigned s, void *st, void **p, void **x)
{
	(void)f; (void)a; (void)b; (void)c; (void)d; (void)e; (void)g; (void)s; (void)st;
	(void)p; (void)x;
	return 0;
}

#define OUT1(name, T) API int name(T *out); API int name(T *out) { *out = fresh(64); return 0; }
#define NOP1(name, T) API int name(T a); API int name(T a) { (void)a; return 0; }

NOP1(cuCtxDestroy_v2, uint64_t)
NOP1(cuCtxPushCurrent_v2, uint64_t)
NOP1(cuDevicePrimaryCtxRelease_v2, int)
NOP1(cuMemRelease, uint64_t)
NOP1(cuArrayDestroy, uint64_t)
NOP1(cuMipmappedArrayDestroy, uint64_t)
OUT1(cuCtxPopCurrent_v2, uint64_t)

API int cuMemAllocManaged(uint64_t *dptr, size_t bytes, unsigned flags);
API int cuMemAllocManaged(uint64_t *dptr, size_t bytes, unsigned flags)
{ (void)flags; *dptr = fresh(bytes); return 0; }
API int cuMemAllocAsync(uint64_t *dptr, size_t bytes, void *stream);
API int cuMemAllocAsync(uint64_t *dptr, size_t bytes, void *stream)
{ (void)stream; *dptr = fresh(bytes); return 0; }
API int cuDeviceGetDefaultMemPool(uint64_t *pool, int dev);
API int cuDeviceGetDefaultMemPool(uint64_t *pool, int dev) { *pool = 0x100u + (unsigned)dev; return 0; }
API int cuMemAllocFromPoolAsync(uint64_t *dptr, size_t bytes, uint64_t pool, void *stream);
API int cuMemAllocFromPoolAsync(uint64_t *dptr, size_t bytes, uint64_t pool, void *stream)
{ (void)pool; (void)stream; *dptr = fresh(bytes); return 0; }
API int cuMemFreeAsync(uint64_t dptr, void *stream);
API int cuMemFreeAsync(uint64_t dptr, void *stream) { (void)dptr; (void)stream; return 0; }
API int cuMemAllocPitch_v2(uint64_t *dptr, size_t *pitch, size_t width, size_t height, unsigned e);
API int cuMemAllocPitch_v2(uint64_t *dptr, size_t *pitch, size_t width, size_t height, unsigned e)
{ (void)e; *pitch = (width + 511u) & ~(size_t)511u; *dptr = fresh(*pitch * height); return 0; }
API int cuMemCreate(uint64_t *handle, size_t bytes, const void *prop, unsigned long long flags);
API int cuMemCreate(uint64_t *handle, size_t bytes, const void *prop, unsigned long long flags)
{ (void)prop; (void)flags; *handle = fresh(bytes); return 0; }
API int cuArrayCreate_v2(uint64_t *handle, const void *desc);
API int cuArrayCreate_v2(uint64_t *handle, const void *desc) { (void)desc; *handle = fresh(64); return 0; }
API int cuArray3DCreate_v2(uint64_t *handle, const void *desc);
API int cuArray3DCreate_v2(uint64_t *handle, const void *desc) { (void)desc; *handle = fresh(64); return 0; }
API int cuMipmappedArrayCreate(uint64_t *handle, const void *desc, unsigned levels);
API int cuMipmappedArrayCreate(uint64_t *handle, const void *desc, unsigned levels)
{ (void)desc; (void)levels; *handle = fresh(64); return 0; }
