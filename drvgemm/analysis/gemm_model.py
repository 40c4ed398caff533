"""How long a GEMM instantiation should take on a shape: the model the
dispatcher ranks candidates by. Pure arithmetic, no GPU.

Two kinds of kernel, two formulas.

Tiled kernels (SIMT, mma.sync, wgmma): a candidate is a tile of C
(tile_m x tile_n per unit of work), a split of K into ``split`` pieces, and
its family (the unit it computes on and what it reaches there, below).

    time = launch + fixed + max(compute, memory) + reduction + staging

- compute: the units (tiles x split) are dealt to ``slots`` = SMs x blocks
  per SM in waves; each wave lasts as long as one unit (2 * tile_m * tile_n
  * K/split FLOPs at the slot's share of the unit's ceiling x the family's
  efficiency), so a shape that leaves a wave a third full pays for a whole
  one. Edge tiles cost as much as full ones: the padding is computed too.
- memory: every byte of A and B read from DRAM once (the L2 holds the panel
  that neighbouring tiles share), C written once (read too when beta != 0),
  at the device's copy bandwidth.
- reduction: a workspace split writes split x M x N fp32 partials and reads
  them back once at copy bandwidth, plus a launch; a split folded in the
  kernel (rung 20, a few pieces) passes each tile's partials through its
  last piece's SM instead (FOLD_SM_BW), no launch.
- staging: operands a TMA kernel cannot describe (misaligned rows) are
  copied first: read and written once more.

Streaming kernels (rung 30, small M): the product is a stream over B, read
once; the time is B's bytes over the copy bandwidth as long as every SM
keeps enough bytes in flight (Little's law), else the math ceiling, plus the
split-K workspace round trip and the last block's reduction chain.

Every figure below is stated once, with the measurement it comes from
(benchmarks/results/h200.json, the README table, benchmarks/notes/small-m.md,
../shared/ANCHORS.md). Other devices scale the H200's figures by their
catalogue peaks; only the H200's are measured.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .devices import CATALOGUE, find, for_device_name

__all__ = ["Ceilings", "Family", "FAMILIES", "Candidate", "StreamCandidate", "Prediction",
           "ceilings", "predict", "predict_stream", "waves", "H200_CEILINGS", "STREAM"]


# ---------------------------------------------------------------------------
# the device
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Ceilings:
    """What the units of one device reach (FLOP/s, whole device) and its
    copy bandwidth (bytes read + written per second)."""
    name: str
    sm_count: int
    units: dict = field(hash=False)
    copy_bw: float
    smem_per_sm: int = 233472
    regs_per_sm: int = 65536
    threads_per_sm: int = 2048
    blocks_per_sm: int = 32
    measured: bool = False

    def rate(self, unit: str) -> float:
        return self.units[unit]


# Measured on the H200 (ANCHORS.md: register-only microbenchmarks, 132 x 8
# blocks of 256 threads; copy of 2 GiB); wgmma from the datasheet (dense).
H200_CEILINGS = Ceilings(
    "H200", 132,
    {"ffma": 60.2e12, "mma_sync_tf32": 321.9e12, "mma_sync_16": 643.0e12,
     "wgmma_16": 989.4e12, "wgmma_tf32": 494.7e12},
    copy_bw=4.27e12, measured=True)

# Which catalogue peak scales each unit for a device other than the H200.
_UNIT_PRECISION = {"ffma": "fp32", "mma_sync_tf32": "tf32", "mma_sync_16": "bf16",
                   "wgmma_16": "bf16", "wgmma_tf32": "tf32"}


def ceilings(device_name: str | None = None, sm_count: int | None = None) -> Ceilings:
    """The ceilings of a device by the name the driver reports or a user
    types ("NVIDIA H200", "h100"); None or an unknown name: the H200's.
    Devices other than the H200 get the H200's measured fraction of each
    datasheet peak, applied to their own peaks."""
    entry = None
    if device_name:
        entry = for_device_name(device_name) or find(device_name)
    if entry is None or entry.name == "H200" or entry.ceilings is None:
        base = H200_CEILINGS
        if sm_count and sm_count != base.sm_count:
            scale = sm_count / base.sm_count
            return Ceilings(base.name, sm_count, {u: r * scale for u, r in base.units.items()},
                            base.copy_bw, measured=False)
        return base
    h200 = next(d for d in CATALOGUE if d.name == "H200").ceilings
    roof = entry.ceilings
    units = {}
    for unit, rate in H200_CEILINGS.units.items():
        p = _UNIT_PRECISION[unit]
        if p in roof.peak_flops:
            units[unit] = rate * roof.peak_flops[p] / h200.peak_flops[p]
    res = entry.resources
    bw = H200_CEILINGS.copy_bw * roof.dram_bw / h200.dram_bw
    kw = {}
    if res is not None:
        kw = dict(smem_per_sm=res.smem_per_sm, regs_per_sm=res.regs_per_sm,
                  threads_per_sm=res.max_threads_per_sm, blocks_per_sm=res.max_blocks_per_sm)
    sms = sm_count or (res.sm_count if res is not None and res.sm_count else 132)
    return Ceilings(entry.name, sms, units, bw, **kw)


# ---------------------------------------------------------------------------
# kernel families: what each reaches when busy (H200 measurements)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Family:
    """What a kernel family reaches on a full wave of full tiles, as a
    fraction of its unit's ceiling, and its fixed cost per launch (pipeline
    fill and drain, epilogue, first DRAM latency) beyond the launch itself."""
    name: str
    unit: str                # key of Ceilings.units
    efficiency: float
    fixed_s: float
    unaligned: float = 1.0   # efficiency factor of the ALIGNED=0 instantiation
    source: str = ""
    stream_eff: float = 1.0  # of the copy bandwidth at which the loop reads A and B
    stream_rows: int = 0     # ... for products of at most this many rows (0: SPARSE_ROWS)
    # > 0: each unit streams from one SM, and this share of the SMs holding
    # one saturates DRAM; fewer read at their share of the bandwidth
    stream_sms: float = 0.0
    wave_s: float = 0.0      # each wave of units past the first


# Rung 20 streaming B for a few rows of A (128-row tiles, M = 1..8, one pass
# over K per tile) reads it at 0.52-0.55 of copy bandwidth: 1 x 128256 x 4096
# 0.471 ms, 8 x 128256 x 4096 0.448 ms (bf16); rung 30 reaches 0.94-0.98 there.
# Applied to all M (0.6 for every shape), the model cut K into fewer pieces on
# 16-128-row products and lost up to 40% there (128 x 4096 x 14336: split 3 ->
# 2, 0.89 -> 0.69 of cuBLAS; h200-shapes.json, two runs side by side), so it
# holds where it was measured: products of at most SPARSE_ROWS rows (whatever
# the tile: the 64-row members were not measured below 31 rows).
WGMMA_STREAM = 0.6
SPARSE_ROWS = 8

# Rung 20's persistent grid: each tile an SM takes past its first costs this
# much beyond its share of the math and the bytes (the tile's hand-over: the
# scheduler's next index, the consumers' barriers, the pipeline refilled from
# its first stage), and the last wave's C tiles are stored after everything
# else, at one SM's rate (EPILOGUE_SM_BW). Without them the members tie
# wherever the bytes bound them, and the tie went to the 128 x 128 tile:
# 4096 x 4096 x 128 (C-bound) ran it at 24.0 us against the 128 x 256 tile's
# 23.2, 127 x 8191 x 131 at 9.8 against the 64 x 128 tile's 8.0. Scored on
# the two family sweeps (benchmarks/fit_wgmma_family.py; choice loss: the sum
# over shapes of log(measured time of the model's pick / the fastest
# measured)): 16-bit results/h200-wgmma-family-16.json 0.750 -> 0.296, tf32
# results/h200-wgmma-family-tf32-64.json 0.126 -> 0.126. 1 us a tile took the
# tf32 loss to 0 but, in the shape suite, moved 3000 x 5120 x 5120 and 64 x
# 32768 x 2048 to the 128 x 256 tile, 5-11% slower there (twenty-fourth round).
RUNG20_WAVE_S = 0.25e-6
# What one SM's epilogue stores reach (bytes/s): 64 B a clock at 1.98 GHz.
EPILOGUE_SM_BW = 128e9
# Rung 20's split folded in the kernel (ladders/gemm/hopper.folds): a tile's
# S - 1 other pieces write their fp32 partial tiles, and its last piece waits
# for them and reads them on its own SM before its epilogue: S fp32 tiles in
# series at this rate (bytes/s), once per wave. FOLD_SM_BW_SOURCE says where
# it comes from.
FOLD_SM_BW = 96e9

# Fitted to two points each, time = launch + fixed + waves x unit time: the
# 4096^3 median (full waves: efficiency) and the 256^3 median (one unit of a
# short K: fixed), both from benchmarks/results/h200.json (L2 flushed).
# 3072^3 is the check (each entry says how close).
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("simt_fp32", "ffma", 0.868, 0.0, unaligned=0.68,
           source="08_warp_tiled 128x128, 2 blocks/SM: 4096^3 2.710 ms (50.7 TFLOP/s, 4 waves), "
                  "256^3 39.4 us (fixed fits below 0: a lone block runs faster than half an "
                  "SM; taken as 0); 3072^3 1.530 ms (predicted 1.523); ALIGNED=0: "
                  "8191x8193x4096 14.72 ms and 4099x4097x4093 4.375 ms against 0.73 and "
                  "0.64 of that in the aligned build's rate (h200-shapes.json)"),
    # The 64x64-tile entries of rung 08 share the loop; a 64x64 tile reuses
    # each shared-memory value half as often.
    Family("simt_fp32_small", "ffma", 0.66, 1.5e-6, unaligned=0.68,
           source="08_warp_tiled_64x64, 4 blocks/SM: 32768x64x2048 220.7 us and "
                  "64x32768x2048 230.2 us (h200-shapes.json; 0.60 predicted 248.8 for both); "
                  "fixed: an estimate; ALIGNED=0 taken from the 128x128 tile"),
    Family("mma_sync_tf32", "mma_sync_tf32", 0.565, 4.6e-6, unaligned=0.5,
           source="11_mma_tf32 128x256, 1 block/SM: 4096^3 0.786 ms (174.9 TFLOP/s), 256^3 "
                  "18.8 us; 3072^3 0.455 ms (predicted 0.445)"),
    Family("mma_sync_16", "mma_sync_16", 0.78, 5.1e-6, unaligned=0.5,
           source="12_mma_bf16 128x256, 1 block/SM: 4096^3 0.290 ms (474.4 TFLOP/s), 256^3 "
                  "11.5 us; 3072^3 0.171 ms (predicted 0.166)"),
    Family("wgmma_16", "wgmma_16", 0.844, 10.0e-6, stream_eff=WGMMA_STREAM,
           wave_s=RUNG20_WAVE_S,
           source="20_tma_wgmma_bf16 128x256, persistent: 4096^3 0.1817 ms (756.5 TFLOP/s, "
                  "4 rounds of 132), 256^3 14.6 us; 3072^3 0.1009 ms (predicted 0.107)"),
    Family("wgmma_tf32", "wgmma_tf32", 0.813, 7.6e-6, stream_eff=WGMMA_STREAM,
           wave_s=RUNG20_WAVE_S,
           source="20_tma_wgmma_tf32 256x128, persistent: 4096^3 0.3619 ms (379.7 TFLOP/s), "
                  "256^3 15.1 us; 3072^3 0.205 ms (predicted 0.208)"),
    # The smaller members of rung 20 (128 x 192, 128 x 128; tf32 192 x 128, 128 x
    # 128) run the same loop with a narrower wgmma: per byte of shared memory a
    # third / half fewer MMAs, and the producer's TMA issue rate per FLOP up by
    # as much. Estimates until the shape suite measures them: 0.94 and 0.86 of
    # the flagship's efficiency, the same fixed cost.
    Family("wgmma_16_192", "wgmma_16", 0.844 * 0.94, 10.0e-6, stream_eff=WGMMA_STREAM,
           wave_s=RUNG20_WAVE_S,
           source="estimate: 0.94 x wgmma_16 (128x192 tile)"),
    Family("wgmma_16_128", "wgmma_16", 0.844 * 0.86, 10.0e-6, stream_eff=WGMMA_STREAM,
           wave_s=RUNG20_WAVE_S,
           source="estimate: 0.86 x wgmma_16 (128x128 tile)"),
    # The 64-row members (bf16 / fp16 64 x 128: one consumer warpgroup, no
    # second one to issue while the first waits on its barrier): less of the
    # tensor cores' rate, but a pipeline that fills in 24 KB stages.
    Family("wgmma_16_64", "wgmma_16", 0.60, 10.0e-6, stream_eff=WGMMA_STREAM,
           wave_s=RUNG20_WAVE_S,
           source="20_tma_wgmma_bf16_64x128: efficiency by least squares over 31 (shape, "
                  "split) points of benchmarks/results/h200-wgmma-family-64.json (M 31..512, "
                  "splits 1-4), with the fixed cost of the other 16-bit members (fitted with "
                  "it too: 2 us, which would win it every launch-bound shape on a figure "
                  "the others were not fitted the same way for); predictions 13% high on "
                  "average there: 64x14336x4096 35 us (128x128: 45), 512x4096x11008 94 us "
                  "(128x128: 69)"),
    # The swapped few-row members (16 x 64, 32 x 64: C^T, 64-column strips of B
    # as wgmma's A): a stream of B, one strip per SM at a time. The tensor-core
    # share is the 64-row members' (never the limit: BM / 64 of their MMAs).
    Family("wgmma_16_swap", "wgmma_16", 0.60, 2.9e-6, stream_eff=1.015, stream_rows=32,
           stream_sms=0.75, wave_s=0.68e-6,
           source="benchmarks/results/h200-wgmma-swapped.json (bf16, 13 decode shapes x "
                  "splits 1-8): 16 x 8192 x 8192 35.9 us and 4 x 8192 x 28672 113.3 us at "
                  "split 1 (one wave on 128 SMs) give 4.33 TB/s and 4.9 us of fixed cost "
                  "with the launch; grids on 64-86 SMs (1 x 4096^2, 2 x 5120^2, 16 x 11008 "
                  "x 4096) streamed at 0.72-0.83 of that (saturation at ~0.75 of the SMs); "
                  "1 x 128256 x 4096 and 8 x 128256 x 4096 (16 waves) 253.5-261.5 us over "
                  "two runs against 247 without a cost per wave"),
    Family("wgmma_tf32_192", "wgmma_tf32", 0.813 * 0.94, 7.6e-6, stream_eff=WGMMA_STREAM,
           wave_s=RUNG20_WAVE_S,
           source="estimate: 0.94 x wgmma_tf32 (192x128 tile)"),
    Family("wgmma_tf32_128", "wgmma_tf32", 0.813 * 0.86, 7.6e-6, stream_eff=WGMMA_STREAM,
           wave_s=RUNG20_WAVE_S,
           source="estimate: 0.86 x wgmma_tf32 (128x128 tile)"),
    # The 64-column tf32 members (C^T's wgmma M = 64: one consumer warpgroup,
    # which also loads every stage's B^T fragments itself, with no second
    # consumer's MMAs to hide them). Least squares over each member's (shape,
    # split) points of benchmarks/results/h200-wgmma-family-tf32-64.json (12
    # shapes, 256^3 to 2048^3, decode, long and short K, splits 1-32; squared
    # log error 3.65 -> 1.54 and 11.2 -> 1.02 against the 128 x 128 tile's
    # figures): 2048^3 ran 93 / 168 us (128 x 128: 66), 512^3 10.1 / 8.7 (11.6).
    Family("wgmma_tf32_128x64", "wgmma_tf32", 0.38, 4.8e-6, stream_eff=WGMMA_STREAM,
           wave_s=RUNG20_WAVE_S,
           source="20_tma_wgmma_tf32_128x64: least squares over 46 (shape, split) points of "
                  "benchmarks/results/h200-wgmma-family-tf32-64.json"),
    Family("wgmma_tf32_64x64", "wgmma_tf32", 0.21, 3.4e-6, stream_eff=WGMMA_STREAM,
           wave_s=RUNG20_WAVE_S,
           source="20_tma_wgmma_tf32_64x64: least squares over 41 (shape, split) points of "
                  "benchmarks/results/h200-wgmma-family-tf32-64.json"),
)}


# ---------------------------------------------------------------------------
# the tiled model
# ---------------------------------------------------------------------------
LAUNCH_S = 2.0e-6     # one launch as the GPU sees it (back to back, ANCHORS.md)
# What the host spends to enqueue one gemm() call: the cached call's Python and
# each launch through the C launcher. On the H200 machine's host (fourteenth
# round, benchmarks/results/h200-gemm-call-overhead.json, rotating operands):
# calls of one launch 7.4-8.4 us, of two (a staging copy or a split's
# reduction first/after) 11-13 us. Calls back to back run at the slower of the
# host and the GPU, so a product whose GPU time is under its host time is
# host-bound, and there the candidate with fewer launches is the faster call
# (fp16 17 x 19 x 23: 4.6-4.8 us of GPU for every candidate; 11.3-18.3 us a
# call over this round's suite runs with a staging copy and the product, 6.5
# with rung 30's one launch).
HOST_CALL_S = 4.0e-6
HOST_LAUNCH_S = 4.0e-6


def host_s(launches: int) -> float:
    """The host's time to enqueue one gemm() call of ``launches`` launches."""
    return HOST_CALL_S + HOST_LAUNCH_S * launches


# A staged operand too large for a call signature to keep its own buffer
# (ladders/gemm/hopper.KEEP_STAGING_BYTES) is allocated, copied and freed on
# every call, through the checked launch path. Fitted to one H200 point
# (h200-shapes.json): tf32 31 x 4097 x 4099 (B: 67 MB staged) ran 235 us back to
# back against 62 us predicted with that copy at copy bandwidth -- the copy,
# allocation and per-call set-up together at 0.155 of it.
UNKEPT_STAGING_EFF = 0.155


@dataclass(frozen=True)
class Candidate:
    family: Family
    tile_m: int
    tile_n: int
    split: int = 1           # pieces of K; > 1 means partial sums to be reduced
    workspace: bool = True   # split partials through a workspace pass (else in-kernel)
    blocks_per_sm: int = 1   # resident units per SM (occupancy of the instantiation)
    aligned: bool = True
    staged_bytes: int = 0    # bytes copied first (TMA staging of misaligned operands)
    staged_unkept_bytes: int = 0   # of those, in operands staged afresh on every call


@dataclass(frozen=True)
class Prediction:
    gpu_s: float             # the GPU's time for the call's launches
    compute_s: float
    memory_s: float
    reduce_s: float
    units: int
    waves: int
    wave_fill: float         # units / (waves x slots): 1.0 is a full last wave
    note: str = ""
    launches: int = 1        # launches of one call (host_s)
    tiles_s: float = 0.0     # rung 20: tile hand-overs past the first wave, last epilogue

    @property
    def host_s(self) -> float:
        return host_s(self.launches)

    @property
    def seconds(self) -> float:
        """A call's time back to back: the slower of the GPU and the host."""
        return max(self.gpu_s, self.host_s)

    def describe(self) -> str:
        bound = (f"; host-bound: {self.launches} launch{'es' * (self.launches != 1)}, "
                 f"{self.host_s * 1e6:.1f} us" if self.host_s > self.gpu_s else "")
        tiles = f", tiles {self.tiles_s * 1e6:.1f}" if self.tiles_s else ""
        return (f"{self.seconds * 1e6:.1f} us (GPU {self.gpu_s * 1e6:.1f}: compute "
                f"{self.compute_s * 1e6:.1f}, memory {self.memory_s * 1e6:.1f}, reduce "
                f"{self.reduce_s * 1e6:.1f}{tiles}; {self.units} units in {self.waves} "
                f"wave{'s' * (self.waves != 1)}, {self.wave_fill:.0%} full"
                f"{'; ' + self.note if self.note else ''}{bound})")


def waves(units: int, slots: int) -> int:
    return max(1, math.ceil(units / slots))


def predict(c: Candidate, m: int, n: int, k: int, *, in_bytes: int, out_bytes: int,
            dev: Ceilings = H200_CEILINGS, beta_reads_c: bool = False) -> Prediction:
    """The predicted time of tiled candidate ``c`` on an M x N x K product."""
    f = c.family
    tiles = math.ceil(m / c.tile_m) * math.ceil(n / c.tile_n)
    units = tiles * c.split
    slots = dev.sm_count * max(1, c.blocks_per_sm)
    w = waves(units, slots)
    k_unit = math.ceil(k / c.split)
    unit_flops = 2.0 * c.tile_m * c.tile_n * k_unit
    eff = f.efficiency * (1.0 if c.aligned else f.unaligned)
    slot_rate = dev.rate(f.unit) * eff / slots
    compute = w * unit_flops / slot_rate
    c_bytes = m * n * out_bytes * (2 if beta_reads_c else 1)
    # A product of a few rows streams its operands at the family's stream_eff
    stream = f.stream_eff if m <= (f.stream_rows or SPARSE_ROWS) else 1.0
    if f.stream_sms:
        # the SMs of the (balanced) grid: units spread over as few blocks as
        # take the same number of waves
        stream *= min(1.0, math.ceil(units / w) / slots / f.stream_sms)
    memory = (m * k + k * n) * in_bytes / (dev.copy_bw * stream) + c_bytes / dev.copy_bw
    epilogue = 0.0
    if f.unit.startswith("wgmma") and not f.stream_sms:
        # Rung 20's persistent grid writes a tile's C through shared memory
        # and TMA stores while its next tile's loads run: only the last
        # wave's epilogue is exposed, at the rate one SM stores.
        c_tile = c.tile_m * c.tile_n * (4 if c.split > 1 and c.workspace else out_bytes)
        epilogue = max(1, c.blocks_per_sm) * c_tile / EPILOGUE_SM_BW
    reduce = 0.0
    if c.split > 1 and c.workspace:
        reduce = 2.0 * c.split * m * n * 4 / dev.copy_bw + LAUNCH_S
    elif c.split > 1:
        reduce = w * c.split * c.tile_m * c.tile_n * 4 / FOLD_SM_BW
    kept = c.staged_bytes - c.staged_unkept_bytes
    staging = (2.0 * kept / dev.copy_bw
               + 2.0 * c.staged_unkept_bytes / (dev.copy_bw * UNKEPT_STAGING_EFF)
               + (LAUNCH_S if c.staged_bytes else 0.0))
    tiles = epilogue + f.wave_s * (w - 1)
    total = LAUNCH_S + f.fixed_s + max(compute, memory) + tiles + reduce + staging
    launches = 1 + (c.split > 1 and c.workspace) + (c.staged_bytes > 0)
    notes = ["operands staged"] if c.staged_bytes else []
    if c.split > 1:
        notes.append("K's pieces added by a second launch" if c.workspace
                     else "K's pieces added in the kernel")
    return Prediction(total, compute, memory, reduce, units, w, units / (w * slots),
                      "; ".join(notes), launches, tiles)


# ---------------------------------------------------------------------------
# the streaming model (rung 30)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class StreamFigures:
    """Rung 30's figures, fitted to the third H200 run of
    benchmarks/notes/small-m.md (COALESCED, STAGES 6):
    bf16 1 x 28672 x 8192 112.9 us (0.98 of copy: stream_eff), 1 x 4096^2
    14.3 us and 16 x 4096^2 15.7 us (ramp), 64 x 4096^2 with 64 rows per
    block 25.7 us (mma_eff of ROWS 64: its 194 registers leave 2 blocks per
    SM and a 64 x 64 epilogue per block), fp32 64 x 4096^2 82 us (ffma_eff:
    26 TFLOP/s, 0.43 of FFMA). The stream's figures (stream_eff,
    in_flight_per_sm, ramp_s, partial_passes, wave_s, tail_frac) were refitted in the
    eleventh round to benchmarks/rung30_sweep.py's 10 decode shapes x 10-12
    split counts (results/h200-rung30-sweep.json): one block per SM with its
    40 KB in flight already streams at full speed (128 strips of 8192 x 8192
    at split 1 ran as fast as split 6), and each split costs more than its
    partials' two passes (8 x 128256 x 4096: split 8 294 us against 247).
    stream_eff and tail_frac were refitted in the twenty-eighth round (0.99 /
    0.4 before): a read-only stream runs above the copy's rate (1 / 8 x
    128256 x 4096 at split 1, five waves: 240-252 us in nine runs, 260
    predicted), and a partial last wave costs its whole idle share (1 x 28672
    x 8192 at split 1, 1.13 waves: 137-140 us, 127 predicted); squared log
    error over the two rung30_sweep runs 0.315 / 0.301 -> 0.251 / 0.234
    (benchmarks/fit_stream_model.py)."""
    stream_eff: float = 1.02          # of the copy bandwidth, for a read-only stream
    in_flight_per_sm: int = 32 << 10  # bytes: Little's law with ~1 us of latency at full load
    l2_round_trip_s: float = 0.6e-6   # one dependent L2 access under load (reduction chain)
    ramp_s: float = 6.0e-6            # launch, first DRAM latency, last block's epilogue
    ffma_eff: float = 0.45
    # mma.sync on rows padded to ROWS, by ROWS (the rest of the issue slots go
    # to the copies, PRMT and the A fragments)
    mma_eff: tuple = ((16, 0.5), (32, 0.5), (64, 0.14))
    # ALIGNED=0 (any N, K): extra time, in multiples of the aligned stream's.
    # 16-bit B is read element by element with plain loads before each stage
    # is stored (cp.async has no 2-byte copy), which leaves a warp one stage
    # in flight: bf16 / fp16 31 x 4097 x 4099 ran 66.8 / 67.0 us against
    # 16.8 predicted aligned with an 8.2 us stream (h200-shapes.json).
    unaligned_extra_16: float = 6.1
    # fp32 copied each element with its own 4-byte cp.async (zero-filled
    # past the edges), at 4 times the copy instructions per byte: fp32
    # 31 x 4097 x 4099 ran 70.9 us (104.9 with plain loads before) against
    # 33.6 predicted aligned (16.4 us of stream), an extra 2.8. It now copies
    # the aligned 16-byte blocks around each row (one more per 32) and reads
    # words back (426 instructions a warp step against the aligned 382), which
    # was predicted near the aligned speed (0.2) but ran 64.2 us on the H200
    # (eighth round, h200-shapes.json): only 8% faster, so the limit is not
    # the copy instructions. Refitted to that run.
    unaligned_extra_fp32: float = 2.4
    # ... and its warp step issues 426 instructions where the aligned one
    # issues 382 (the LDS.32 and the row offsets): the math side (FFMA and
    # issue bound, e.g. two z chunks) is that much longer (from the SASS).
    unaligned_issue_fp32: float = 426 / 382
    # Each z chunk past the first (M over ROWS rows: blocks re-reading the
    # same strip of B, each with its own split reduction): fitted to fp32
    # 128^3 (8 chunks, 14.4 us against 10.0 predicted without it) and 256^3
    # (16 chunks, 19.6 against 10.5), h200-shapes.json.
    zchunk_s: float = 0.6e-6
    # More splits than one reduction level takes (small_m.ONE_LEVEL_MAX_SPLITS):
    # the two-level launches ran 10.8 us over the model without it (bf16 / fp16
    # 32 x 32 x 131072, 373 splits in groups of 32: 25.3 us against 14.5), fp32
    # 25.7 us over (256 splits, 2 z chunks: 48.2 against 22.5); fitted to the
    # 16-bit one, the smaller (h200-shapes.json, eighth round). Where it goes is
    # not measured yet (per-block fences and counters, or the short streams).
    two_level_s: float = 10.8e-6
    # Passes over the partial tiles at copy bandwidth: each split writes its
    # tile, the strip's last block reads every tile and writes it back as 0.
    partial_passes: int = 3
    # Each wave of blocks past the first: block start, the ring's fill and
    # drain, the fences and counter of the split reduction.
    wave_s: float = 0.6e-6
    # The share of a partial last wave's idle slots that costs time (the
    # tail in predict_stream): tail_frac of the idle share over
    # waves^tail_power. 1 x 28672 x 8192 ran 137 / 125 / 120 / 118 us at 1.13
    # / 2.26 / 3.39 / 4.5 waves (split 1..4): at about one wave the blocks
    # start and end together and the last partial wave runs alone. Over many
    # waves they have drifted apart and the tail all but vanishes: 1 x N x
    # 4096 at split 1 ran 235.8 / 236.8 / 240.1 us at N = 126720 / 128256 /
    # 129024 (5.00 / 5.06 / 5.09 waves; the time follows the bytes), where a
    # power of 2 charged 6 us and picked split 2 (243.0 us;
    # results/h200-rung30-sweep-tail.json). Fitted over the three rung-30
    # sweeps (benchmarks/fit_stream_model.py, thirtieth round): squared log
    # error 0.811 -> 0.797, choice loss 0.174 -> 0.094 (1.0 / 2.0 before);
    # of the pairs with that loss, the one that separates 1 x 128256 x 4096's
    # splits 1 and 2 most (split 2 predicted 0.6% slower; measured 2-3%).
    tail_frac: float = 2.0
    tail_power: float = 2.75

    def mma_efficiency(self, rows: int) -> float:
        return dict(self.mma_eff).get(rows, min(e for _, e in self.mma_eff))


STREAM = StreamFigures()


@dataclass(frozen=True)
class StreamCandidate:
    """One launch of rung 30: ``rows`` of M and ``strip`` columns per block,
    M in ``zchunks`` blocks along z, K in ``splits`` pieces of
    ``steps_per_split`` steps of ``kstep`` rows."""
    precision: str
    rows: int
    strip: int
    kstep: int
    threads: int
    blocks_per_sm: int
    in_flight_bytes: int
    strips: int
    zchunks: int
    splits: int
    steps_per_split: int
    group: int = 0      # splits per reduction group (0 or >= splits: one level)


def predict_stream(c: StreamCandidate, m: int, n: int, k: int, *, in_bytes: int,
                   out_bytes: int, dev: Ceilings = H200_CEILINGS,
                   beta_reads_c: bool = False, aligned: bool = True,
                   fig: StreamFigures = STREAM) -> Prediction:
    """time = max(stream of B and A over the blocks, math at the derated
    ceiling) + C and the workspace round trip at copy bandwidth + the
    reduction chain (ceil(S / 8) dependent L2 round trips per pair of items: eight
    splits' loads are in flight at once; with groups of G splits,
    ceil(G / 8) + ceil(S / G / 8) and one more hop for the second counter)
    + ramp."""
    sms = dev.sm_count
    capacity = c.blocks_per_sm * sms
    blocks = c.strips * c.zchunks * c.splits
    bw = dev.copy_bw * fig.stream_eff
    per_block = (k * n + m * k) * in_bytes / blocks
    # Waves of ``capacity`` blocks; a wave with too few bytes in flight per
    # SM runs at the fraction of the bandwidth that Little's law allows.
    # A strip wider than N (N = 32 of fp32's 128 columns) copies only the
    # columns that exist: its lanes past N keep nothing in flight.
    in_flight = c.in_flight_bytes * min(1.0, n / (c.strips * c.strip))
    # Past the first wave, blocks start on slots as they free while the rest
    # still stream: what is in flight stays a full wave's until the end (whose
    # idle share is the tail below), so only a launch of one partial wave runs
    # short of bytes in flight.
    stream, left = 0.0, blocks
    while left > 0:
        wave = min(left, capacity)
        cover = (wave if left == blocks else capacity) / sms * in_flight / fig.in_flight_per_sm
        stream += wave * per_block / (bw * min(1.0, cover))
        left -= wave
    # A last wave that leaves block slots empty: its blocks do not start
    # together with the full waves' (the GPU's block scheduler fills slots as
    # they free), so part of its idle capacity is lost whatever the bytes in
    # flight: tail_frac of the empty share of one wave's time, less the more
    # waves went before (StreamFigures.tail_power).
    w = waves(blocks, capacity)
    if w > 1:
        stream += fig.tail_frac * stream * (w - blocks / capacity) / w ** fig.tail_power
    if c.precision == "fp32":
        rate = dev.rate("ffma") * fig.ffma_eff
    else:
        rate = dev.rate("mma_sync_16") * fig.mma_efficiency(c.rows)
    math_s = 2.0 * c.zchunks * c.rows * k * n / rate
    # >= 2 resident blocks per SM keep an SM's FFMA / tensor pipes fed
    math_s /= min(1.0, min(blocks, capacity) / (2 * sms))
    note = f"{c.strips} strips x {c.zchunks} z x {c.splits} splits"
    if not aligned:
        extra = fig.unaligned_extra_fp32 if c.precision == "fp32" else fig.unaligned_extra_16
        stream *= 1.0 + extra
        if c.precision == "fp32":
            math_s *= fig.unaligned_issue_fp32
        note += "; unaligned loads"
    t = max(stream, math_s)
    rows_used = min(m, c.rows)
    # Only the float4s of a tile row inside N are written and read.
    cols = 4 * math.ceil(min(c.strip, n) / 4)
    work = (fig.partial_passes * c.strips * c.zchunks * c.splits * rows_used * cols * 4
            if c.splits > 1 else 0)
    items = rows_used * cols // 4
    chain = 0.0
    if c.splits > 1:
        group = c.group if 0 < c.group < c.splits else c.splits
        groups = math.ceil(c.splits / group)
        hops = math.ceil(group / 8) + (math.ceil(groups / 8) + 1 if groups > 1 else 0)
        # a thread's two items share their round trips
        chain = hops * math.ceil(items / (2 * c.threads)) * fig.l2_round_trip_s
        if groups > 1:
            chain += fig.two_level_s
    c_bytes = m * n * out_bytes * (2 if beta_reads_c else 1)
    reduce = work / bw + chain
    total = (t + c_bytes / bw + reduce + fig.ramp_s + fig.zchunk_s * (c.zchunks - 1)
             + fig.wave_s * (w - 1))
    return Prediction(total, math_s, stream, reduce, blocks, w, blocks / (w * capacity), note)
