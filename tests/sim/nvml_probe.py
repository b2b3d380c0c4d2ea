"""Print, as JSON, what real pynvml sees: devices, memory, processes, utilization.

Run in its own process with the simulated GPU's environment (LD_LIBRARY_PATH and
GPUWARDEN_SIM_STATE must be set before libnvidia-ml.so.1 is loaded, hence a subprocess).
Argument: the lastSeenTimeStamp (µs) for nvmlDeviceGetProcessUtilization, default 0.
"""

from __future__ import annotations

import json
import sys

import pynvml


def main() -> int:
    last_seen = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    pynvml.nvmlInit()
    out: dict = {"driver": pynvml.nvmlSystemGetDriverVersion(), "devices": []}
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        uuid = pynvml.nvmlDeviceGetUUID(h)
        same = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        mem2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
        util = pynvml.nvmlDeviceGetUtilizationRates(h)
        try:
            samples = [
                {"pid": s.pid, "timeStamp": s.timeStamp, "smUtil": s.smUtil}
                for s in pynvml.nvmlDeviceGetProcessUtilization(h, last_seen)
            ]
        except pynvml.NVMLError_NotFound:
            samples = None
        out["devices"].append({
            "index": pynvml.nvmlDeviceGetIndex(same),
            "name": pynvml.nvmlDeviceGetName(h),
            "uuid": uuid,
            "total": mem.total, "used": mem.used, "free": mem.free,
            "v2": {"total": mem2.total, "used": mem2.used, "free": mem2.free},
            "processes": [
                {"pid": p.pid, "used": p.usedGpuMemory}
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)
            ],
            "gpu_util": util.gpu,
            "samples": samples,
        })
    pynvml.nvmlShutdown()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
