"""Runs every registered rung once at a few odd shapes, for compute-sanitizer:

    compute-sanitizer --tool memcheck python benchmarks/sanitize.py [RUNG ...]
    compute-sanitizer --tool memcheck python benchmarks/sanitize.py --softmax [RUNG ...]

Shapes are small (the tools slow kernels down by orders of magnitude) but odd
in every dimension, so every edge-tile guard is exercised; beta != 0 reads C,
beta == 0 must not. Rungs that split K (Rung.splits) also run split-K through
their host side's launches() (partials into a workspace, then the reduction).
Rung 20 also runs through gemm()'s cached path on rotating device buffers
(its rebinding of maps and staging copies). Exits non-zero if a result is
wrong."""
import argparse
import sys

import numpy as np

import drvgemm
from drvgemm.ladders.gemm.dispatch import input_dtype, rung
from drvgemm.ladders.gemm.registry import rung_kernel
from drvgemm.runtime.launch import launch_config

SPLITS = (2, 3, 16)   # 16 pieces of K = 17 or 33: pieces of one k-tile (and clamping)
# Rung 20 folds a few pieces of a one-wave 16-bit split in the kernel (2 and 3
# above); these run folded whatever the rule says (tf32, more pieces, edge tiles).
FOLDED_SPLITS = (3, 8)
# Rung 30 past ONE_LEVEL_MAX_SPLITS: its two-level reduction (groups of 8 and
# 16 splits, a short last group), at a K long enough for that many splits.
SMALL_M_SPLITS = (48, 128)
SMALL_M_SPLIT_SHAPES = [(5, 70, 2053), (33, 136, 2053)]

# N = 136 and 264 are multiples of 8: C through the TMA-store epilogue of the
# Hopper rungs (fp32 and 16-bit C); the others take the direct stores.
SHAPES = [(1, 1, 1), (67, 45, 33), (130, 129, 17), (257, 131, 70), (70, 136, 40),
          (129, 264, 65)]


SOFTMAX_SHAPES = [(1, 1), (3, 1000), (5, 4099), (2, 33000), (1, 131072),
                  # the window rungs' paths: lane groups, odd groups, a block per odd row,
                  # a cluster per vocabulary row, split rows (resident and streamed)
                  (9, 7), (33, 33), (3, 12345), (2, 50257), (3, 262145), (1, 2_500_001),
                  # a cluster per 16-bit row held packed: at least a row an SM
                  (133, 50257),
                  # rung 10: many blocks of short rows, each block's run at another phase;
                  # rows whose 16-bit builds rotate their slots (crowded banks)
                  (2049, 31), (1025, 64), (700, 127),
                  # 16-bit rows one past a config's slots (a row longer tile)
                  (1025, 33), (300, 65), (40, 1025),
                  # one lane a row in 128-thread blocks, 40 and 64 slots
                  (700, 37), (700, 63),
                  # rung 11: persistent clusters walking several rows each through their
                  # landing buffers (fp32 72001: the 512 x 9 x 4 slice)
                  (300, 50257), (20, 72001),
                  # split rows whose chunks are held packed (16-bit) or partly in shared
                  # memory (fp32)
                  (15, 300001),
                  # rung 04's packed rows (whole rows a 16-byte vector), ending in a
                  # partial vector and a partial block
                  (4099, 1), (2051, 2)]
SOFTMAX_16BIT_SHAPES = [(1000, 8), (15, 300001), (1027, 4),
                        # split chunks held packed with a part in shared memory (rung
                        # 09: 40 rows take one pass there, two on the packed chunks alone)
                        (40, 300001),
                        # rung 10's four lanes: crowded rows read as 16-byte vectors of
                        # the tile (127, 129), rows beside them on word slots (105, 137)
                        (700, 127), (300, 129), (500, 105), (200, 137),
                        # rung 11's slices between the others: 512 x 5 x 2, 512 x 7 x 7,
                        # 512 x 8 x 7
                        (20, 36001), (20, 200019), (20, 202048)]
# (x offset, y offset, pitch pad) in elements: rows that start off 16 bytes, at a
# pitch above the row, x and y of different phase
SOFTMAX_VIEWS = [(1, 1, 0), (3, 3, 5), (2, 1, 3)]


class _View:
    """rows x cols at pitch ld, ``off`` elements into ``buf`` (a DeviceArray)."""

    def __init__(self, buf, off, rows, cols, ld, dtype):
        self.dtype = np.dtype(dtype)
        size = self.dtype.itemsize
        self.__cuda_array_interface__ = {"shape": (rows, cols), "typestr": "|V%d" % size,
                                         "data": (buf.ptr + off * size, False),
                                         "strides": (ld * size, size), "version": 3}


def main_softmax(names):
    """Each softmax rung (and auto) at odd shapes, then the window rungs (and
    auto) on offset and pitched views in fp32 and bf16; rows must sum to 1."""
    import ml_dtypes
    from drvgemm.ladders.softmax import registry as sm
    names = names or sm.kernels() + ["auto"]
    bad = 0
    for name in names:
        for rows, cols in SOFTMAX_SHAPES:
            x = np.random.default_rng(rows * cols).standard_normal((rows, cols)).astype(np.float32)
            try:
                y = drvgemm.softmax(x, kernel=name)
            except ValueError as e:  # a rung that does not take this row length says so
                print(f"skip {name} {rows}x{cols}: {e}", flush=True)
                continue
            if not np.allclose(y.sum(axis=1), 1.0, atol=1e-4):
                bad += 1
                print(f"MISMATCH softmax {name} {rows}x{cols}", flush=True)
        # contiguous 16-bit rows: the configs only 16-bit rows reach (rung 04's
        # one lane of one 16-byte vector, rung 09's packed chunks)
        for rows, cols in SOFTMAX_16BIT_SHAPES:
            x = np.random.default_rng(rows + cols).standard_normal((rows, cols)).astype(
                ml_dtypes.bfloat16)
            try:
                y = drvgemm.softmax(x, kernel=name)
            except ValueError as e:
                print(f"skip {name} {rows}x{cols} bf16: {e}", flush=True)
                continue
            if not np.allclose(y.astype(np.float64).sum(axis=1), 1.0, atol=3e-2):
                bad += 1
                print(f"MISMATCH softmax {name} {rows}x{cols} bf16", flush=True)
        print(f"ran softmax {name}", flush=True)
    # the rungs that take offset views: the window rungs (any pitch) and rung 10
    # (contiguous rows at any element offset; it skips the pitched views)
    window = [n for n in names if n == "auto" or n.startswith(("softmax_07", "softmax_08",
                                                              "softmax_09", "softmax_10",
                                                              "softmax_11"))]
    for name in window:
        for rows, cols in SOFTMAX_SHAPES:
            for xoff, yoff, pad in SOFTMAX_VIEWS:
                for dt, tol in ((np.float32, 1e-4), (ml_dtypes.bfloat16, 3e-2)):
                    size = np.dtype(dt).itemsize
                    ld = cols + pad
                    n = (rows - 1) * ld + cols + 8
                    x = np.random.default_rng(cols).standard_normal((rows, cols)).astype(dt)
                    xb = drvgemm.empty((n,), dt)
                    # zeroed: the copy back reads the padding between the rows too,
                    # which initcheck would report as uninitialised (an element the
                    # kernel forgot stays 0 and its row does not sum to 1)
                    yb = drvgemm.empty((n,), dt).fill_bytes(0)
                    host = np.zeros(n, dt)
                    for r in range(rows):
                        host[xoff + r * ld:xoff + r * ld + cols] = x[r]
                    xb.copy_from_host(host)
                    try:
                        drvgemm.softmax(_View(xb, xoff, rows, cols, ld, dt), kernel=name,
                                        out=_View(yb, yoff, rows, cols, ld, dt))
                    except ValueError as e:
                        print(f"skip {name} {rows}x{cols} view: {e}", flush=True)
                        break
                    h = yb.to_host().astype(np.float64)
                    y = np.stack([h[yoff + r * ld:yoff + r * ld + cols] for r in range(rows)])
                    if not np.allclose(y.sum(axis=1), 1.0, atol=tol):
                        bad += 1
                        print(f"MISMATCH softmax {name} {rows}x{cols} view ({xoff}, {yoff}, "
                              f"+{pad}) {np.dtype(dt)} ({size} B)", flush=True)
                    xb.free()
                    yb.free()
        print(f"ran softmax {name} on views", flush=True)
    drvgemm.synchronize()
    return 1 if bad else 0


def main(names):
    names = names or drvgemm.kernels()
    bad = 0
    for name in names:
        r = rung(name)
        dt = input_dtype(r.precision)
        for m, n, k in SHAPES:
            rng = np.random.default_rng(m * n + k)
            a = rng.integers(-4, 5, (m, k)).astype(np.float32).astype(dt)
            b = rng.integers(-4, 5, (k, n)).astype(np.float32).astype(dt)
            c0 = rng.integers(-4, 5, (m, n)).astype(np.float32)
            # A 16-bit C (rungs that write one) holds the exact result rounded once.
            for c_dt in ((np.float32, dt) if r.narrow_output else (np.float32,)):
                for beta in (0.0, 2.0):
                    c = c0.astype(c_dt)
                    out = drvgemm.gemm(a, b, c, alpha=1.0, beta=beta, kernel=name)
                    ref = a.astype(np.float64) @ b.astype(np.float64) + beta * c0
                    want = ref.astype(np.float32).astype(c_dt)
                    if not np.array_equal(out.astype(np.float64), want.astype(np.float64)):
                        bad += 1
                        print(f"MISMATCH {name} {m}x{n}x{k} beta={beta} C {np.dtype(c_dt)}",
                              flush=True)
        bad += run_split_k(r)
        if r.host == "tma":
            bad += run_rebound(r)
        print(f"ran {name}", flush=True)
    drvgemm.synchronize()
    return 1 if bad else 0


def run_split_k(r):
    """K in pieces (every rung whose host side splits K): exact integers,
    beta 0 and 2, fp32 C and a C of the inputs' type where the rung writes one;
    rung 20's folded in the kernel too."""
    from drvgemm.ladders.gemm import hopper
    bad = 0
    dt = input_dtype(r.precision)
    plan = [(split, SHAPES, "auto") for split in SPLITS if split in r.splits]
    if r.host == "small_m":
        plan += [(split, SMALL_M_SPLIT_SHAPES, "auto") for split in SMALL_M_SPLITS]
    if r.host == "tma":
        plan += [(split, SHAPES, True) for split in FOLDED_SPLITS]
    for split, shapes, fold in plan:
        for m, n, k in shapes:
            rng = np.random.default_rng(m * n + k + split)
            a = rng.integers(-4, 5, (m, k)).astype(np.float32).astype(dt)
            b = rng.integers(-4, 5, (k, n)).astype(np.float32).astype(dt)
            c0 = rng.integers(-4, 5, (m, n)).astype(np.float32)
            A, B = drvgemm.to_device(a), drvgemm.to_device(b)
            # zeroed: rung 30 keeps its arrival counters in the workspace
            ws = drvgemm.to_device(np.zeros(max(1, r.workspace_bytes(m, n, split) // 4),
                                            np.float32))
            for c_dt in ((np.float32, dt) if r.narrow_output else (np.float32,)):
                narrow = c_dt is not np.float32
                for beta in (0.0, 2.0):
                    C = drvgemm.to_device(c0.astype(c_dt))
                    # the instantiation the dispatcher would take for these pointers
                    kern = rung_kernel(r, r.host_side.aligned(r, m, n, k, A.ptr, B.ptr, C.ptr),
                                       narrow_output=narrow)
                    if fold is True:
                        steps = hopper.split_launches(r, kern, A, B, C, m, n, k, 1.0, beta,
                                                      narrow_output=narrow, split=split,
                                                      workspace=ws, fold=True)
                    else:
                        steps = r.launches(kern, A, B, C, m, n, k, 1.0, beta,
                                           narrow_output=narrow, split=split, workspace=ws)
                    for step_kernel, cfg in steps:
                        launch_config(step_kernel, cfg)
                    ref = a.astype(np.float64) @ b.astype(np.float64) + beta * c0
                    want = ref.astype(np.float32).astype(c_dt)
                    if not np.array_equal(C.to_host().astype(np.float64),
                                          want.astype(np.float64)):
                        bad += 1
                        print(f"MISMATCH {r.name} split={split} fold={fold} {m}x{n}x{k} beta={beta} "
                              f"C {np.dtype(c_dt)}", flush=True)
    return bad


def run_rebound(r):
    """gemm()'s cached path on device operands (hopper.TmaBinding): three
    sets of buffers in turn, twice, so every call after the first re-encodes
    its maps over other buffers -- and, for rows that need padding, copies
    into the binding's own staging buffer; every result checked exactly."""
    bad = 0
    dt = input_dtype(r.precision)
    for m, n, k in SHAPES[1:]:
        sets = []
        for i in range(3):
            rng = np.random.default_rng(m + n + k + i)
            a = rng.integers(-4, 5, (m, k)).astype(np.float32).astype(dt)
            b = rng.integers(-4, 5, (k, n)).astype(np.float32).astype(dt)
            want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
            sets.append((want, drvgemm.to_device(a), drvgemm.to_device(b),
                         drvgemm.to_device(np.full((m, n), np.nan, np.float32))))
        for want, A, B, C in sets + sets:
            drvgemm.gemm(A, B, C, kernel=r.name)
        for want, A, B, C in sets:
            if not np.array_equal(C.to_host(), want):
                bad += 1
                print(f"MISMATCH {r.name} rebound {m}x{n}x{k}", flush=True)
    return bad


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="every registered rung once at odd shapes, "
                                             "for compute-sanitizer; non-zero exit if a result is wrong")
    ap.add_argument("--softmax", action="store_true",
                    help="the softmax rungs (names: softmax rungs or auto) instead of the GEMM rungs")
    ap.add_argument("names", nargs="*", metavar="RUNG", help="only these (default: all)")
    args = ap.parse_args()
    sys.exit(main_softmax(args.names) if args.softmax else main(args.names))
