"""gpuwarden's small shared package: version, resource names and defaults, the CLI entry point.

It holds only what several components need; nothing here talks to a GPU, the kernel or a cluster.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
