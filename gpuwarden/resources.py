"""Kubernetes resource names and the configuration defaults every component shares.

The names are configurable (a cluster may run gpuwarden beside another vGPU stack); these are the
defaults, kept from HAMi so existing pod specs work unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = [
    "DEFAULT_CORES",
    "DEFAULT_GPU_NUM",
    "DEFAULT_MEM_MIB",
    "DEVICE_MEMORY_SCALING",
    "DEVICE_SPLIT_COUNT",
    "DISABLE_CORE_LIMIT",
    "MIB",
    "MIG_STRATEGY",
    "NODE_LABEL_GPU_MEMORY",
    "RESOURCE_GPU",
    "RESOURCE_GPUCORES",
    "RESOURCE_GPUMEM",
    "RESOURCE_GPUMEM_PERCENTAGE",
    "RESOURCE_PRIORITY",
    "ResourceNames",
]

RESOURCE_GPU = "nvidia.com/gpu"  # number of GPUs (slices of distinct GPUs)
RESOURCE_GPUMEM = "nvidia.com/gpumem"  # MiB per GPU
RESOURCE_GPUMEM_PERCENTAGE = "nvidia.com/gpumem-percentage"  # percent of each GPU's memory
RESOURCE_GPUCORES = "nvidia.com/gpucores"  # percent of one GPU's compute
RESOURCE_PRIORITY = "nvidia.com/priority"  # 0 high, 1 low

# GPU feature discovery's node label: the GPU's memory in MiB.
NODE_LABEL_GPU_MEMORY = "nvidia.com/gpu.memory"

# Configuration defaults (HAMi's, so that a cluster moving over keeps its behaviour).
DEVICE_SPLIT_COUNT = 10
DEVICE_MEMORY_SCALING = 1.0
MIB = 1 << 20  # bytes in a MiB: the one definition (policy.units re-exports it)
DEFAULT_MEM_MIB = 5000  # when a pod gives no memory; 0 would mean the whole GPU
DEFAULT_CORES = 0  # percent; 0 = no compute limit, 100 = exclusive
DEFAULT_GPU_NUM = 1  # added when only gpumem / gpucores is requested
DISABLE_CORE_LIMIT = False
MIG_STRATEGY = "none"


@dataclass(frozen=True, slots=True)
class ResourceNames:
    gpu: str = RESOURCE_GPU
    gpumem: str = RESOURCE_GPUMEM
    gpumem_percentage: str = RESOURCE_GPUMEM_PERCENTAGE
    gpucores: str = RESOURCE_GPUCORES
    priority: str = RESOURCE_PRIORITY

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))
