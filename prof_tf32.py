#!/usr/bin/env python3
"""One constant set of rung 15 (drvgemm_tf32_rung.VARIANTS) launched twice at
S^3, for a profiler: `ncu -k regex:mma_tf32 --launch-skip 1 --launch-count 1
python3 prof_tf32.py NAME [S]` profiles the second (warm) launch."""
import sys

import numpy as np

import drvgemm
from drvgemm import driver
from drvgemm.ladder import rung_kernel
from drvgemm.rungs import by_name
from drvgemm_tf32_rung import VARIANTS

name = sys.argv[1]
s = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
r = VARIANTS[name] if name in VARIANTS else by_name()[name]
kern = rung_kernel(r, True)
driver.set_function_attribute(kern.function, "MAX_DYNAMIC_SHARED_SIZE_BYTES", r.smem)
driver.set_function_attribute(kern.function, "PREFERRED_SHARED_MEMORY_CARVEOUT", 100)
rng = np.random.default_rng(0)
A = driver.to_device(rng.uniform(-1, 1, (s, s)).astype(np.float32))
B = driver.to_device(rng.uniform(-1, 1, (s, s)).astype(np.float32))
C = driver.empty((s, s), np.float32)
for _ in range(2):
    drvgemm.launch(kern, r.grid(s, s), r.block, [A, B, C, s, s, s, 1.0, 0.0], smem=r.smem)
driver.synchronize()
print(name, "blocks/SM:", driver.occupancy_max_active_blocks(kern.function, r.block[0], r.smem))
