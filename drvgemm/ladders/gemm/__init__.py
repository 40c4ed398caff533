"""The GEMM ladder: registry.py (the rungs), their host sides -- host.py (the
plain signature), hopper.py (rung 20), small_m.py (rung 30), split_k.py (the
split-K workspace and reduction they share) -- plan.py (the dispatcher's
choice), dispatch.py (gemm()), tuned.py (drvgemm tune's winners)."""
