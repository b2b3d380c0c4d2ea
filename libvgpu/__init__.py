"""libvgpu: the C shim preloaded into GPU processes (src/, include/) and the simulated NVIDIA
driver (sim/). The Python modules here only locate the built libraries, describe the simulated
GPU's environment and read the shared region; they never load the shim into this process.
"""
