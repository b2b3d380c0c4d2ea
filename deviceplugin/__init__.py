"""The kubelet device plugin (gRPC, v1beta1): advertises GPU slices and answers Allocate with
the env, mounts and preload that bring libvgpu into a container. Not built yet (see README).
"""
