"""Which softmax kernel runs a rows x cols softmax, with which constants,
grid, block and shared memory: the plan of a launch, pure Python (no GPU).
The kernels are in cu/softmax/, their configurations in registry.py; what a
plan computes (the semantics) and how it is launched: dispatch.py.

The ladder (each rung adds one idea; ``kernels()`` lists them), with the
global-memory traffic per element (R = read, W = write):

- softmax_01_naive: three passes (max, sum, write), shared-memory tree
  reductions. 3R + 1W.
- softmax_02_online: max and sum in one online pass, the sum rescaled when the
  max grows. 2R + 1W.
- softmax_03_warp_shuffle: __shfl_xor_sync butterflies; a warp per short row,
  a block per long one. 2R + 1W.
- softmax_04_vectorized: 16-byte loads; the row held in registers when it
  fits one block (1R + 1W), else streamed twice (2R + 1W).
- softmax_05_cluster (sm_90): a row too long for one block split over a
  thread-block cluster, (max, sum) exchanged through distributed shared
  memory. 1R + 1W.
- softmax_06_pipelined (sm_90): persistent clusters, one per set of SMs that
  fits at once, each walking many rows; bulk copies (TMA) bring the next rows'
  slices into shared memory while the current row is reduced and written, and
  (max, sum) travel by st.async into the peers' shared memory. 1R + 1W, with
  the reads never paused.
- softmax_07_any_row: the 16-byte window (cu/softmax/softmax_window.cuh):
  every vector inside a row is one 128-bit access whatever the row's length,
  alignment or pitch, only its first and last vector element-wise; lane
  groups of 1..32 threads for short rows (many rows a warp), a block per row
  up to 16K fp32. 1R + 1W. Rungs 04..06 take 16-byte vectors only when every
  row is whole vectors from a 16-byte start, and fall back to scalar accesses
  for the whole array otherwise.
- softmax_08_any_row_cluster (sm_90): the window over a cluster of 2..8
  blocks, (max, sum) through DSMEM. 1R + 1W.
- softmax_09_split_row: few very long rows, each split over many blocks of
  the whole GPU, synchronised through a global workspace (cooperative
  launch). 1R + 1W while the chunks fit the resident blocks (registers; 16-bit
  chunks packed two elements a register, and a part in shared memory where that
  saves a pass; fp32 ones with a part in shared memory), 2R + 1W beyond.
- softmax_11_any_row_pipelined (sm_90): rung 06's persistent clusters and
  bulk-copied landing buffers over rung 08's window: the next rows' windows
  arrive while this one is reduced and written, at any row length, alignment
  and pitch (the copies take whole 16-byte vectors of the window, the bytes
  of the neighbouring rows masked). 1R + 1W. ``auto`` takes it for long rows
  (the vocabulary sizes) with many rows a cluster (``_pick_pipelined``).
- softmax_10_row_tile: short contiguous rows (up to 1024): a block's run of
  rows copied into shared memory as the 16-byte vectors that cover it
  (whatever the row length or where the run starts), reduced there by lane
  groups, written back in 16-byte stores; with two tile buffers the blocks
  walk the tiles, the next one's copies in flight. 1R + 1W. ``auto`` takes it
  for contiguous rows of 9..127, 16-bit also 129 (``_row_tile_wins``).

``kernel="auto"``: see ``plan`` below -- the existing rungs where they measured
faster on the H200 (rows of <= 8 elements, aligned fp32 rows of 16K..128K
with many rows, aligned rows past 128K with many rows, two aligned short-row
bands), the window rungs everywhere else (odd lengths, misaligned or pitched
rows, short rows with many of them, few long rows). Measured numbers and
predictions: benchmarks/notes/softmax.md.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ...analysis.banks import row_tile_bank_load, row_tile_crowded
from .registry import (CLUSTER_CONFIGS, DTYPE_CODES, HELD_VALUES, INT_MAX, MAX_WINDOW_COLS,
                       PACKED_CLUSTER_COLS, PACKED_CONFIGS, PIPELINED_CONFIGS, RESIDENT_CONFIGS,
                       ROW_TILE_CONFIGS, SOFTMAX_RUNGS, STREAM_CONFIG, WS_MAX_SLOTS, SoftmaxConfig,
                       WindowConfig, WindowRung, element_bytes, rung, source_of, vec_of,
                       window_configs)

__all__ = ["plan", "config_plan", "window_plan", "SoftmaxPlan", "split_workspace_layout",
           "row_tile_bank_load", "row_tile_crowded", "one_lane_spreads", "predict_copy_ratio",
           "window_vectors", "H200_SM_COUNT", "ROUTE_EFFICIENCY", "MODEL_MIN_BYTES", "MODEL_TOLERANCE"]

H200_SM_COUNT = 132
SPLIT_MIN_BYTES = 4 << 20   # below this a few long rows are launch-bound: no grid-wide sync
GPC_SMS = 16                # a cluster lives inside one GPC: H100/H200 GPCs hold 16-18 SMs


@dataclass(frozen=True)
class SoftmaxPlan:
    """One launch: the rung, its config and constants, grid, block, shared
    memory; for the window rungs (``pitched``) the kernel also takes row
    pitches, and the split rung's ``split`` blocks a row x ``slots`` rows in
    flight, its workspace and its cooperative launch. ``note`` says why the
    dispatcher chose it, ``predicted`` the copy-bandwidth ratio its model
    expects on the H200 (None where it has no model)."""
    rung: str
    config: object          # SoftmaxConfig (rungs 01..06, 10) or WindowConfig (07..09, 11)
    source: str
    entry: str
    defines: tuple          # sorted (name, value) pairs
    grid: tuple
    block: tuple
    vec: int
    smem: int = 0           # dynamic shared memory per block, bytes
    pitched: bool = False   # the kernel takes (ldx, ldy): rungs 07..09, 11
    split: int = 0          # rung 09: blocks per row
    slots: int = 0          # rung 09: rows in flight
    workspace_bytes: int = 0
    cooperative: bool = False
    note: str = ""
    predicted: float | None = None

    def describe(self) -> str:
        if self.pitched:
            s = self.config.describe()
            return s + (f" split={self.split} slots={self.slots}" if self.split else "")
        return self.config.describe(self.vec)

    @property
    def cluster(self):
        """The launch-time cluster shape: always None, since every cluster
        size is compiled into its kernel with __cluster_dims__."""
        return None

    def args(self, x, y, rows, cols, ldx=None, ldy=None, workspace=None) -> tuple:
        """The kernel's argument list (x, y: pointers or device arrays)."""
        if not self.pitched:
            return (x, y, rows, cols)
        a = (x, y, rows, cols, cols if ldx is None else ldx, cols if ldy is None else ldy)
        if self.split:
            if workspace is None:
                raise ValueError(f"{self.describe()} needs its workspace")
            a += (workspace, self.split)
        return a


# -- the ladder's own choice (rungs 01..06) ---------------------------------
def _ladder_config(rows: int, cols: int, cc: tuple, bulk: bool) -> tuple[str, SoftmaxConfig]:
    """Rungs 04..06 by row length (the auto of the ladder before rung 07).
    ``bulk``: rows start on 16-byte boundaries and are whole 16-byte vectors
    (what rung 06's copies need to run at all in their fast form)."""
    for c in RESIDENT_CONFIGS:
        if c.fits(cols, cc):
            return "softmax_04_vectorized", c
    if bulk:
        for c in PIPELINED_CONFIGS:
            if c.cluster > 1 and c.fits(cols, cc):
                return "softmax_06_pipelined", c
    for c in CLUSTER_CONFIGS:
        if c.fits(cols, cc) and rows * c.cluster <= INT_MAX:
            return "softmax_05_cluster", c
    return "softmax_04_vectorized", STREAM_CONFIG


# Rung 10 (the row tile) measured against the rungs auto chose before it
# (benchmarks/softmax_short_rows.py, H200, copy-bandwidth ratios "10 vs
# before"): fp32 524288 x 31 0.96 vs 0.79, 131072 x 127 0.89 vs 0.81, but
# 262144 x 33 0.76 vs 0.80 (two lanes a row: row g's lane l reads bank
# 33 g + l, two-way conflicts) and 65536 x 129 0.71 vs 0.85; bf16 1048576 x 9
# 0.58 vs 0.42, x 31 0.81 vs 0.39, x 33 0.59 vs 0.41, x 127 0.61 vs 0.60,
# but x 128 / 129 0.48 / 0.54 vs 0.90 / 0.63. Below 1 MiB its two block
# barriers cost more than they save (fp32 8 x 31 5.2 vs 4.3 us, 128 x 128
# 7.9 vs 5.0). Eighteenth round: a 16-bit row of row_threads * elems + 1
# fits that config (benchmarks/softmax_row_tile_lanes.py, same run, of copy,
# bf16 / fp16): x 33 on one lane 0.91 / 0.91 vs two lanes 0.70 / 0.70, x 65
# on two 0.78 / 0.78 vs four 0.50 / 0.50 (and on one lane of 64 slots, since,
# 0.95 / 0.94: one_lane_spreads), x 17 on 16 slots 0.85 / 0.85 vs 32
# 0.70 / 0.70, and x 129 on four lanes 0.75 / 0.77 against rung 07's 0.60 / 0.61
# (so rung 10 takes 16-bit rows of 129 too; x 128, whole 16-byte vectors a
# row, stays with rung 07 at 0.90).
ROW_TILE_MIN_BYTES = 1 << 20


def one_lane_spreads(cols: int, itemsize: int) -> bool:
    """Whether auto runs rows of 33..64 (16-bit 34..64) on rung 10's one lane
    a row (its 128-thread configs of 40 and 64 slots): a warp's 32 rows then
    lie a row apart and meet the banks as the row length lets them.
    fp32: row l starts cols * l words in, 32 / gcd(cols, 32) banks for the
    warp: 262144 x 33 / 34 / 35 / 39 / 41 / 63 measured 0.94 / 0.92 / 0.94 /
    0.92 / 0.81 / 0.89 of copy against rung 07's 0.79 / 0.82 / 0.75 / 0.73 /
    0.73 / 0.80, but x 40 (eight lanes a bank) 0.70 against 0.91 and x 48
    (sixteen) 0.40 against 0.94: at most two lanes a bank.
    16-bit (row_tile_bank_load): x 36 / 37 / 41 / 65 (one or two lanes a
    bank) 0.92 / 0.93 / 0.91 / 0.95 against two lanes' 0.73 / 0.74 / 0.79 /
    0.77; x 40 (four) 0.83 against two lanes' 0.79 and rung 07's 0.77; x 48
    (eight) 0.69 and x 64 (32) 0.77 against rung 07's 0.82 / 0.81: at most
    four lanes a bank (eighteenth round, benchmarks/softmax_row_tile_lanes.py)."""
    if itemsize == 4:
        return math.gcd(cols, 32) <= 2
    return row_tile_bank_load(cols, 1) <= 4


def _row_tile_wins(rows: int, cols: int, precision: str) -> bool:
    """Rows of 33..64 (16-bit 34..64) take rung 10 where one lane a row
    spreads the banks (one_lane_spreads), else rung 07."""
    itemsize = element_bytes(precision)
    if rows * cols * itemsize < ROW_TILE_MIN_BYTES:
        return False
    if 33 + (itemsize == 2) <= cols <= 64:
        return one_lane_spreads(cols, itemsize)
    return 9 <= cols <= 127 or (itemsize == 2 and cols == 129)


def _existing_route(rows, cols, precision, cc, contiguous, aligned, bulk, sm_count):
    """Where ``auto`` takes rungs 04 / 06 / 10, or rung 09 ahead of the window
    planner's own order: the shapes at which they measured faster (H200, same
    run, fp32 unless said; copy-bandwidth ratios "this route vs the other",
    benchmarks/notes/softmax.md). (rung name, config, why) or None; config
    None: the rung's window planner sizes it.

    - rows of <= 8 elements, contiguous (rung 04, one or two lanes a row,
      consecutive rows in consecutive lanes): 1048576 x 1/2/3/8 at
      0.72/0.93/0.97/0.99 vs 0.57/0.64/0.65/0.74; every vector of such a row
      is a partial window vector, element-wise in rung 07. Misaligned and
      16-bit: predicted the same (rung 04 reads scalars there either way).
      Aligned 16-bit rows of 8 take one lane and one 16-byte vector (two
      lanes of 8 bytes measured 0.76 of copy at bf16 1048576 x 8). Aligned
      rows of fewer elements than a vector holds, dividing it (fp32 1, 2;
      16-bit 1, 2, 4), take the packed entry: a lane a vector of whole rows
      (a lane a row read element by element left fp32 1048576 x 1 at 0.71 of
      copy and 1.2x torch's time, bf16 at 0.60).
    - contiguous rows of 9..127 elements (16-bit: and 129), at least 1 MiB
      (rung 10, the fewest lanes that hold the row; rows of 33..64 only where
      one lane a row spreads the banks): the figures at ``_row_tile_wins``
      and ``one_lane_spreads``.
    - aligned fp32 rows of 129..256 (rung 04, a warp a row, 128-thread
      blocks): 65536 x 256 at 0.992 vs 0.969 (torch 0.976).
    - 16-bit rows of 513..1024 stay with rung 07 (its 32 lanes x 4 vectors:
      0.909 / 0.949 against rung 04's 0.851 / 0.876 at 32768 x 1000 / 16384 x
      1024, results/h200-softmax-short-rows-2.json).
    - aligned fp32 rows of 16K..128K on sm_90, at least one row an SM
      (rung 06: bulk copies land the next rows while this one is written):
      2048 / 4096 x 32000 at 0.888 / 0.905 vs 0.858 / 0.860, 1024 x 128256
      at 0.876 vs 0.745. (bf16 there: the window rungs, 0.643 vs 0.598 at
      2048 x 32000, 0.528 vs 0.511 at 1024 x 128256.)
    - aligned fp32 rows past what rung 11 holds (155645), at least one row an
      SM, sm_90: rung 09's split rows in passes of the resident grid (1R + 1W; its
      planner's chunk, ``_plan_split``): 1024 x 262144 / 1024 x 200064 / 2048 x
      163840 at 0.863 / 0.831 / 0.880 against rung 04's two-pass stream (2R +
      1W) 0.643 / 0.642 / 0.641 (thirty-sixth round, results/h200-softmax-
      route-gaps.json); a cluster of 8 at one block an SM serialises load ->
      barrier -> store (151936: 0.53).
    - aligned 16-bit rows past what a packed cluster holds, at least one row
      an SM: rung 04 streamed (not yet measured against rung 09's packed
      chunks). Not 16-bit rows that a packed cluster holds: bf16 512 x 151936
      0.688 at 6 x 512 x 8 packed against 0.496 on rung 04.
    - sm_80 (no clusters), aligned rows past a block, one row an SM: rung 04
      streamed as before rung 07 (not measured against rung 09 there)."""
    if contiguous and cols <= 8:
        if aligned and cols < vec_of(precision) and vec_of(precision) % cols == 0:
            return ("softmax_04_vectorized",
                    next(c for c in PACKED_CONFIGS if c.packed_cols == cols),
                    "aligned rows of fewer elements than a 16-byte vector holds: rung 04 "
                    "packed, several whole rows a vector")
        if bulk and precision != "fp32" and cols > 4:
            return ("softmax_04_vectorized",
                    next(c for c in RESIDENT_CONFIGS if c.row_threads == 1 and c.fits(cols, cc)),
                    "16-bit rows of 8: rung 04, one lane and one 16-byte vector a row")
        return ("softmax_04_vectorized", next(c for c in RESIDENT_CONFIGS if c.fits(cols, cc)),
                "rows of <= 8: rung 04, a lane or two a row")
    if contiguous and _row_tile_wins(rows, cols, precision):
        itemsize = element_bytes(precision)
        return ("softmax_10_row_tile",
                next(c for c in ROW_TILE_CONFIGS if c.fits(cols, cc, itemsize)),
                "contiguous rows of 9..127 (16-bit: and 129), >= 1 MiB: rung 10, a block's run "
                "of rows in one tile")
    if not bulk:
        return None
    if precision == "fp32" and 128 < cols <= 256:
        return ("softmax_04_vectorized", next(c for c in RESIDENT_CONFIGS if c.fits(cols, cc)),
                "aligned fp32 rows of 129..256: rung 04, a warp a row")
    if rows >= sm_count:
        if precision == "fp32" and tuple(cc) >= (9, 0) and 16384 < cols <= 131072:
            name, c = _ladder_config(rows, cols, cc, True)
            return name, c, "aligned fp32 rows of 16K..128K, many rows: rung 06 (bulk prefetch)"
        if tuple(cc) >= (9, 0) and _pick_pipelined(window_vectors(cols, vec_of(precision), True),
                                                   window_configs(precision), rows,
                                                   sm_count) is not None:
            return None     # rung 11 (window_plan)
        if cols > 131072 and precision == "fp32" and tuple(cc) >= (9, 0):
            return ("softmax_09_split_row", None,
                    "aligned fp32 rows past 128K, many rows: rung 09, rows split in passes "
                    "of the resident grid")
        if cols > PACKED_CLUSTER_COLS and precision != "fp32":
            return ("softmax_04_vectorized", STREAM_CONFIG,
                    "aligned 16-bit rows past a packed cluster, many rows: rung 04 streamed")
        if tuple(cc) < (9, 0) and cols > 16384:
            return ("softmax_04_vectorized", STREAM_CONFIG,
                    "sm_80, aligned rows past a block, many rows: rung 04 streamed")
    return None


# -- the window rungs (07..09, 11) ------------------------------------------
def window_vectors(cols: int, vec: int, aligned: bool) -> int:
    """16-byte vectors a row's window spans: ceil(cols / vec) when every row
    starts on 16 bytes, else the worst case over the row's offset (vec - 1
    more elements)."""
    return -(-(cols + (0 if aligned else vec - 1)) // vec)


def split_workspace_layout(slots: int, split: int) -> dict:
    """Byte offsets in the split rung's workspace (cu/softmax/softmax_09_split_row.cu):
    the counters at a fixed head whatever the plan, arrive[WS_MAX_SLOTS] then
    leave[WS_MAX_SLOTS] (unsigned), then pairs[slots][2][split] (8 bytes each).
    Fixed so that one buffer serves plans of any (slots, split): a plan's
    pairs never land on another plan's counters (the prototype's first
    layout, counters after the pairs, did exactly that: 3 x 777777 fp16 after
    3 x 1048576 fp32 folded stale pairs)."""
    if not 1 <= slots <= WS_MAX_SLOTS:
        raise ValueError(f"slots must be in [1, {WS_MAX_SLOTS}], got {slots}")
    if split < 1:
        raise ValueError(f"split must be >= 1, got {split}")
    head = 2 * WS_MAX_SLOTS * 4
    return {"arrive": 0, "leave": WS_MAX_SLOTS * 4, "pairs": head,
            "bytes": head + slots * 2 * split * 8}


def _fill(blocks: int, resident: int, sm_count: int) -> float:
    """The share of DRAM's bandwidth a grid of ``blocks`` can pull, waves
    counted: the hardware deals a wave's blocks over the SMs one an SM first,
    and an SM pulls at most ~2x its share of the bandwidth, so a wave (the
    last, partial one above all) on fewer than half the SMs runs slower;
    each wave moves its blocks' share of the bytes."""
    if blocks <= 0:
        return 0.0
    full, last = divmod(blocks, resident)
    rate = lambda n: min(1.0, 2.0 * min(n, sm_count) / sm_count)   # noqa: E731
    time = full * resident / rate(resident) + (last / rate(last) if last else 0.0)
    return blocks / time


def cluster_packing(c: WindowConfig) -> float:
    """Fraction of a GPC's block slots that clusters of c.cluster can fill
    (clusters of 5 leave 2 of 32 slots idle, of 2, 4, 8 none)."""
    slots = GPC_SMS * c.min_blocks
    return (slots // c.cluster) * c.cluster / slots


# What the load -> reduce -> store structure of each window route reaches of
# the device copy's bandwidth where DRAM is the limit, measured (the row suite,
# results/h200-softmax-shapes.json, thirty-first round, one call at a time,
# shapes of 8 MiB and more): a block or lane group a row (rung 07) 0.86-1.01,
# and its idle lanes and element-wise peels cost nothing measurable there (fp32
# 100000 x 128 on lanes two thirds full: 0.98; 65536 x 129, rows off their 16
# bytes: 0.90); a cluster a row held in registers (rung 08) with nothing of the
# next row in flight 0.71 (bf16 64 x 262144; the vocabulary rows measured
# 0.73-0.80 there before rung 11, notes/softmax.md "Sixteenth round"); rows
# split across the GPU (rung 09: read all, wait for the row, write all) 0.63-0.85,
# 0.70-0.77 on the multi-pass shapes; the pipelined clusters (rung 11) by the
# lanes / fill / packing terms below from the 0.93 of rung 06's pipeline
# (0.85-0.96 measured).
ROUTE_EFFICIENCY = {"rows": 0.95, "cluster": 0.72, "split": 0.74, "split_stream": 0.74,
                    "pipelined": 0.93}
# Where predict_copy_ratio speaks (bytes read and written), and how close to
# the committed row suite it stays there. The largest miss, bf16 4096 x 4097 on
# rung 07 (model 0.95), was 0.09 (measured 0.864) until the 16-bit FMA exps,
# which cost that shape 3.5% in a same-run before/after (thirty-sixth round,
# results/h200-softmax-fma-exps.json: 0.868 -> 0.834; every other rung-07 shape
# level within 1%) and put it at 0.845 in the suite: 0.105.
MODEL_MIN_BYTES = 32 << 20
MODEL_TOLERANCE = 0.11


def predict_copy_ratio(cfg: WindowConfig, nv: int, blocks: int, sm_count: int, aligned: bool,
                       same_phase: bool, reads: int = 1) -> float:
    """Copy-bandwidth ratio the model expects of a window plan where DRAM is
    the limit (MODEL_MIN_BYTES and more read and written; below that the
    copy's own launch and ramp weigh in too, and the measured ratios run
    off it either way: fp32 32 x 50257, 12 MiB on rung 08, measured 1.00 against
    0.66). The route's measured
    efficiency (ROUTE_EFFICIENCY) times factors <= 1: for the clusters and
    the 16-bit lane groups, the lanes a row leaves idle (the window over the
    row: bf16 4096 x 4097 on 128 x 5 packed vectors, 80% used, measured 0.840 /
    0.845 of copy in two H200 suites against the groups' usual 0.92-0.97; fp32
    groups as empty measured 0.95-0.99, so fp32 keeps 1); the fill of the
    GPU (an SM pulls at most ~2x its share of DRAM bandwidth, so fewer than
    half the SMs busy cannot reach copy speed; partial last waves idle slots);
    stores when y's phase differs from x's (16-bit 0.65, fp32 0.95: the H200's
    column slices into fresh arrays ran at 0.63-0.70 of the contiguous rows'
    rate with 16-bit blocks shifted across lanes, forty-second round, 0.44-0.64
    with the pieces before them; fp32's pieces 0.97); a
    2nd read for streamed rows; the packing of clusters into GPCs. Held to the
    committed row suite by tests/test_softmax_cpu.py (within MODEL_TOLERANCE
    on every shape of MODEL_MIN_BYTES and more that a window route runs);
    the choice between routes does not read it."""
    per_sm = cfg.blocks_per_sm
    resident = max(1, per_sm * sm_count)
    lanes = 1.0
    if cfg.kind in ("cluster", "pipelined") or (cfg.kind == "rows" and cfg.vec == 8):
        lanes = min(1.0, nv / (cfg.window * (-(-nv // cfg.window))))
    fill = _fill(blocks, resident, sm_count)
    edge_vectors = 0 if aligned or cfg.kind == "rows" else 2
    peel = nv / (nv + edge_vectors * (cfg.vec - 1))
    store = 1.0 if same_phase else (0.65 if cfg.vec == 8 else 0.95)
    pack = cluster_packing(cfg) if cfg.kind == "cluster" else 1.0
    return round(ROUTE_EFFICIENCY[cfg.kind] * max(0.3, lanes) ** 0.5 * fill * peel * store * pack
                 * 2 / (reads + 1), 3)


# Lane groups that measured faster than _pick_rows's rule, by (vector
# elements, window vectors a row) -> (lanes a row, vectors a lane). fp32 rows
# of 32 vectors (100000 x 128): 16 lanes x 3 vectors (the third empty) at
# 0.975 / 0.987 of copy against the rule's 8 x 4 at 0.958 / 0.947 in two runs,
# torch 0.963 / 0.947 (results/h200-softmax-rows-near-128.json, -fp32.json): half the
# exps a thread, the same bytes in flight a warp.
MEASURED_LANE_GROUPS = {(4, 32): (16, 3)}


def _pick_rows(nv: int, cfgs) -> WindowConfig | None:
    """Lane groups for short rows: the fewest lanes whose items cover the
    window (more rows per warp), then the fewest items (less waste); where a
    row length measured better otherwise, that (MEASURED_LANE_GROUPS)."""
    cands = [c for c in cfgs if c.kind == "rows" and c.row_threads <= 32 and c.window >= nv]
    if not cands:
        return None
    measured = MEASURED_LANE_GROUPS.get((cands[0].vec, nv))
    for c in cands:
        if measured == (c.row_threads, c.items):
            return c
    return min(cands, key=lambda c: (c.window, c.row_threads))


# A thread of a block-per-row config should hold at least this many bytes of
# its row: the block loads its row once, then reduces and stores, so an SM
# has (threads resident) x (bytes a thread holds) in flight at best. 64 B is
# what fp32's 256 x 4 vectors hold at 0.87 of copy; bf16 8192 x 4096 on
# 256 threads x 2 vectors (32 B) ran at the same element rate as fp32, half
# the bandwidth (h200-softmax-shapes.json: 69.7 us against fp32's 71.5).
BLOCK_MIN_THREAD_BYTES = 64


def _pick_block(nv: int, cfgs) -> WindowConfig | None:
    cands = [c for c in cfgs if c.kind == "rows" and c.row_threads == c.threads and c.window >= nv]
    if not cands:
        return None
    # enough bytes a thread; then the least padding; then 256 threads over
    # 128/512 (four blocks an SM desynchronise their phases best while each
    # still has 8 warps to merge)
    return min(cands, key=lambda c: (c.items * 16 < BLOCK_MIN_THREAD_BYTES, c.window,
                                     abs(c.threads - 256)))


def _pick_cluster(nv: int, cfgs, rows: int = 1, sm_count: int = H200_SM_COUNT) -> WindowConfig | None:
    """A cluster per row. Tiers, in order:
    1. rows that a 256-thread cluster of <= 6 cannot hold (more than 49152
       elements, fp32 or 16-bit) and one of 7..8 can (up to 65536): 256-thread
       blocks four an SM. Measured on 50257-element rows: fp32 8192 rows 0.775
       (7 x 256 x 8 items) vs 0.743 (4 x 512 x 7), bf16 0.514 (7 x 256 x 4)
       vs 0.457; 1024 rows 0.699 (8 x 256 x 7) vs 0.674. Not below: bf16
       2048 x 32000 measured 0.606 with 4 x 256 vs 0.639 with 2 x 512; nor
       above: 1024 x 128256 0.738 (16 x 256, non-portable) vs 0.751 (8 x 512).
    2. 512-thread blocks two an SM (one block's loads overlap the other's
       reduction and stores);
    3. 512-thread blocks one an SM with 40..48 fp32 values a thread, for rows
       past what 2. holds (up to 196608 fp32 elements).
    16-bit rows, at least one an SM, take packed configs first (measured:
    bf16 8192 x 50257 0.747 of copy at 4 x 256 x 8 packed against 0.634 at
    7 x 256 x 4, 1024 x 128256 0.793 at 8 x 256 x 8 packed against 0.645 at
    8 x 512 x 4); fewer rows keep the unpacked configs (more blocks a row,
    more SMs busy). Inside a tier: 16-bit packed configs, the most vectors a
    thread first, then the least padding (twice the elements a thread: half
    the blocks a row, so twice the rows in flight for the same bytes; bf16
    512 x 151936 0.688 at 6 x 512 x 8 against 0.644 at 8 x 512 x 6: bytes a
    thread count for more than packing a GPC), then clusters that pack a GPC
    (>= 0.95 of its block slots: idle SMs cost bandwidth; padded lanes only
    cost registers), then the least padding, then the smaller cluster (fewer blocks to wait for at the
    barrier; measured 7 x 256 x 8 items 0.775 vs 8 x 256 x 7 0.733 on the
    same window)."""
    cands = [c for c in cfgs if c.kind == "cluster" and c.window >= nv
             and rows * c.cluster <= INT_MAX]
    if not cands:
        return None
    if rows < sm_count and any(not c.packed for c in cands):
        # fewer rows than SMs: the unpacked form's twice the blocks a row fill more SMs
        cands = [c for c in cands if not c.packed]
    four_first = nv * cands[0].vec > 6 * 256 * HELD_VALUES

    def tier(c):
        if c.min_blocks == 4:
            return 0 if four_first else 3
        return 1 if c.min_blocks == 2 else 2

    return min(cands, key=lambda c: (tier(c), not c.packed,
                                     (-c.items, c.window) if c.packed else (0, 0),
                                     cluster_packing(c) < 0.95, c.window, c.cluster))


# Rung 11 takes a row when it fills at least this share of a config's window
# (the padded lanes still load -inf, exponentiate and merge: issue slots of a
# kernel that runs one 8-warp block an SM) ...
PIPELINED_MIN_FILL = 0.7
# ... and there are at least this many rows a resident cluster (one block an
# SM: sm_count // cluster clusters at once), so that its landing buffers have
# rows to hold: bf16 64 x 262144 (4 rows a cluster of 8) measured 0.68 of copy
# on rung 11 against rung 08's 0.71; 15 and more rows a cluster 0.83-0.89.
PIPELINED_MIN_ROWS_PER_CLUSTER = 8


def _pick_pipelined(nv: int, cfgs, rows: int = 1, sm_count: int = H200_SM_COUNT, *,
                    only: bool = False) -> WindowConfig | None:
    """Rung 11 for a row of ``nv`` window vectors: the config of the least
    padding that holds it (then the smaller cluster), if it fills the window
    to PIPELINED_MIN_FILL and there are PIPELINED_MIN_ROWS_PER_CLUSTER rows a
    resident cluster (``only``, an explicit rung 11: whatever holds the row).
    Measured (benchmarks/softmax_pipelined.py, H200, of copy, rung 11 against
    what auto took before): fp32 8192 / 1024 x 50257 0.821 / 0.778 against
    0.765 / 0.747 (rung 08), 512 x 151936 0.852 against 0.636 (rung 04
    streamed); bf16 8192 / 1024 x 50257 0.890 / 0.865 against 0.749 / 0.796,
    1024 x 128256 0.873 against 0.799, 512 x 151936 0.833 against 0.730.
    Aligned fp32 rows of 16K..128K keep rung 06 (``_existing_route``: 0.885
    against 0.865 at 1024 x 128256, 0.881 against 0.879 at 2048 x 32000)."""
    cands = [c for c in cfgs if c.kind == "pipelined" and c.window >= nv]
    if not cands:
        return None
    c = min(cands, key=lambda c: (c.window, c.cluster))
    if only:
        return c
    if any(b.kind == "rows" and b.window >= nv for b in cfgs):
        return None     # a block (or lane group) holds the row: rung 07 (bf16 2048 x 32000 0.96)
    resident = max(1, sm_count // c.cluster)
    if nv < PIPELINED_MIN_FILL * c.window or rows < PIPELINED_MIN_ROWS_PER_CLUSTER * resident:
        return None
    return c


def _plan_split(rows, nv, cfgs, sm_count):
    """(config, split, slots) for the grid-synchronised rung: the chunk size
    that puts the most resident blocks to work (ties: bigger chunks, fewer
    pairs to merge), every chunk of a row resident at once; past what the
    resident blocks hold, the streamed entry."""
    best = None
    for c in cfgs:
        if c.kind != "split":
            continue
        resident = c.min_blocks * sm_count
        split = -(-nv // c.window)
        if split > resident:
            continue
        slots = min(rows, resident // split, WS_MAX_SLOTS)
        passes = -(-rows // slots)
        # fewest passes over the rows (every row in flight at once if possible),
        # then the larger share of the resident blocks at work, then bigger chunks
        key = (-passes, slots * split / resident, c.items)
        if best is None or key > best[0]:
            best = (key, c, split, slots)
    if best is not None:
        return best[1], best[2], best[3]
    c = next(c for c in cfgs if c.kind == "split_stream")
    resident = c.min_blocks * sm_count
    slots = min(rows, max(1, resident // 64), WS_MAX_SLOTS)
    return c, resident // slots, slots


def _window_plan_of(cfg, precision, rows, nv, sm_count, aligned, same_phase, note,
                    split=0, slots=0) -> SoftmaxPlan:
    if cfg.kind in ("split", "split_stream"):
        grid = (slots * split, 1, 1)
        ws = split_workspace_layout(slots, split)["bytes"]
        reads = 2 if cfg.kind == "split_stream" else 1
        pred = predict_copy_ratio(cfg, nv, slots * split, sm_count, aligned, same_phase, reads)
        return SoftmaxPlan("softmax_09_split_row", cfg, cfg.source, cfg.entry,
                           tuple(sorted(cfg.defines(precision).items())), grid,
                           (cfg.threads, 1, 1), cfg.vec, cfg.smem(), pitched=True, split=split,
                           slots=slots, workspace_bytes=ws, cooperative=True, note=note,
                           predicted=pred)
    if cfg.kind == "pipelined":
        return SoftmaxPlan("softmax_11_any_row_pipelined", cfg, cfg.source, cfg.entry,
                           tuple(sorted(cfg.defines(precision).items())), cfg.grid(rows),
                           (cfg.threads, 1, 1), cfg.vec, cfg.smem(), pitched=True, note=note,
                           predicted=predict_copy_ratio(cfg, nv, rows * cfg.cluster, sm_count,
                                                        aligned, same_phase))
    if cfg.kind == "rows":
        blocks = -(-rows // cfg.rows_per_block)
        name = "softmax_07_any_row"
    else:
        blocks = rows * cfg.cluster
        name = "softmax_08_any_row_cluster"
    if blocks > INT_MAX:
        raise ValueError(f"{rows} rows need {blocks} blocks of {cfg.describe()}: more than "
                         "the grid holds")
    return SoftmaxPlan(name, cfg, cfg.source, cfg.entry,
                       tuple(sorted(cfg.defines(precision).items())), (blocks, 1, 1),
                       (cfg.threads, 1, 1), cfg.vec, 0, pitched=True, note=note,
                       predicted=predict_copy_ratio(cfg, nv, blocks, sm_count, aligned,
                                                    same_phase))


def window_plan(rows: int, cols: int, precision: str = "fp32", *, aligned: bool = True,
                same_phase: bool = True, cc: tuple = (9, 0), sm_count: int = H200_SM_COUNT,
                rung_name: str | None = None) -> SoftmaxPlan:
    """The window rungs' plan for a rows x cols softmax (``rung_name``: only
    that rung's configs). ``aligned``: every row of x starts on 16 bytes (a
    row's window is then exactly ceil(cols / vec) vectors; otherwise the
    planner sizes for the worst offset). ``same_phase``: y's rows have x's
    alignment (two fresh buffers: yes); otherwise stores are element-wise.
    The model, in order:

    1. a window of <= 32 lanes x (4 | 8) vectors (rows up to ~1024 fp32):
       lane groups of 1..32 threads, many rows per warp, the fewest lanes
       that hold the row (short rows waste no lanes on padding, and RPT rows
       per group keep >= 64 B per thread in flight).
    2. up to 512 x 8 vectors: a block per row, the least padding.
    3. up to a cluster of 8 (sm_90): a cluster per row (``_pick_cluster``).
    In 2 and 3, few rows (fewer blocks than half the SMs) and >= 4 MiB: split.
    4. otherwise rows split across the GPU (grid-wide sync through a
       workspace); past what the resident blocks' registers hold, streamed."""
    vec = vec_of(precision)
    only = rung(rung_name).entries if rung_name else None
    cfgs = [c for c in window_configs(precision) if only is None or c.entry in only]
    if tuple(cc) < (9, 0):
        cfgs = [c for c in cfgs if c.kind not in ("cluster", "pipelined")]
    if not cfgs:
        raise ValueError(f"{rung_name} needs sm_90 or newer; the device is sm_{cc[0]}{cc[1]}")
    nv = window_vectors(cols, vec, aligned)
    nbytes = rows * cols * element_bytes(precision)

    def split_plan(why):
        c, split, slots = _plan_split(rows, nv, cfgs, sm_count)
        return _window_plan_of(c, precision, rows, nv, sm_count, aligned, same_phase, why,
                               split, slots)

    only_split = all(c.kind in ("split", "split_stream") for c in cfgs)
    if only_split:
        return split_plan("split rows (asked for)")
    only_pipelined = all(c.kind == "pipelined" for c in cfgs)
    pipe = _pick_pipelined(nv, cfgs, rows, sm_count, only=only_pipelined)
    if pipe is not None:
        return _window_plan_of(pipe, precision, rows, nv, sm_count, aligned, same_phase,
                               f"persistent clusters of {pipe.cluster} x {pipe.threads}, "
                               f"{pipe.stages} rows in flight a block ({pipe.window} vectors "
                               f">= {nv})")
    if only_pipelined:
        longest = max(c.window for c in cfgs) * vec - vec + 1
        raise ValueError(f"{rung_name} takes rows of at most {longest} elements at any "
                         f"alignment, got {cols}; use kernel='auto'")
    cfg = _pick_rows(nv, cfgs)
    if cfg is not None:
        measured = MEASURED_LANE_GROUPS.get((cfg.vec, nv)) == (cfg.row_threads, cfg.items)
        return _window_plan_of(cfg, precision, rows, nv, sm_count, aligned, same_phase,
                               f"lane groups: {cfg.row_threads} lanes x {cfg.items} vectors "
                               f"cover {nv}" + (" (measured faster than fewer lanes)"
                                                if measured else ""))
    cand = _pick_block(nv, cfgs) or _pick_cluster(nv, cfgs, rows, sm_count)
    has_split = any(c.kind == "split" for c in cfgs)
    if cand is None:
        if not has_split:
            if any(c.kind == "cluster" and c.window >= nv for c in cfgs):
                raise ValueError(f"{rows} rows x the blocks of a cluster per row exceed the grid")
            longest = max(c.window for c in cfgs if c.kind != "split_stream") * vec - vec + 1
            raise ValueError(f"{rung_name} takes rows of at most {longest} elements at any "
                             f"alignment, got {cols}; use kernel='auto' or "
                             "softmax_09_split_row")
        return split_plan(f"{nv} vectors: longer than a cluster")
    if has_split and nbytes >= SPLIT_MIN_BYTES and rows * cand.cluster < sm_count // 2:
        return split_plan(f"{rows} rows of {nv} vectors: too few blocks per row otherwise")
    note = (f"a block per row ({cand.threads} x {cand.items} vectors >= {nv})"
            if cand.kind == "rows" else
            f"a cluster of {cand.cluster} x {cand.threads} per row ({cand.window} vectors "
            f">= {nv})")
    return _window_plan_of(cand, precision, rows, nv, sm_count, aligned, same_phase, note)


def plan(rows: int, cols: int, precision: str = "fp32", *, kernel: str = "auto",
         aligned: bool = True, cc: tuple = (9, 0), resident: int | None = None,
         ldx: int | None = None, ldy: int | None = None, same_phase: bool | None = None,
         x_aligned: bool | None = None, sm_count: int = H200_SM_COUNT) -> SoftmaxPlan:
    """Which kernel, constants, grid and block run a rows x cols softmax.

    ``aligned``: both pointers are 16-byte aligned. ``ldx``/``ldy``: row
    pitches in elements (default cols: contiguous rows); rungs 01..06 and 10 take
    contiguous rows only. ``same_phase``: y's rows have x's alignment mod 16
    bytes (default: so when aligned and the pitches agree mod a vector,
    assumed not otherwise). ``x_aligned``: x's pointer alone is 16-byte
    aligned (default ``aligned``; sizes the window rungs' rows exactly).
    ``resident``: for persistent configs (rung 06),
    how many of its clusters fit on the GPU at once (``resident_clusters``);
    None gives one cluster per row. ``sm_count``: the GPU's SMs (the model's
    fill and the split rung's grid; ``prepare`` re-derives the split grid
    from the driver's occupancy).

    ``auto``: the existing rungs where they measured faster
    (``_existing_route``), the window planner (``window_plan``) elsewhere."""
    if precision not in DTYPE_CODES:
        raise ValueError(f"precision must be one of {', '.join(DTYPE_CODES)}, got {precision!r}")
    if not (1 <= rows <= INT_MAX and 1 <= cols <= INT_MAX):
        raise ValueError(f"rows and cols must be in [1, 2^31 - 1], got {rows} x {cols}")
    ldx = cols if ldx is None else int(ldx)
    ldy = cols if ldy is None else int(ldy)
    if ldx < cols or ldy < cols:
        raise ValueError(f"row pitches ({ldx}, {ldy}) must be >= cols ({cols})")
    vec = vec_of(precision)
    contiguous = ldx == cols and ldy == cols
    x_aligned = aligned if x_aligned is None else x_aligned
    rows_aligned = x_aligned and ldx % vec == 0        # every row of x starts on 16 bytes
    if same_phase is None:
        same_phase = aligned and (ldx - ldy) % vec == 0
    bulk = contiguous and aligned and cols % vec == 0
    if kernel != "auto":
        r = rung(kernel)
        if isinstance(r, WindowRung):
            if cols > MAX_WINDOW_COLS:
                raise ValueError(f"{kernel} takes rows of at most {MAX_WINDOW_COLS} elements")
            return window_plan(rows, cols, precision, aligned=rows_aligned, same_phase=same_phase,
                               cc=cc, sm_count=sm_count, rung_name=kernel)
        if not contiguous:
            raise ValueError(f"{kernel} needs C-contiguous rows (row pitch == cols); pitched "
                             "rows take kernel='auto' or softmax_07..09, 11")
        cfg = r.pick(cols, cc, element_bytes(precision))
        if cfg.cluster > 1 and not cfg.persistent and rows * cfg.cluster > INT_MAX:
            raise ValueError(f"{rows} rows x {cfg.cluster} blocks per row exceed the grid")
        return config_plan(cfg, rows, cols, precision, aligned=aligned, resident=resident,
                           rung_name=kernel)
    route = _existing_route(rows, cols, precision, cc, contiguous, aligned, bulk, sm_count)
    if route is not None:
        name, cfg, why = route
        if cfg is None:         # a window rung's own planner (rung 09's split and slots)
            return dataclasses.replace(
                window_plan(rows, cols, precision, aligned=rows_aligned, same_phase=same_phase,
                            cc=cc, sm_count=sm_count, rung_name=name), note=why)
        p = config_plan(cfg, rows, cols, precision, aligned=aligned, resident=resident,
                        rung_name=name)
        return dataclasses.replace(p, note=why)
    if cols > MAX_WINDOW_COLS:
        name, cfg = _ladder_config(rows, cols, cc, bulk)
        return config_plan(cfg, rows, cols, precision, aligned=aligned, resident=resident,
                           rung_name=name)
    return window_plan(rows, cols, precision, aligned=rows_aligned, same_phase=same_phase, cc=cc,
                       sm_count=sm_count)


def config_plan(cfg, rows: int, cols: int, precision: str = "fp32", *,
                aligned: bool = True, resident: int | None = None,
                rung_name: str | None = None, same_phase: bool = True,
                sm_count: int = H200_SM_COUNT) -> SoftmaxPlan:
    """The plan of one explicit config (``cols`` must fit it): a rung 01..06 / 10
    SoftmaxConfig, or a WindowConfig of rungs 07..09 and 11 (``aligned``: x's rows
    start on 16 bytes; a split config gets the split and slots its planner
    would give it)."""
    if isinstance(cfg, WindowConfig):
        vec = vec_of(precision)
        if cfg.vec != vec:
            raise ValueError(f"{cfg.describe()} is registered for {cfg.vec}-element vectors, "
                             f"{precision} has {vec}")
        if not cfg.fits(cols, (9, 0), aligned=aligned):
            raise ValueError(f"{cfg.describe()} does not hold rows of {cols}")
        nv = window_vectors(cols, vec, aligned)
        if cfg.kind in ("split", "split_stream"):
            split, slots = 0, 0
            if cfg.kind == "split":
                split = -(-nv // cfg.window)
                resident_blocks = cfg.min_blocks * sm_count
                if split > resident_blocks:
                    raise ValueError(f"{cfg.describe()}: rows of {cols} need {split} resident "
                                     f"blocks, {resident_blocks} fit")
                slots = min(rows, resident_blocks // split, WS_MAX_SLOTS)
            else:
                _, split, slots = _plan_split(rows, nv, [cfg], sm_count)
            return _window_plan_of(cfg, precision, rows, nv, sm_count, aligned, same_phase,
                                   "an explicit config", split, slots)
        return _window_plan_of(cfg, precision, rows, nv, sm_count, aligned, same_phase,
                               "an explicit config")
    itemsize = element_bytes(precision)
    if cfg.walks and cfg.tile_buffers(itemsize) == 1:
        # a row-tile build of one buffer keeps a block a tile: walking its
        # tiles with nothing in flight measured 5% slower (fp32 x 31 / x 127)
        cfg = dataclasses.replace(cfg, walks=False)
    vec = cfg.vec(itemsize)
    if cfg.packed_cols:
        if not (aligned and cols == cfg.packed_cols and vec % cols == 0):
            raise ValueError(f"{cfg.describe()} takes 16-byte aligned rows of exactly "
                             f"{cfg.packed_cols} elements dividing a vector ({vec}), got "
                             f"{cols}{'' if aligned else ', not aligned'}")
    elif vec > 1 and not (aligned and cols % vec == 0):
        vec = 1
    defines = cfg.defines(precision, vec)
    if "CROWDED" in defines and (itemsize == 2 or cfg.row_threads > 1) \
            and row_tile_crowded(cols, cfg.row_threads, itemsize):
        defines["CROWDED"] = 1     # one fp32 lane a row has no remedy (the kernel's kRotateBuild)
    defines = tuple(sorted(defines.items()))
    source = source_of(cfg.entry)
    name = rung_name or next(r.name for r in SOFTMAX_RUNGS if r.source == source)
    return SoftmaxPlan(name, cfg, source, cfg.entry, defines,
                       cfg.grid(rows, resident), (cfg.threads, 1, 1), vec,
                       cfg.smem(itemsize, vec))
