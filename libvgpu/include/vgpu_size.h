/* vgpu_size.h: gpuwarden's one size syntax, for every C reader of a size (libvgpu's
 * CUDA_DEVICE_MEMORY_LIMIT(_<i>), the simulated driver's GPUWARDEN_SIM_MEMORY and
 * GPUWARDEN_SIM_CTX_OVERHEAD). The Python side is policy/units.py; docs/sizes.md describes both.
 *
 *   <digits>[.<digits>][<unit>]
 *   unit: K, Ki, KiB, M, Mi, MiB, G, Gi, GiB, T, Ti, TiB in any case, all binary (3000m is
 *         3000 MiB, as HAMi writes it), or B for bytes; none: `bare_shift` (0 = bytes, the
 *         contract of those variables; 20 = MiB)
 *
 * The result must be a whole number of bytes (1.5GiB yes, 1.5B no). KB/MB/GB/TB are refused:
 * they usually mean powers of 1000. */
#ifndef VGPU_SIZE_H
#define VGPU_SIZE_H

#include <stdint.h>

/* What a message should say is valid. */
#define VGPU_SIZE_SYNTAX "a number with a binary unit K, M, G or T (e.g. 3000m, 512MiB, " \
                         "1.5GiB), B for bytes, or a byte count"

/* 0 and *out set, or -1 (malformed, or more than 2^64-1 bytes). */
int vgpu_parse_size(const char *text, unsigned bare_shift, uint64_t *out);

/* The unsigned decimal at *text (digits only), *text moved past it: 0, or -1 when there is no
 * digit there or the number does not fit in 64 bits. */
int vgpu_parse_u64(const char **text, uint64_t *out);

#endif /* VGPU_SIZE_H */
