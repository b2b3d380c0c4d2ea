/*
 * nvml_api_functions.h - X-macro list of the NVML entry points gpuwarden knows that return
 * nvmlReturn_t (nvmlErrorString is declared on its own).  No include guard: define
 * GW_NVML_FN(name, params) and include it after nvml_api.h's (or nvml.h's) types.
 */
GW_NVML_FN(nvmlInit_v2, (void))
GW_NVML_FN(nvmlInitWithFlags, (unsigned int flags))
GW_NVML_FN(nvmlShutdown, (void))
GW_NVML_FN(nvmlSystemGetDriverVersion, (char *version, unsigned int length))
GW_NVML_FN(nvmlSystemGetNVMLVersion, (char *version, unsigned int length))
GW_NVML_FN(nvmlSystemGetCudaDriverVersion, (int *cudaDriverVersion))
GW_NVML_FN(nvmlSystemGetCudaDriverVersion_v2, (int *cudaDriverVersion))
GW_NVML_FN(nvmlDeviceGetCount_v2, (unsigned int *deviceCount))
GW_NVML_FN(nvmlDeviceGetHandleByIndex_v2, (unsigned int index, nvmlDevice_t *device))
GW_NVML_FN(nvmlDeviceGetHandleByUUID, (const char *uuid, nvmlDevice_t *device))
GW_NVML_FN(nvmlDeviceGetIndex, (nvmlDevice_t device, unsigned int *index))
GW_NVML_FN(nvmlDeviceGetName, (nvmlDevice_t device, char *name, unsigned int length))
GW_NVML_FN(nvmlDeviceGetUUID, (nvmlDevice_t device, char *uuid, unsigned int length))
GW_NVML_FN(nvmlDeviceGetMemoryInfo, (nvmlDevice_t device, nvmlMemory_t *memory))
GW_NVML_FN(nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t device, nvmlMemory_v2_t *memory))
GW_NVML_FN(nvmlDeviceGetComputeRunningProcesses_v2, (nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_v2_t *infos))
GW_NVML_FN(nvmlDeviceGetComputeRunningProcesses_v3, (nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos))
GW_NVML_FN(nvmlDeviceGetGraphicsRunningProcesses_v3, (nvmlDevice_t device,
                                                      unsigned int *infoCount,
                                                      nvmlProcessInfo_t *infos))
GW_NVML_FN(nvmlDeviceGetProcessUtilization, (nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp))
GW_NVML_FN(nvmlDeviceGetUtilizationRates, (nvmlDevice_t device, nvmlUtilization_t *utilization))
GW_NVML_FN(nvmlDeviceGetClockInfo, (nvmlDevice_t device, nvmlClockType_t type,
                                    unsigned int *clock))
GW_NVML_FN(nvmlDeviceGetPowerUsage, (nvmlDevice_t device, unsigned int *power))
GW_NVML_FN(nvmlDeviceGetEnforcedPowerLimit, (nvmlDevice_t device, unsigned int *limit))
GW_NVML_FN(nvmlDeviceGetSamples, (nvmlDevice_t device, nvmlSamplingType_t type,
                                  unsigned long long lastSeenTimeStamp,
                                  nvmlValueType_t *sampleValType, unsigned int *sampleCount,
                                  nvmlSample_t *samples))
