/* hooks_nvml.c: NVML memory info shows the container's slice (total = limit, used = the
 * container's usage, free = min(limit - used, physical free)) for devices of the container's
 * region, found by UUID; other devices and unlimited ones show the real values. */
#include "budget.h"
#include "core.h"
#include "hook.h"

static int vgpu_nvml_entry(nvmlDevice_t device)
{
    int e = vgpu_entry_of_nvml(device);
    if (e >= 0)
        vgpu_maybe_reclaim();
    return e;
}

nvmlReturn_t vgpu_hook_nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    if (vgpu_nvml_ready() != 0 || vgpu_nvml.nvmlDeviceGetMemoryInfo == NULL)
        return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t rc = vgpu_nvml.nvmlDeviceGetMemoryInfo(device, memory);
    if (rc != NVML_SUCCESS || memory == NULL)
        return rc;
    int e = vgpu_nvml_entry(device);
    if (e < 0)
        return rc;
    struct vgpu_mem_view v =
        vgpu_budget_view(vgpu_core.region.r, (unsigned)e, memory->free, memory->total);
    memory->total = v.total;
    memory->used = v.used;
    memory->free = v.free;
    return rc;
}
VGPU_EXPORT_HOOK(nvmlDeviceGetMemoryInfo);

nvmlReturn_t vgpu_hook_nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    if (vgpu_nvml_ready() != 0 || vgpu_nvml.nvmlDeviceGetMemoryInfo_v2 == NULL)
        return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t rc = vgpu_nvml.nvmlDeviceGetMemoryInfo_v2(device, memory);
    if (rc != NVML_SUCCESS || memory == NULL)
        return rc;
    int e = vgpu_nvml_entry(device);
    if (e < 0)
        return rc;
    struct vgpu_mem_view v =
        vgpu_budget_view(vgpu_core.region.r, (unsigned)e, memory->free, memory->total);
    if (v.total != memory->total) {
        memory->total = v.total;
        memory->reserved = 0; /* the slice has no driver reservation of its own */
        memory->used = v.used;
        memory->free = v.free;
    }
    return rc;
}
VGPU_EXPORT_HOOK(nvmlDeviceGetMemoryInfo_v2);
