"""The kubelet device plugin (gRPC, v1beta1): advertises each GPU as deviceSplitCount slices and
answers Allocate with the env, mounts and preload that bring libvgpu, the limits and the
container's region into the container.

Layout: `devices` and `allocation` are the pure core (plain data in and out: no gRPC,
Kubernetes, NVML or files; an import contract keeps it so); `server` is the gRPC edge, `kube`
the API server, `nvml` the GPUs, `api` the kubelet's .proto files; `cli` is
`gpuwarden deviceplugin`. It never imports the agent: the agent finds the containers through the
pod API and the region folders the plugin writes.
"""
