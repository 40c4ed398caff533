"""Measurement tools built on the runtime and the ladders: the GEMM and
memory benchmarks, the softmax sweep, Nsight Compute, instruction ceilings,
plots, cuBLAS baselines and the results records they all write."""
