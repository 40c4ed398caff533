"""Host side of the any-row-length softmax kernels (cu/softmax/07..09): the
registered instantiations, the planner and a launcher.

A proposal, to be folded into the softmax package when drvgemm/ settles:
it only uses the public API (``drvgemm.compile``, ``drvgemm.launch``) and
``drvgemm.driver`` for the workspace and occupancy.

Kernels (all read rows through the 16-byte *window* of cu/softmax/any_row.cuh:
every vector inside the row is one 128-bit access whatever the row's length or
alignment; only the first and last vector of a row are element-wise):

- ``rows``    cu/softmax/07_any_row.cu: a row in the registers of ROW_THREADS
              lanes (1..32, sub-warp shuffles; RPT rows per group) or of a
              whole block (one shared-memory hop). 1 read + 1 write.
- ``cluster`` cu/softmax/08_any_row_cluster.cu (sm_90): a row over a cluster
              of 2..8 blocks, (max, sum) through DSMEM. 1 read + 1 write.
- ``split``   cu/softmax/09_split_row.cu: few very long rows, each over
              ``split`` blocks of the whole GPU, synchronised through a global
              workspace (cooperative launch). 1 read + 1 write while the rows'
              chunks fit the resident blocks' registers; ``split_stream``
              beyond (2 reads + 1 write).

Semantics: those of drvgemm.softmax (-inf gives 0, an all -inf row is NaN, a
NaN poisons its row, one-element rows give 1), rows x cols with row pitches
``ldx``/``ldy`` in elements (cols for contiguous arrays), fp32/bf16/fp16 in
and out with fp32 math.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

KERNEL_DIR = "cu/softmax"
SOURCES = {
    "rows": f"{KERNEL_DIR}/07_any_row.cu",
    "cluster": f"{KERNEL_DIR}/08_any_row_cluster.cu",
    "split": f"{KERNEL_DIR}/09_split_row.cu",
    "split_stream": f"{KERNEL_DIR}/09_split_row.cu",
}
ENTRIES = {
    "rows": "softmax_07_any_row",
    "cluster": "softmax_08_any_row_cluster",
    "split": "softmax_09_split_row",
    "split_stream": "softmax_09_split_row_stream",
}
DTYPE_CODES = {"fp32": 0, "bf16": 1, "fp16": 2}
ITEMSIZE = {"fp32": 4, "bf16": 2, "fp16": 2}
INT_MAX = 2**31 - 1
WATCHDOG_NS = 2_000_000_000       # a split-row wait that outlasts 2 s traps instead of hanging
SPLIT_MIN_BYTES = 4 << 20         # below this a few long rows are launch-bound: no grid-wide sync
MAX_COLS = INT_MAX - 65536        # window coordinates are 32-bit: cols plus a chunk of vectors must fit
WS_MAX_SLOTS = 1024               # split kernels: row slots in the workspace's counter head (09_split_row.cu)


def split_workspace_layout(slots: int, split: int) -> dict:
    """Byte offsets in the split kernels' workspace (cu/softmax/09_split_row.cu):
    the counters at a fixed head whatever the plan, arrive[WS_MAX_SLOTS] then
    leave[WS_MAX_SLOTS] (unsigned), then pairs[slots][2][split] (8 bytes each).
    Fixed so that one buffer serves plans of any (slots, split): a plan's
    pairs never land on another plan's counters."""
    if not 1 <= slots <= WS_MAX_SLOTS:
        raise ValueError(f"slots must be in [1, {WS_MAX_SLOTS}], got {slots}")
    head = 2 * WS_MAX_SLOTS * 4
    return {"arrive": 0, "leave": WS_MAX_SLOTS * 4, "pairs": head,
            "bytes": head + slots * 2 * split * 8}


def vec_of(precision: str) -> int:
    """Elements per 16-byte vector."""
    return 16 // ITEMSIZE[precision]


# ---------------------------------------------------------------------------
# configs
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class AnyRowConfig:
    """One instantiation. ``items``: 16-byte vectors a thread holds per row
    (per chunk for split); ``vec``: the element count of a vector it is
    registered for (4: fp32, 8: bf16/fp16), so ``items * vec`` is the fp32
    values a thread keeps in registers (at most 32 where MIN_BLOCKS caps
    registers at 64). Everything the launcher needs derives from here."""
    kind: str                 # rows | cluster | split | split_stream
    threads: int
    items: int
    vec: int
    row_threads: int = 0      # rows: lanes per row (<= 32) or == threads
    rpt: int = 1              # rows: rows per lane group, loaded together
    cluster: int = 1          # cluster: blocks per row
    min_blocks: int = 1       # __launch_bounds__ second argument

    @property
    def arch(self) -> str:
        return "sm_90" if self.kind == "cluster" else "sm_80"

    @property
    def source(self) -> str:
        return SOURCES[self.kind]

    @property
    def entry(self) -> str:
        return ENTRIES[self.kind]

    @property
    def values(self) -> int:
        """fp32 values per thread in registers."""
        return self.items * self.vec * self.rpt

    @property
    def window(self) -> int:
        """16-byte vectors one row group (rows), cluster or chunk (split) covers."""
        if self.kind == "rows":
            return self.row_threads * self.items
        return self.threads * self.items * self.cluster

    @property
    def rows_per_block(self) -> int:
        return (self.threads // self.row_threads) * self.rpt if self.kind == "rows" else 1

    def defines(self, precision: str) -> dict:
        if vec_of(precision) != self.vec:
            raise ValueError(f"{self.describe()} is registered for {self.vec}-element vectors, "
                             f"{precision} has {vec_of(precision)}")
        d = {"DTYPE": DTYPE_CODES[precision], "THREADS": self.threads, "ITEMS": self.items,
             "MIN_BLOCKS": self.min_blocks}
        if self.kind == "rows":
            d.update(ROW_THREADS=self.row_threads, RPT=self.rpt)
        elif self.kind == "cluster":
            d["CLUSTER"] = self.cluster
        else:
            d["WATCHDOG_NS"] = WATCHDOG_NS
        return d

    def describe(self) -> str:
        s = f"{self.kind} threads={self.threads} items={self.items} vec={self.vec}"
        if self.kind == "rows":
            s += f" row_threads={self.row_threads} rpt={self.rpt}"
        if self.kind == "cluster":
            s += f" cluster={self.cluster}"
        return s + f" min_blocks={self.min_blocks}"


def _rows(rt, items, vec):
    """Lane groups of rt <= 32 threads in 256-thread blocks, four blocks an SM
    (64 registers a thread); RPT tops a group up to 16 values (4 fp32 vectors,
    2 16-bit ones: 64 / 32 B in flight a thread) so short rows still keep
    bytes outstanding; 32 values over 4 row windows would spill."""
    return AnyRowConfig("rows", 256, items, vec, row_threads=rt,
                        rpt=max(1, (16 // vec) // items), min_blocks=4)


def _registry(vec: int) -> tuple:
    max_items = 32 // vec            # 32 fp32 values a thread: 64 registers, no spill
    warp_items = [1, 2, 3, 4] + ([6, 8] if vec == 4 else [])
    out = []
    for rt in (1, 2, 4, 8, 16):
        for it in (1, 2, 3, 4):
            out.append(_rows(rt, it, vec))
    for it in warp_items:
        out.append(_rows(32, it, vec))
    # a block per row: 1024 threads a SM of 64-register threads (2 blocks of
    # 512, 4 of 256, 8 of 128), so one block's loads overlap another's stores
    for t in (128, 256, 512):
        for it in range(1, max_items + 1):
            out.append(AnyRowConfig("rows", t, it, vec, row_threads=t,
                                    min_blocks=1024 // t))
    # clusters of 512-thread blocks, two to an SM; cluster of 8 with more per
    # thread (one block an SM) for the longest vocabularies (151936)
    for c in range(2, 9):
        for it in range(max(1, max_items // 2), max_items + 1):
            out.append(AnyRowConfig("cluster", 512, it, vec, cluster=c, min_blocks=2))
    for it in ((10, 12) if vec == 4 else (5, 6)):
        out.append(AnyRowConfig("cluster", 512, it, vec, cluster=8, min_blocks=1))
    # split chunks, two 512-thread blocks an SM (264 resident on an H200):
    # up to 32 values a thread, 64 KiB of a row a block
    for it in ((2, 4, 8) if vec == 4 else (1, 2, 4)):
        out.append(AnyRowConfig("split", 512, it, vec, min_blocks=2))
    out.append(AnyRowConfig("split_stream", 512, 4 if vec == 4 else 2, vec, min_blocks=2))
    return tuple(out)


REGISTRY = {4: _registry(4), 8: _registry(8)}


def configs(precision: str | None = None) -> list[AnyRowConfig]:
    if precision is None:
        return list(REGISTRY[4]) + list(REGISTRY[8])
    return list(REGISTRY[vec_of(precision)])


# ---------------------------------------------------------------------------
# planning (pure Python)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class AnyRowPlan:
    config: AnyRowConfig
    precision: str
    grid: tuple
    block: tuple
    smem: int                 # dynamic shared memory (none of these kernels uses any)
    split: int = 0            # split kernels: blocks per row
    slots: int = 0            # split kernels: rows in flight
    workspace_bytes: int = 0
    cooperative: bool = False
    note: str = ""            # why this config (the model's words)
    predicted_copy_ratio: float = 0.0

    @property
    def source(self):
        return self.config.source

    @property
    def entry(self):
        return self.config.entry

    @property
    def defines(self):
        return self.config.defines(self.precision)

    def describe(self) -> str:
        s = self.config.describe()
        if self.split:
            s += f" split={self.split} slots={self.slots}"
        return s


def window_vectors(cols: int, vec: int, aligned: bool) -> int:
    """16-byte vectors a row's window spans: cols / vec when every row starts
    on 16 bytes, else the worst case over the row's offset (vec - 1 more)."""
    return -(-(cols + (0 if aligned else vec - 1)) // vec)


def _waves_efficiency(blocks: int, resident: int) -> float:
    """Fraction of the GPU's block slots doing work, averaged over the waves
    (one partial last wave costs the rest of its slots)."""
    if blocks <= 0:
        return 0.0
    if blocks <= resident:
        return 1.0          # one partial wave: the fill term below counts it
    waves = -(-blocks // resident)
    return blocks / (waves * resident)


def _predict(cfg: AnyRowConfig, nv: int, blocks: int, sm_count: int, aligned: bool,
             same_phase: bool, reads: int = 1) -> float:
    """Copy-bandwidth ratio the model expects. Factors (each <= 1):
    lane use (nv over the window the threads cover: idle lanes still cost
    issue slots and, for a block, barrier time), the fill of the GPU (an SM
    pulls at most ~2x its share of DRAM bandwidth, so fewer than half the SMs
    busy cannot reach copy speed; partial last waves idle slots), the
    scalar peel/tail (2 partial vectors a row, ~VEC times the cost of one
    vector), a 2nd read for streamed rows, and a fixed 0.93 for what a
    register-resident softmax loses to its load -> reduce -> store phases
    (rung 06 measured 0.89-0.94 with a prefetching pipeline; 0.93 is the
    optimistic end for 2 resident blocks per SM)."""
    per_sm = 1024 // cfg.threads if cfg.kind == "rows" else cfg.min_blocks
    resident = max(1, per_sm * sm_count)
    window = cfg.window
    per_block = min(window, nv) if cfg.kind == "split" else window
    lanes = min(1.0, nv / (per_block * (-(-nv // per_block)))) if cfg.kind != "rows" \
        else min(1.0, nv / (window * (-(-nv // window))))
    busy_sms = min(blocks, resident) / per_sm
    fill = min(1.0, 2.0 * busy_sms / sm_count) * _waves_efficiency(blocks, resident) ** 0.5
    edge_vectors = 0 if aligned else 2
    peel = nv / (nv + edge_vectors * (cfg.vec - 1))
    store = 1.0 if same_phase else 0.6
    pack = cluster_packing(cfg) if cfg.kind == "cluster" else 1.0
    return round(0.93 * max(0.3, lanes) ** 0.5 * fill * peel * store * pack * 2 / (reads + 1), 3)


def _pick_rows(nv: int, vec: int, cfgs) -> AnyRowConfig | None:
    """Lane groups for short rows: the fewest lanes whose items cover the
    window (more rows per warp), then the fewest items (less waste)."""
    cands = [c for c in cfgs if c.kind == "rows" and c.row_threads <= 32 and c.window >= nv]
    if not cands:
        return None
    return min(cands, key=lambda c: (c.window, c.row_threads))


def _pick_block(nv: int, cfgs) -> AnyRowConfig | None:
    cands = [c for c in cfgs if c.kind == "rows" and c.row_threads == c.threads and c.window >= nv]
    if not cands:
        return None
    # least padding first; then 256 threads over 128/512 (four blocks an SM
    # desynchronise their phases best while each still has 8 warps to merge)
    return min(cands, key=lambda c: (c.window, abs(c.threads - 256)))


GPC_SMS = 16   # a cluster lives inside one GPC: H100/H200 GPCs hold 16-18 SMs


def cluster_packing(c: AnyRowConfig) -> float:
    """Fraction of a GPC's block slots that clusters of c.cluster can fill
    (clusters of 5 leave 2 of 32 slots idle, of 2, 4, 8 none)."""
    slots = GPC_SMS * c.min_blocks
    return (slots // c.cluster) * c.cluster / slots


def _pick_cluster(nv: int, cfgs) -> AnyRowConfig | None:
    cands = [c for c in cfgs if c.kind == "cluster" and c.window >= nv]
    if not cands:
        return None
    # two blocks an SM first (min_blocks 2 overlaps one block's loads with the
    # other's stores), then clusters that pack a GPC (idle SMs cost bandwidth;
    # padded lanes only cost registers), then the least padding, then the
    # smaller cluster (fewer blocks to wait for at the barrier)
    return min(cands, key=lambda c: (c.min_blocks != 2, -cluster_packing(c), c.window, c.cluster))


def _plan_split(rows, nv, cfgs, sm_count):
    """(config, split, slots) for the grid-synchronised kernel: the chunk size
    that puts the most resident blocks to work (ties: bigger chunks, fewer
    pairs to merge), every chunk of a row resident at once."""
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


def plan(rows: int, cols: int, precision: str = "fp32", aligned: bool = True, sm_count: int = 132,
         *, cc: tuple = (9, 0), same_phase: bool = True, ldx: int | None = None) -> AnyRowPlan:
    """Kernel, config and launch shape for a rows x cols softmax.

    ``aligned``: x's base pointer is 16-byte aligned; with a pitch ``ldx``
    (default cols) that is a multiple of the vector every row then starts on
    16 bytes and a row's window is exactly ceil(cols / vec) vectors; otherwise
    the planner sizes for the worst offset (vec - 1 more elements).
    ``same_phase``: y's rows have x's alignment (two fresh buffers: yes);
    otherwise stores are element-wise. The model, in order:

    1. window <= 32 lanes x (4 | 8) vectors (rows up to ~1024 elements):
       lane groups of 1..32 threads, many rows per warp, the fewest lanes that
       hold the row (short rows waste no lanes on padding, and RPT rows per
       group keep >= 64 B per thread in flight).
    2. window <= 512 x 8 fp32 values: a block per row, the least padding.
       Few rows (fewer blocks than half the SMs) and >= 4 MiB: split instead.
    3. up to a cluster of 8: a cluster per row on sm_90, the least padding at
       two blocks an SM; same few-rows rule.
    4. otherwise split rows across the GPU (grid-wide sync through a
       workspace); past what the resident blocks' registers hold, streamed.
    """
    if precision not in DTYPE_CODES:
        raise ValueError(f"precision must be one of {', '.join(DTYPE_CODES)}, got {precision!r}")
    if not (1 <= rows <= INT_MAX and 1 <= cols <= MAX_COLS):
        raise ValueError(f"rows must be in [1, 2^31 - 1] and cols in [1, {MAX_COLS}], got "
                         f"{rows} x {cols}")
    vec = vec_of(precision)
    cfgs = REGISTRY[vec]
    aligned = aligned and (cols if ldx is None else ldx) % vec == 0
    nv = window_vectors(cols, vec, aligned)
    nbytes = rows * cols * ITEMSIZE[precision]
    cfg = None
    note = ""

    def split_plan(why):
        c, split, slots = _plan_split(rows, nv, cfgs, sm_count)
        ws = split_workspace_layout(slots, split)["bytes"]
        reads = 2 if c.kind == "split_stream" else 1
        return AnyRowPlan(c, precision, (slots * split, 1, 1), (c.threads, 1, 1), 0, split=split,
                          slots=slots, workspace_bytes=ws, cooperative=True, note=why,
                          predicted_copy_ratio=_predict(c, nv, slots * split, sm_count, aligned,
                                                        same_phase, reads))

    cfg = _pick_rows(nv, vec, cfgs)
    if cfg is not None:
        note = f"lane groups: {cfg.row_threads} lanes x {cfg.items} vectors cover {nv}"
    else:
        blk = _pick_block(nv, cfgs)
        clu = _pick_cluster(nv, cfgs) if tuple(cc) >= (9, 0) else None
        cand = blk or clu
        if cand is None or (nbytes >= SPLIT_MIN_BYTES
                            and rows * (cand.cluster if cand.kind == "cluster" else 1)
                            < sm_count // 2):
            return split_plan(f"{rows} rows of {nv} vectors: too few blocks per row otherwise"
                              if cand is not None else f"{nv} vectors: longer than a cluster")
        cfg = cand
        note = (f"a block per row ({cfg.threads} x {cfg.items} vectors >= {nv})"
                if cfg.kind == "rows" else
                f"a cluster of {cfg.cluster} per row ({cfg.window} vectors >= {nv})")
    if cfg.kind == "rows":
        blocks = -(-rows // cfg.rows_per_block)
    else:
        blocks = rows * cfg.cluster
    if blocks > INT_MAX:
        raise ValueError(f"{blocks} blocks exceed the grid")
    return AnyRowPlan(cfg, precision, (blocks, 1, 1), (cfg.threads, 1, 1), 0, note=note,
                      predicted_copy_ratio=_predict(cfg, nv, blocks, sm_count, aligned, same_phase))


# ---------------------------------------------------------------------------
# launching (GPU)
# ---------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _kernel(source: str, entry: str, defines: tuple, arch):
    import drvgemm
    return drvgemm.compile(source, entry, defines=dict(defines), arch=arch)


def compiled(p: AnyRowPlan, arch=None):
    return _kernel(p.source, p.entry, tuple(sorted(p.defines.items())), arch)


_workspace = {"buf": None}


def workspace(nbytes: int):
    """The split kernels' pairs and counters: allocated (and zeroed) once,
    grown when a plan needs more; every completed launch leaves the counters
    at zero. After a launch that failed (a trap), call ``reset_workspace()``."""
    from drvgemm import driver
    buf = _workspace["buf"]
    if buf is None or buf.nbytes < nbytes:
        if buf is not None:
            driver.synchronize()
            buf.free()
        buf = driver.empty((max(nbytes, 1 << 16),), "uint8")
        buf.fill_bytes(0)
        driver.synchronize()
        _workspace["buf"] = buf
    return buf


def reset_workspace():
    buf = _workspace["buf"]
    if buf is not None:
        buf.fill_bytes(0)


@functools.lru_cache(maxsize=None)
def _cooperative_attr():
    from drvgemm import driver
    d = driver.bindings()
    a = d.CUlaunchAttribute()
    a.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
    a.value.cooperative = 1
    return (a,)


def _resident_blocks(kernel, threads):
    from drvgemm import driver
    return driver.occupancy_max_active_blocks(kernel.function, threads, 0) * driver.device().sm_count


_prepared: dict = {}


def prepare(rows, cols, precision, *, aligned=True, same_phase=True, ldx=None):
    """(kernel, plan) for the current device, cached per shape (the host cost
    of a call is what small shapes are measured by): the split plans
    re-derived from the driver's occupancy (the pure-Python plan assumes
    min_blocks per SM)."""
    key = (rows, cols, precision, aligned, same_phase, ldx)
    hit = _prepared.get(key)
    if hit is None:
        if len(_prepared) > 4096:
            _prepared.clear()
        hit = _prepared[key] = _prepare(rows, cols, precision, aligned, same_phase, ldx)
    return hit


def _prepare(rows, cols, precision, aligned, same_phase, ldx):
    import dataclasses
    from drvgemm import driver
    dev = driver.device()
    p = plan(rows, cols, precision, aligned, dev.sm_count, cc=dev.cc, same_phase=same_phase, ldx=ldx)
    k = compiled(p)
    if p.config.kind == "cluster" and p.config.cluster > 8:
        driver.set_function_attribute(k.function, "NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1)
    if p.split:
        resident = _resident_blocks(k, p.config.threads)
        if p.slots * p.split > resident:
            slots = min(max(1, resident // p.split), WS_MAX_SLOTS) if p.config.kind == "split" else p.slots
            split = p.split if p.config.kind == "split" else max(1, resident // slots)
            if p.config.kind == "split" and p.split > resident:
                raise RuntimeError(f"{p.describe()}: {p.split} blocks a row, only {resident} "
                                   "resident on this device")
            p = dataclasses.replace(p, grid=(slots * split, 1, 1), slots=slots, split=split,
                                    workspace_bytes=split_workspace_layout(slots, split)["bytes"])
    return k, p


ROUTE_MIN_BYTES = 8 << 20


def existing_route(rows: int, cols: int, precision: str, aligned: bool, contiguous: bool) -> str | None:
    """Where the existing ladder (drvgemm.softmax kernel="auto") beat the
    kernels here on the H200 (2nd GPU run; copy ratios new vs auto): the name
    of the rung auto takes, else None. Only contiguous rows from 16-byte
    aligned pointers and >= 8 MiB (the ladder's host path costs more per call).

    - fp32 rows of <= 8 (rung 04, one lane a row, scalar or float4): 1048576 x
      1/2/3/8 at 0.72/0.93/0.98/1.00 vs 0.58/0.62/0.65/0.74 here; every vector
      of such a row is a partial window vector, element-wise here.
    - fp32 16384 < cols <= 131072, cols % 4 == 0, >= 132 rows (rung 06: bulk
      copies land the next rows while this one is written): 2048/4096 x 32000
      0.89/0.91 vs 0.86, 1024 x 128256 0.88 vs 0.75.
    - rows > 131072 columns, many rows (rung 04 streamed, 2R + 1W): 151936
      fp32 0.63-0.65 vs 0.53, bf16 0.49 vs 0.37 (a cluster of 8 at one block
      an SM serialises load -> barrier -> store)."""
    if not (aligned and contiguous) or rows * cols * ITEMSIZE[precision] < ROUTE_MIN_BYTES:
        return None
    if precision == "fp32" and cols <= 8:
        return "softmax_04_vectorized"
    if precision == "fp32" and 16384 < cols <= 131072 and cols % 4 == 0 and rows >= 132:
        return "softmax_06_pipelined"
    if cols > 131072 and rows >= 132:
        return "softmax_04_vectorized"
    return None


def _ptr(a):
    from drvgemm import driver
    return driver.device_pointer(a)


def run(x_dev, y_dev, rows: int, cols: int, precision: str, stream=None, *, ldx=None, ldy=None):
    """y = softmax(x) over rows; x_dev / y_dev: DeviceArrays, __cuda_array_interface__
    objects or raw device addresses (int) of the first row; ``ldx``/``ldy``:
    row pitches in elements (default cols). Enqueued on ``stream``, not
    synchronised."""
    import drvgemm
    ldx = cols if ldx is None else int(ldx)
    ldy = cols if ldy is None else int(ldy)
    if ldx < cols or ldy < cols:
        raise ValueError(f"row pitches ({ldx}, {ldy}) must be >= cols ({cols})")
    px, py = _ptr(x_dev), _ptr(y_dev)
    size = ITEMSIZE[precision]
    if px % size or py % size:
        raise ValueError(f"pointers must be aligned to the element size ({size} B)")
    vec = vec_of(precision)
    aligned = px % 16 == 0
    same_phase = (py - px) % 16 == 0 and (ldx - ldy) % vec == 0
    if existing_route(rows, cols, precision, aligned and py % 16 == 0, ldx == cols and ldy == cols):
        from drvgemm import driver
        from drvgemm.softmax import numpy_dtype
        dt = numpy_dtype(precision)
        xa = driver.DeviceArray((rows, cols), dt, ptr=px, owner=False)
        ya = driver.DeviceArray((rows, cols), dt, ptr=py, owner=False)
        drvgemm.softmax(xa, kernel="auto", out=ya, stream=stream)
        return None
    k, p = prepare(rows, cols, precision, aligned=aligned, same_phase=same_phase, ldx=ldx)
    if p.split:
        ws = workspace(p.workspace_bytes)
        args = (px, py, rows, cols, ldx, ldy, ws.ptr, p.split)
        drvgemm.launch(k, p.grid, p.block, args, stream=stream,
                       attributes=_cooperative_attr() if p.cooperative else ())
    else:
        drvgemm.launch(k, p.grid, p.block, (px, py, rows, cols, ldx, ldy), stream=stream)
    return p
