"""The memory-lesson kernels: registry.py."""
