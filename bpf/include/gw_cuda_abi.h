/* The few pieces of the CUDA driver ABI that the audit probes read from user memory.
 *
 * Only what is needed to size an allocation from its call arguments: the device of a
 * CUmemAllocationProp, the two array descriptors and the byte size of an array format.
 * Compilable both by BCC (BPF) and by a host C compiler (tests/bpf/test_struct_layout_matches_c.py
 * compares these offsets with libvgpu/include/cuda_api.h).
 */
#ifndef GW_CUDA_ABI_H
#define GW_CUDA_ABI_H

#include <linux/types.h>

/* CUmemAllocationProp: { int type; int requestedHandleTypes; CUmemLocation { int type; int id; }
 * location; void *win32HandleMetaData; struct allocFlags; }.  The device ordinal is location.id. */
#define GW_MEMPROP_LOCATION_TYPE_OFF 8
#define GW_MEMPROP_LOCATION_ID_OFF 12
#define GW_MEM_LOCATION_TYPE_DEVICE 1

/* CUDA_ARRAY_DESCRIPTOR (cuArrayCreate_v2). */
struct gw_array_desc {
	__u64 width;
	__u64 height;
	__u32 format;
	__u32 num_channels;
};

/* CUDA_ARRAY3D_DESCRIPTOR (cuArray3DCreate_v2, cuMipmappedArrayCreate). */
struct gw_array3d_desc {
	__u64 width;
	__u64 height;
	__u64 depth;
	__u32 format;
	__u32 num_channels;
	__u32 flags;
	__u32 pad_;
};

/* Bytes per channel of a CUarray_format; 0 for a format the audit does not know. */
static inline __u32 gw_array_format_bytes(__u32 format)
{
	switch (format) {
	case 0x01: /* CU_AD_FORMAT_UNSIGNED_INT8 */
	case 0x08: /* CU_AD_FORMAT_SIGNED_INT8 */
		return 1;
	case 0x02: /* CU_AD_FORMAT_UNSIGNED_INT16 */
	case 0x09: /* CU_AD_FORMAT_SIGNED_INT16 */
	case 0x10: /* CU_AD_FORMAT_HALF */
		return 2;
	case 0x03: /* CU_AD_FORMAT_UNSIGNED_INT32 */
	case 0x0a: /* CU_AD_FORMAT_SIGNED_INT32 */
	case 0x20: /* CU_AD_FORMAT_FLOAT */
		return 4;
	default:
		return 0;
	}
}

#endif /* GW_CUDA_ABI_H */
