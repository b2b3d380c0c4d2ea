"""The DRA driver (`gpuwarden draplugin`): Kubernetes' own scheduler places fractions of a GPU
(Dynamic Resource Allocation with consumable capacity), libvgpu and the agent enforce them.

Layout: `core` is the pure core (the ResourceSlice from the GPUs; a claim's allocation to its
regions, env, mounts and CDI spec, through the device plugin's plan code); `server` the kubelet
plugin's gRPC edge, files and the slice's upkeep; `kube` the API server; `checkpoint` the
prepared claims across restarts; `api` the kubelet's .proto files; `cli` the command.
"""
