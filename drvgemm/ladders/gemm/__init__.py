"""The GEMM ladder: registry.py (the rungs), hopper.py (rung 20's host side), dispatch.py (gemm())."""
