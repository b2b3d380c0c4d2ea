/* Prints the layout of the structs and enums bpf/lib shares with Python, and of the CUDA ABI
 * pieces the probes read, one "name value" per line, for test_struct_layout_matches_c.py. */
#include <stddef.h>
#include <stdio.h>
#include "include/gw_cuda_abi.h"
#include "lib/errors.h"
#include "lib/events.h"
#ifdef WITH_CUDA_API
#include "cuda_api.h"
#endif

#define SIZE(t) printf("sizeof %s %zu\n", #t, sizeof(struct t))
#define OFF(t, f) printf("offsetof %s.%s %zu\n", #t, #f, offsetof(struct t, f))
#define VAL(n) printf("value %s %lld\n", #n, (long long)(n))

int main(void)
{
	SIZE(gw_event);
	OFF(gw_event, ts_ns);
	OFF(gw_event, bytes);
	OFF(gw_event, ptr);
	OFF(gw_event, cgroup_id);
	OFF(gw_event, pid);
	OFF(gw_event, tid);
	OFF(gw_event, device);
	OFF(gw_event, kind);
	OFF(gw_event, flags);
	OFF(gw_event, result);
	VAL(GW_DEVICE_UNKNOWN);
	VAL(GW_EVENT_KILLED);
	VAL(GW_EVENT_FAILED);
	VAL(GW_ERR__COUNT);
#define VGPU_EVENT_KIND(name, value) VAL(GW_KIND_##name);
#include "hooks.def"
#undef VGPU_EVENT_KIND
#define E(n) VAL(GW_ERR_##n)
	E(LOST_EVENT); E(PTRS_FULL); E(LEDGER_FULL); E(PROCS_FULL); E(CTX_FULL);
	E(THREADS_FULL); E(PENDING_FULL); E(LAUNCHES_FULL); E(READ_USER); E(CTX_STACK);
	E(KILL_FAILED); E(UNKNOWN_FORMAT); E(REPLACED_PTR);
#ifdef WITH_CUDA_API
	/* The probes' view of the CUDA ABI against libvgpu's header (itself checked against
	 * NVIDIA's cuda.h by tests/sim). */
	_Static_assert(offsetof(CUmemAllocationProp, location) + offsetof(CUmemLocation, type) ==
			       GW_MEMPROP_LOCATION_TYPE_OFF, "location.type");
	_Static_assert(offsetof(CUmemAllocationProp, location) + offsetof(CUmemLocation, id) ==
			       GW_MEMPROP_LOCATION_ID_OFF, "location.id");
	_Static_assert(CU_MEM_LOCATION_TYPE_DEVICE == GW_MEM_LOCATION_TYPE_DEVICE, "device");
	_Static_assert(sizeof(CUDA_ARRAY_DESCRIPTOR) == sizeof(struct gw_array_desc), "2d");
	_Static_assert(offsetof(CUDA_ARRAY_DESCRIPTOR, Height) ==
			       offsetof(struct gw_array_desc, height), "2d.h");
	_Static_assert(offsetof(CUDA_ARRAY_DESCRIPTOR, Format) ==
			       offsetof(struct gw_array_desc, format), "2d.f");
	_Static_assert(offsetof(CUDA_ARRAY_DESCRIPTOR, NumChannels) ==
			       offsetof(struct gw_array_desc, num_channels), "2d.c");
	_Static_assert(sizeof(CUDA_ARRAY3D_DESCRIPTOR) == sizeof(struct gw_array3d_desc), "3d");
	_Static_assert(offsetof(CUDA_ARRAY3D_DESCRIPTOR, Depth) ==
			       offsetof(struct gw_array3d_desc, depth), "3d.d");
	_Static_assert(offsetof(CUDA_ARRAY3D_DESCRIPTOR, Format) ==
			       offsetof(struct gw_array3d_desc, format), "3d.f");
	_Static_assert(offsetof(CUDA_ARRAY3D_DESCRIPTOR, NumChannels) ==
			       offsetof(struct gw_array3d_desc, num_channels), "3d.c");
	_Static_assert(offsetof(CUDA_ARRAY3D_DESCRIPTOR, Flags) ==
			       offsetof(struct gw_array3d_desc, flags), "3d.fl");
	static const int formats[][2] = {
		{CU_AD_FORMAT_UNSIGNED_INT8, 1}, {CU_AD_FORMAT_SIGNED_INT8, 1},
		{CU_AD_FORMAT_UNSIGNED_INT16, 2}, {CU_AD_FORMAT_SIGNED_INT16, 2},
		{CU_AD_FORMAT_HALF, 2}, {CU_AD_FORMAT_UNSIGNED_INT32, 4},
		{CU_AD_FORMAT_SIGNED_INT32, 4}, {CU_AD_FORMAT_FLOAT, 4},
	};
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
		if (gw_array_format_bytes((__u32)formats[i][0]) != (__u32)formats[i][1])
			printf("format-mismatch %d\n", formats[i][0]);
	printf("cuda-abi checked\n");
#endif
	return 0;
}
