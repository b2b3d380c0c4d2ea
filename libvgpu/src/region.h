/* region.h: opening, validating and maintaining the shared region (layout: vgpu_region.h).
 * Nothing here is on a hot path: open, device registration, slot claim and reclaim of dead
 * processes run at start, after fork, before refusing an allocation and on memory queries. */
#ifndef VGPU_REGION_OPS_H
#define VGPU_REGION_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vgpu_region.h"

struct vgpu_region_handle {
    struct vgpu_region *r;
    int fd; /* -1 for a process-local region */
};

/* Map the region file at path, creating and formatting it if empty, formatting it again if its
 * creator died before writing the magic.  A formatted region is opened without the file lock;
 * creation waits for it at most VGPU_REGION_LOCK_WAIT_MS.  0, or -1 with why filled (foreign
 * file, wrong size, magic or version, I/O error, lock held too long). */
int vgpu_region_open(const char *path, struct vgpu_region_handle *h, char *why, size_t why_len);
/* A process-local region (no file): anonymous memory, formatted. */
int vgpu_region_open_private(struct vgpu_region_handle *h);

/* Check a mapped region's header: 0, or -1 with why filled. */
int vgpu_region_validate(const struct vgpu_region *r, uint64_t file_bytes, char *why,
                         size_t why_len);
void vgpu_region_format(struct vgpu_region *r);

/* A GPU UUID as NVML and CUDA_VISIBLE_DEVICES write it: "GPU-xxxxxxxx-xxxx-...", 40 chars. */
#define VGPU_UUID_TEXT 48
void vgpu_uuid_text(const uint8_t uuid[16], char out[VGPU_UUID_TEXT]);

/* Device entry index for uuid, or -1. */
int vgpu_region_find_device(const struct vgpu_region *r, const uint8_t uuid[16]);
/* How long a process waits for the region's file lock before it gives up (and fails closed). */
#define VGPU_REGION_LOCK_WAIT_MS 2000u
#define VGPU_REGION_TABLE_FULL (-1)
#define VGPU_REGION_LOCK_TIMEOUT (-2)
/* Find or add (under the file lock, waited for at most VGPU_REGION_LOCK_WAIT_MS) the entry for
 * uuid; a new entry gets limit.  Index, VGPU_REGION_TABLE_FULL when all entries are taken, or
 * VGPU_REGION_LOCK_TIMEOUT. */
int vgpu_region_add_device(struct vgpu_region_handle *h, const uint8_t uuid[16], uint64_t limit);

/* Liveness of a slot's owner: 1 alive, 0 dead (exited, a zombie, or pid reused). */
typedef int (*vgpu_alive_fn)(uint32_t pid, uint64_t start_time);
int vgpu_proc_alive(uint32_t pid, uint64_t start_time);
/* Reads a small file (a /proc or /sys one) whole into buf, NUL-terminated: its length, or -1
 * when unreadable. */
ssize_t vgpu_read_small(const char *path, char *buf, size_t size);
/* Field 22 of /proc/<pid>/stat; 0 when unreadable. */
uint64_t vgpu_proc_start_time(uint32_t pid);

/* Claim a free slot for (pid, start_time); NULL when none is free. */
struct vgpu_region_proc *vgpu_region_claim_slot(struct vgpu_region *r, uint32_t pid,
                                                uint64_t start_time);
/* Free a slot, giving back what it still counts (used at exit of the owner). */
void vgpu_region_release_slot(struct vgpu_region *r, struct vgpu_region_proc *slot);
/* Free the active slots of (pid, start_time), giving back what they count: a process claims
 * its slot once per program, so one it finds is its program's before an exec (which keeps the
 * pid and start time but runs no atexit, and closes the driver's files, opened close-on-exec,
 * with the GPU memory under them). `start_time` 0 (unknown) frees nothing. Returns the bytes
 * given back. */
uint64_t vgpu_region_release_previous(struct vgpu_region *r, uint32_t pid, uint64_t start_time);
/* Reclaim slots whose owner is dead; when no slot is left active, reset leaked device counters.
 * Never waits for the file lock: the reset is skipped while someone else holds it.
 * Returns the number of slots reclaimed. */
int vgpu_region_reclaim(struct vgpu_region_handle *h, vgpu_alive_fn alive);

#endif /* VGPU_REGION_OPS_H */
