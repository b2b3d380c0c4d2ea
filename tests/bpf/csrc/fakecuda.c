/* fakecuda: the smallest libcuda.so.1 stand-in the audit tests can attach to, independent of
 * the simulated driver: every entry point succeeds, hands out fresh fake handles, and keeps no
 * state.  Used where a second, different libcuda file is needed (rescan, per-file attach).
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
