"""Candidate configurations of the TMA + wgmma rung (cu/gemm/20_tma_wgmma.cu)
side by side in one run, against cuBLAS, to choose the rung's registered
defines:

    python benchmarks/wgmma_sweep.py [--variants NAME ... | all] [--shapes 4096 8192]
        [--extra NAME:KEY=V,KEY=V ...] [--rounds 5] [--batch 10] [--reps 5]
        [--no-followup] [--json PATH] [--list]

--extra adds a variant on the spot (its defines over the common base, e.g.
"tmastore_g4:EPILOGUE=2,GROUP=4"); --list shows the named ones.

1. Every variant is compiled (in parallel processes) and its resources
   checked: no spills, no local memory, and 168 registers at entry for the
   warp-specialised ones (the setmaxnreg budget); a variant that fails is
   dropped.
2. Every variant is checked for exact results (small-integer inputs) at an
   odd shape, 1999 x 2100 x 520 (edge tiles in both directions, more tiles
   than SMs, a ring that wraps mid-tile), once with its own grid and once with
   5 blocks walking all 144 tiles. The checks run in a child
   process, so a variant that faults cannot take the others down.
3. At each square shape, the variants that passed and the cuBLAS calls
   (torch.matmul; cublasGemmEx with bf16 and with fp32 output) are timed
   round-robin: `rounds` rounds, each entry in a rotated order, each time the
   median over `reps` batches of `batch` back-to-back launches between two
   events, L2 flushed before each batch. An entry's time is the median of its
   round medians (its spread is printed). Every entry's output is compared
   with a float64 reference on a subset of rows before it is timed. Next to
   the ratio of medians, the paired ratio: per round, best cuBLAS time /
   variant time, its median and range over the rounds (drift of the clocks
   over the run cancels in it).
4. Follow-up (unless --no-followup): the best variant (geometric mean over the
   square shapes of best-cuBLAS time / variant time), the registered default
   and the non-persistent step at 4096x4096x4100 and 8191x8193x4096 (operands
   that the copy engine cannot take are staged on every call, as gemm() does,
   and that copy is timed), and the tf32 variants at 4096.

Prints a sorted table per shape (with the prediction each variant was added
with), the defines to register, and writes the records (DESIGN.md results
format, plus variant/defines/rounds) to --json."""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))      # drvgemm, when not installed

from drvgemm.tools import sweep  # noqa: E402  (compile pool, checks, paired rounds)

# Every variant starts from the registered entry of its precision and
# overrides some of its defines. BASE sets the ones the references below
# were first measured with (direct stores, all SMs), so that a variant names
# everything it changes from that starting point.
BASE = dict(EPILOGUE=0, BALANCE=0, OUT_16=0)


@dataclasses.dataclass(frozen=True)
class Variant:
    defines: dict
    why: str
    pred: tuple          # predicted TFLOP/s at (4096, 8192) on the H200, same run as cuBLAS


# Measured before this sweep (same run, bf16, TFLOP/s at 4096 / 8192):
# non-persistent 734 / 788, persistent 742.5 / 708, cluster2 727 / 709,
# cuBLAS best 808 / 798. The loss of the static persistent walk at 8192 but
# not at 4096 (16 vs 4 tiles per block) points at the walk itself: blocks
# drift apart, so the tiles in flight spread over more of C (less L2 sharing),
# and the slowest block's fixed share sets the end. An atomic tile counter
# (SCHED=1, since removed: benchmarks/notes/removed-knobs.md) measured within
# noise of the static walk; the TMA-store epilogue lets the next tile's
# mainloop start while C drains.
VARIANTS = {
    # references: the measured steps
    "nonpersistent": Variant(dict(PERSISTENT=0), "one block per tile (measured 734/788)",
                             (734, 788)),
    "static_g16": Variant({}, "persistent, static walk: the measured 'persistent'", (742, 708)),
    "cluster2_g16": Variant(dict(CLUSTER=2), "the previous default (measured 727/709)",
                            (727, 709)),
    # (1) the walk
    "static_g8": Variant(dict(GROUP=8), "static walk, narrower bands", (740, 712)),
    "static_g16_sm128": Variant(dict(SM_LIMIT=128), "static walk on 128 blocks: 2048 tiles "
                                "= 16 each exactly, no 15/16 split", (740, 745)),
    # (2) the epilogue
    "static_g16_tmastore": Variant(dict(EPILOGUE=2), "static walk + TMA stores", (760, 715)),
    "nonpersistent_tmastore": Variant(dict(PERSISTENT=0, EPILOGUE=2), "one block per tile "
                                      "+ TMA stores", (738, 790)),
    "cluster2_tmastore": Variant(dict(CLUSTER=2, EPILOGUE=2), "clusters + TMA stores",
                                (750, 715)),
    # (3) the pipeline
    "static_g16_tmastore_s3": Variant(dict(EPILOGUE=2, STAGES=3), "3 stages", (745, 785)),
    "static_g8_tmastore": Variant(dict(EPILOGUE=2, GROUP=8), "bands of 8 + TMA stores",
                                  (763, 803)),
    # (4) a 16-bit C (as cuBLAS's fastest call writes) and the grid size.
    # Measured with --extra in one run (TFLOP/s at 4096 / 8192): out16tma
    # 660.7 / 650.2, the same on 128 blocks 663.8 / 661.5. 512 and 2048 tiles
    # take 4 and 16 rounds on 132 SMs as on 128; BALANCE=1 picks the fewest
    # blocks for the same rounds (128 here, 96 at 3072) and the idle SMs'
    # power goes to the others' clocks.
    "out16tma": Variant(dict(EPILOGUE=2, OUT_16=1), "bf16 C through TMA stores (registered "
                        "bf16_out)", (661, 650)),
    "out16tma_bal": Variant(dict(EPILOGUE=2, OUT_16=1, BALANCE=1), "+ balanced persistent "
                            "grid", (667, 657)),
    "static_g16_tmastore_bal": Variant(dict(EPILOGUE=2, BALANCE=1), "fp32 C, balanced grid",
                                       (645, 648)),
}
# tf32 (follow-up, 4096): the TMA-store epilogue does not apply to it.
TF32_VARIANTS = {
    "tf32_cluster2": Variant(dict(CLUSTER=2), "the registered tf32 rung", (320, 0)),
    "tf32_static": Variant({}, "persistent, no clusters", (320, 0)),
    "tf32_nonpersistent": Variant(dict(PERSISTENT=0), "one block per tile", (315, 0)),
    "tf32_static_bal": Variant(dict(BALANCE=1), "registered tf32 + balanced "
                               "grid (512 tiles: 128 blocks)", (338, 0)),
    # Measured 2026-11-29 and dropped from the source: the transposed tile
    # through TMA stores (staged 64 x 32 boxes, two per step) ran at 259-261
    # TFLOP/s against 317 for direct stores, with an 8-32 B spill at the
    # 168-register cap.
}
RUNG = {"bf16": "20_tma_wgmma_bf16", "tf32": "20_tma_wgmma_tf32"}
CHECK_SHAPE = (1999, 2100, 520)
ODD_SHAPES = [(4096, 4096, 4100), (8191, 8193, 4096)]


log = sweep.log


def variant_rung(prec, name, defines):
    """The registered rung of this precision with the variant's defines (its
    own name, so its compiled kernel is cached separately)."""
    from drvgemm.ladders.gemm import dispatch, hopper
    base = dispatch.rung(RUNG[prec])
    d = {**base.defines, **BASE, **defines}
    block = (384 if d["WARP_SPECIALIZED"] else 256, 1, 1)
    return dataclasses.replace(base, name=f"{base.name}[{name}]", defines=d, block=block,
                               smem=hopper.wgmma_smem_bytes(d["STAGES"], d["EPILOGUE"]))


def registered(prec):
    from drvgemm.ladders.gemm import dispatch
    return dispatch.rung(RUNG[prec])


# ---------------------------------------------------------------------------
# plumbing: drvgemm/tools/sweep.py (compile pool, isolated checks, paired rounds)
# ---------------------------------------------------------------------------
def compile_all(rungs):
    """{rung name: resources or error}, compiled in parallel processes
    exactly as registry.rung_kernel compiles them (the parent then hits the
    disk cache)."""
    jobs = [sweep.CompileJob(r.name, r.source, r.entry, r.instantiation_defines(True), r.arch,
                             tuple(r.options)) for r in rungs]
    return {j.key: res for j, res in zip(jobs, sweep.compile_all(jobs))}


def resources_ok(r, res):
    """No spills, no stack, wgmma not serialised; 168 registers at entry for
    a warp-specialised variant (the setmaxnreg budget)."""
    return sweep.resources_ok(res, registers=168 if r.defines["WARP_SPECIALIZED"] else None)


def check_one(item):
    """Child process: exact results at CHECK_SHAPE, once with the variant's
    own grid and once with 5 blocks walking every tile."""
    from drvgemm.ladders.gemm import dispatch, hopper, registry
    from drvgemm.runtime import driver
    from drvgemm.runtime.launch import launch
    prec, name, defines = item["prec"], item["name"], item["defines"]
    A, B, ref = _check_operands(prec)
    dt = dispatch.input_dtype(prec)
    r = variant_rung(prec, name, defines)
    kern = registry.rung_kernel(r, True)
    narrow = bool(r.defines.get("OUT_16"))
    # A 16-bit C holds the exact result rounded to nearest even.
    want = ref.astype(np.float32).astype(dt).astype(np.float64) if narrow else ref
    m, n, k = CHECK_SHAPE
    detail, ok = [], True
    for blocks in (None, 5):
        C = driver.to_device(np.full((m, n), np.nan, dt if narrow else np.float32))
        cfg = hopper.wgmma_gemm_launch_config(r, A, B, C, m, n, k, 1.0, 0.0, kernel=kern,
                                              narrow_output=narrow)
        grid = cfg["grid"]
        if blocks is not None:
            cl = cfg["cluster"][0] if cfg["cluster"] else 1
            grid = (max(cl, min(grid[0], blocks) // cl * cl), 1, 1)
        launch(kern, grid, cfg["block"], cfg["args"], smem=cfg["smem"], cluster=cfg["cluster"])
        driver.synchronize()
        bad = int(np.count_nonzero(~(C.to_host().astype(np.float64) == want)))
        detail.append(f"grid {grid[0]}: {bad} wrong")
        ok = ok and bad == 0
        del cfg
        C.free()
    return ok, "; ".join(detail)


_operands = {}


def _check_operands(prec):
    if prec not in _operands:
        from drvgemm.ladders.gemm import dispatch
        from drvgemm.runtime import driver
        m, n, k = CHECK_SHAPE
        rng = np.random.default_rng(20)
        dt = dispatch.input_dtype(prec)
        a = rng.integers(-8, 9, (m, k)).astype(dt)
        b = rng.integers(-8, 9, (k, n)).astype(dt)
        _operands[prec] = (driver.to_device(a), driver.to_device(b),
                           a.astype(np.float64) @ b.astype(np.float64))
    return _operands[prec]


def check_all(spec, timeout=300):
    """{(prec, name): (ok, detail)}: check_one over spec in a child process,
    restarted without the variant that crashed it."""
    items = [{"key": [p, nm], "prec": p, "name": nm, "defines": d} for p, nm, d in spec]
    return sweep.check_isolated([sys.executable, os.path.abspath(__file__), "--check-child"],
                                items, timeout=timeout)


# ---------------------------------------------------------------------------
# timing entries
# ---------------------------------------------------------------------------
def rung_entry(prec, name, r, m, n, k, A, B, pred):
    from drvgemm.ladders.gemm import dispatch, hopper, registry
    from drvgemm.runtime import driver
    from drvgemm.runtime.launch import launch
    kern = registry.rung_kernel(r, True)
    narrow = bool(r.defines.get("OUT_16"))   # C in the inputs' type (OUT_16 build)
    C = driver.to_device(np.full((m, n), np.nan, dispatch.input_dtype(prec) if narrow
                                 else np.float32))
    cfg = hopper.wgmma_gemm_launch_config(r, A, B, C, m, n, k, 1.0, 0.0, kernel=kern,
                                          narrow_output=narrow)
    staged = len(cfg["keepalive"])
    if staged:
        # Operands the copy engine cannot take are copied on every call, as
        # gemm() does: that copy is part of the time.
        del cfg

        def enqueue():
            c = hopper.wgmma_gemm_launch_config(r, A, B, C, m, n, k, 1.0, 0.0, kernel=kern,
                                                narrow_output=narrow)
            launch(kern, c["grid"], c["block"], c["args"], smem=c["smem"], cluster=c["cluster"])
        grid = None
    else:
        grid, block, args, smem, cluster = (cfg["grid"], cfg["block"], cfg["args"], cfg["smem"],
                                            cfg["cluster"])

        def enqueue():
            launch(kern, grid, block, args, smem=smem, cluster=cluster)

    res = kern.resources
    meta = {"variant": name, "defines": dict(r.defines), "staged": staged,
            "grid": list(grid) if grid else None,
            "registers": res.registers if res else None, "smem": r.smem,
            "out": prec if narrow else "fp32"}
    if pred:
        meta["predicted_tflops"] = pred
    return sweep.Entry(r.name, enqueue, sync=driver.synchronize,
                       result=lambda: (driver.synchronize(), C.to_host().astype(np.float32))[1],
                       meta=meta, cleanup=C.free)


def baseline_entries(prec, m, n, k, a, b):
    from drvgemm.tools import cublas
    out = []
    call = cublas.torch_matmul_call(prec, a, b)
    if call:
        enqueue, result, sync, restore = call
        out.append(sweep.Entry("cublas", enqueue, baseline=True, sync=sync, result=result,
                               meta={"via": "torch.matmul",
                                     "out": prec if prec != "tf32" else "fp32"},
                               cleanup=restore))
    for out_fp32 in ((False,) if prec == "tf32" else (False, True)):
        call = cublas.gemmex_call(prec, m, n, k, a, b, out_fp32)
        if call:
            enqueue, result, sync, name, otype, _ = call
            out.append(sweep.Entry(name, enqueue, baseline=True, sync=sync, result=result,
                                   meta={"via": "cupy cublasGemmEx", "out": otype}))
    return out


def reference_rows(a, b, rows):
    """A[rows] @ B in float64 (on the GPU through torch when present)."""
    a64 = a[rows].astype(np.float64)
    b64 = b.astype(np.float64)
    try:
        import torch
        if torch.cuda.is_available():
            return (torch.from_numpy(a64).cuda() @ torch.from_numpy(b64).cuda()).cpu().numpy()
    except ImportError:
        pass
    return a64 @ b64


def run_shape(prec, m, n, k, variants, args, tol):
    """Time the given [(name, rung, pred)] and the cuBLAS calls at one shape.
    ``tol`` only catches garbage (a bf16-output cuBLAS call is ~2e-3 off);
    exactness was checked before."""
    from drvgemm.runtime import driver
    from drvgemm.tools.bench import make_inputs, rel_rmse
    log(f"== {prec} {m}x{n}x{k}")
    t0 = time.time()
    a, b = make_inputs(prec, m, n, k, seed=m + n + k)
    rows = np.arange(0, m, max(1, m // 96))
    ref = reference_rows(a, b, rows)
    A, B = driver.to_device(a), driver.to_device(b)
    entries = []
    for name, r, pred in variants:
        try:
            entries.append(rung_entry(prec, name, r, m, n, k, A, B, pred))
        except Exception as e:
            log(f"  {name}: setup failed: {type(e).__name__}: {e}")
    if not args.no_baseline:
        try:
            entries.extend(baseline_entries(prec, m, n, k, a, b))
        except Exception as e:
            log(f"  baselines failed: {type(e).__name__}: {e}")
    for e in entries:
        try:
            e.enqueue()
            e.err = rel_rmse(np.asarray(e.result())[rows], ref)
        except Exception as ex:
            e.error = f"first call failed: {type(ex).__name__}: {ex}"[:500]
            log(f"  {e.meta.get('variant', e.name)}: {e.error}")
            if sweep.is_sticky(ex):
                raise
            continue
        if not e.err <= tol:
            e.error = f"WRONG (rel. RMSE {e.err:.3g} > {tol}): not timed"
            log(f"  {e.meta.get('variant', e.name)}: {e.error}")
    log(f"  set up and checked {sum(e.error is None for e in entries)} entries in "
        f"{time.time() - t0:.1f} s")
    sweep.round_robin(entries, args.rounds, sweep.measure_batch(args.batch, args.reps),
                      progress=log)
    for e in entries:
        if e.cleanup:
            try:
                e.cleanup()
            except Exception:
                pass
    A.free()
    B.free()
    return [r for r in sweep.ratio_records(entries, m, n, k, prec) if r.get("median_ms")]


def print_table(recs, title):
    if recs:
        print("\n" + sweep.format_table(recs, title), flush=True)


def pick_best(records, shapes):
    """The variant with the best geometric mean of vs_best_cublas over the
    square shapes where it was timed at all of them."""
    scores = {}
    for s in shapes:
        for r in records:
            if (r["m"], r["n"], r["k"]) == tuple(s) and "variant" in r and "vs_best_cublas" in r:
                scores.setdefault(r["variant"], []).append(r["vs_best_cublas"])
    full = {v: x for v, x in scores.items() if len(x) == len(shapes)}
    if not full:
        return None, {}
    geo = {v: math.exp(sum(math.log(y) for y in x) / len(x)) for v, x in full.items()}
    return max(geo, key=geo.get), geo


def parse_shape(s):
    parts = [int(x) for x in s.lower().split("x")]
    if len(parts) == 1:
        return parts * 3
    if len(parts) == 3:
        return parts
    raise argparse.ArgumentTypeError(f"shape {s!r}: write N or MxNxK")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", nargs="+", default=["all"],
                    help="names from --list (default: all)")
    ap.add_argument("--shapes", nargs="+", type=parse_shape, default=[[4096] * 3, [8192] * 3])
    ap.add_argument("--extra", nargs="+", default=[], metavar="NAME:KEY=V,...",
                    help="extra bf16 variants, defines over the common base")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-followup", action="store_true")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--json", help="write the records here")
    ap.add_argument("--list", action="store_true", help="list the variants and exit")
    ap.add_argument("--check-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.check_child:
        return sweep.child_checks(json.loads(sys.stdin.read()), check_one)
    for spec_s in args.extra:
        nm, _, kvs = spec_s.partition(":")
        try:
            d = {k: int(v) for k, v in (kv.split("=") for kv in kvs.split(",") if kv)}
        except ValueError:
            ap.error(f"--extra {spec_s!r}: write NAME:KEY=INT,KEY=INT")
        VARIANTS[nm] = Variant(d, "added with --extra", (None, None))
    if args.list:
        for table in (VARIANTS, TF32_VARIANTS):
            for nm, v in table.items():
                print(f"{nm:28s} {json.dumps(v.defines):48s} pred {v.pred}  {v.why}")
        return 0
    names = list(VARIANTS) if args.variants == ["all"] else args.variants
    names += [s.partition(":")[0] for s in args.extra if s.partition(":")[0] not in names]
    unknown = [nm for nm in names if nm not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; see --list")

    import drvgemm
    from drvgemm.tools.records import device_json as _device_json
    if not drvgemm.has_gpu():
        log(f"no GPU: {drvgemm.no_gpu_reason()}")
        return 2
    t_start = time.time()

    # 1. compile (bf16 variants, the registered rungs, tf32 follow-up)
    bf = {nm: variant_rung("bf16", nm, VARIANTS[nm].defines) for nm in names}
    tf = {} if args.no_followup else {nm: variant_rung("tf32", nm, v.defines)
                                      for nm, v in TF32_VARIANTS.items()}
    reg = {"bf16": registered("bf16"), "tf32": registered("tf32")}
    log(f"compiling {len(bf) + len(tf) + 2} kernels")
    res = compile_all(list(bf.values()) + list(tf.values()) + list(reg.values()))
    usable = {}
    for prec, table in (("bf16", bf), ("tf32", tf)):
        for nm, r in table.items():
            ok, why = resources_ok(r, res[r.name])
            log(f"  {prec} {nm:28s} {'ok  ' if ok else 'DROP'} {why}")
            if ok:
                usable[(prec, nm)] = r
    for prec, r in reg.items():
        ok, why = resources_ok(r, res[r.name])
        log(f"  {prec} registered {r.name:28s} {'ok  ' if ok else 'BAD '} {why}")
    log(f"compiled in {time.time() - t_start:.1f} s")

    # 2. exact check
    spec = [(p, nm, (VARIANTS if p == "bf16" else TF32_VARIANTS)[nm].defines)
            for p, nm in usable]
    spec += [(p, "registered", {k: v for k, v in r.defines.items() if k != "WGMMA_ELEM"})
             for p, r in reg.items() if p == "bf16" or not args.no_followup]
    t = time.time()
    checks = check_all(spec)
    for (p, nm), (ok, detail) in sorted(checks.items()):
        log(f"  check {p} {nm:28s} {'ok   ' if ok else 'WRONG'} {detail}")
    log(f"checked in {time.time() - t:.1f} s")
    passed = {key: r for key, r in usable.items() if checks.get(key, (False,))[0]}
    reg_ok = {p: checks.get((p, "registered"), (False,))[0] for p in reg}
    dropped = [f"{p}/{nm}: {'resources' if (p, nm) not in usable else checks[(p, nm)][1]}"
               for p, table in (("bf16", bf), ("tf32", tf)) for nm in table
               if (p, nm) not in passed]
    dropped += [f"{p}/registered: {checks.get((p, 'registered'), (0, 'not checked'))[1]}"
                for p in reg if (p, "registered") in checks and not reg_ok[p]]
    print("excluded (failed to build within budget, or wrong at "
          f"{'x'.join(map(str, CHECK_SHAPE))}): " + ("; ".join(d[:160] for d in dropped) or "none"))

    dev = drvgemm.device()
    log(f"device: {dev}")
    records = []

    # 3. square shapes, bf16
    for m, n, k in args.shapes:
        vs = [(nm, passed[("bf16", nm)], VARIANTS[nm].pred[0 if m <= 4096 else 1])
              for nm in names if ("bf16", nm) in passed]
        recs = run_shape("bf16", m, n, k, vs, args, tol=1e-2)
        records.extend(recs)
        print_table(recs, f"bf16 {m}x{n}x{k}")

    best, geo = pick_best(records, args.shapes)
    if geo:
        print("\ngeometric mean of vs-best-cuBLAS over " +
              ", ".join("x".join(map(str, s)) for s in args.shapes))
        for v, g in sorted(geo.items(), key=lambda x: -x[1]):
            print(f"  {v:34s} {g:.4f}")

    # 4. follow-up: odd shapes and tf32
    if not args.no_followup and best:
        odd = [(best, passed[("bf16", best)], None)]
        cur = reg["bf16"]
        cur_name = f"registered({cur.name})"
        if reg_ok["bf16"]:
            same = {k: v for k, v in cur.defines.items() if k != "WGMMA_ELEM"} == \
                {k: v for k, v in passed[("bf16", best)].defines.items() if k != "WGMMA_ELEM"}
            if not same:
                odd.append((cur_name, cur, None))
        if best != "nonpersistent" and ("bf16", "nonpersistent") in passed:
            odd.append(("nonpersistent", passed[("bf16", "nonpersistent")], None))
        for m, n, k in ODD_SHAPES:
            recs = run_shape("bf16", m, n, k, odd, args, tol=1e-2)
            records.extend(recs)
            print_table(recs, f"bf16 {m}x{n}x{k}")
        tvs = [(nm, passed[("tf32", nm)], TF32_VARIANTS[nm].pred[0])
               for nm in TF32_VARIANTS if ("tf32", nm) in passed]
        recs = run_shape("tf32", 4096, 4096, 4096, tvs, args, tol=1e-2)
        records.extend(recs)
        print_table(recs, "tf32 4096x4096x4096")
        tbest = max((r for r in recs if "vs_best_cublas" in r),
                    key=lambda r: r["vs_best_cublas"], default=None)
        if tbest:
            print(f"best tf32 variant: {tbest['variant']} = {tbest['vs_best_cublas']:.3f} x "
                  f"{tbest['best_cublas']} (target >= 0.90); register (20_tma_wgmma_tf32): "
                  f"defines={json.dumps(tbest['defines'])} smem={tbest['smem']}")

    # what to register
    if best:
        d = {k: v for k, v in passed[("bf16", best)].defines.items()}
        print(f"\nbest bf16 variant: {best} (geometric mean {geo[best]:.4f} x best cuBLAS)")
        print("register in drvgemm/ladders/gemm/registry.py (20_tma_wgmma_bf16 and _fp16, WGMMA_ELEM 1 / 2):")
        print("  defines=" + json.dumps(d))
        print(f"  smem={passed[('bf16', best)].smem}  block={passed[('bf16', best)].block}")
        for s in args.shapes:
            for r in records:
                if r.get("variant") == best and [r["m"], r["n"], r["k"]] == list(s):
                    print(f"  {s[0]}x{s[1]}x{s[2]}: {r['tflops']} TFLOP/s = "
                          f"{r['vs_best_cublas']:.3f} x {r['best_cublas']} (target >= 1.00)")
    print(f"\nwhole sweep: {time.time() - t_start:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": _device_json(dev), "records": records}, f, indent=1)
            f.write("\n")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
