"""The kernel ladders, one folder each (mirroring cu/): a registry of rungs
declared once with their constants, and a dispatcher that picks, compiles and
launches one. Named apart from the public functions drvgemm.gemm() and
drvgemm.softmax(), so that no module shadows them."""
