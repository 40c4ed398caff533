"""The host side of rung 20 (TMA + wgmma, cu/gemm/20_tma_wgmma.cu): its tile
geometry, the tensor maps over A, B and C, the persistent grid and the launch.

Everything here is derived from the registered entry (drvgemm/ladders/gemm/registry.py):
the tile along M and N (``defines["BM"]`` / ``["BN"]`` where the entry passes
them, else its ``tile_m`` / ``tile_n``), the k-tile (``defines["BK"]``, else one
128-byte swizzled line of the element type), the build-step defines
(WARP_SPECIALIZED, PERSISTENT, CLUSTER, STAGES, EPILOGUE, ...). Nothing is
compiled here: the caller (``gemm()``) compiles the instantiation first and
passes the Kernel in, which this module asks for its register count (the
setmaxnreg budget) and its cluster occupancy.

The rung's kernels take (mapA, mapB, mapC, C, M, N, K, alpha, beta, partials,
split_stride, splits, fold):
  bf16 / fp16: mapA over A (M x K): box BK (k) x BM (rows); mapB over B
               (K x N): box 64 (columns) x BK (k); both 128-byte swizzled.
  tf32:        the kernel computes C^T = B^T A^T (see the .cu file): mapA's
               box is BK (k) x 64 (rows), mapB's 32 (columns) x BK (k).
  bf16 / fp16 swapped (SWAP_AB=1, the BM x 64 members for a few rows of A):
               C^T again; mapA's box BK (k) x BM (rows), mapB's 64 x BK.
  mapC:        only for EPILOGUE=2 (16-bit inputs): C (M x N, fp32 or with
               OUT_16 the inputs' type), box of one 128-byte line (32 fp32 or
               64 16-bit columns) x 64 rows, 128-byte swizzled; encoded when
               rows are whole 16 bytes and C is 16-byte aligned (the kernel
               tests the same condition and otherwise stores directly), else
               128 zero bytes, never read.
  partials, split_stride, splits, fold: split-K (below); 0, 0, 1, 0 for K in
               one piece.

Split-K. With ``splits`` = S > 1 the work units are tiles x S: unit (tile, s)
accumulates the k-tiles split_ranges(KT, S)[s] (KT = ceil(K / k_tile)); S is
clamped to KT (a piece of K is at least one k-tile). The workspace starts with
FOLD_COUNTER_BYTES of counters (zero between launches), then the partials'
slices. A few pieces in one wave of 16-bit tiles are folded in the kernel
(folds(); ``fold`` points at the counters): the last piece of each tile adds
the others' partials, in split order, and writes C, one launch. Other splits
(a long K over a small C, where one SM would read too many partials; more
units than SMs; tf32) go through M x N slices and the reduction launch of
split_k.py.
A or B that the copy engine cannot describe as it is (K or N not a multiple
of 8 for 16-bit types, of 4 for fp32, or a misaligned base) is first copied
into rows of a padded pitch on the launch's stream (staging.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...runtime import driver
from ...runtime.launch import LaunchConfig
from .host import Binding, PlainHost
from .split_k import (reduce_launch, split_kernel, split_stride,
                      split_workspace_bytes)
from .staging import PaddedBuffer, PaddedScratch, enqueue_pad, pad_kernel, pad_launch_config
from ...runtime.tensormap import (UNUSED_MAP, MapEncoder, TensorMap, cached_matrix_map,
                                 matrix_map, needs_staging, padded_pitch)

__all__ = ["Geometry", "geometry", "wgmma_smem_bytes", "wgmma_work_units",
           "wgmma_grid_blocks", "c_map_usable", "check_register_budget",
           "wgmma_gemm_launch_config", "TmaWgmmaHost", "TMA_WGMMA", "ELEM_BYTES", "SPLITS",
           "k_tiles", "effective_splits", "split_launches", "TmaBinding",
           "KEEP_STAGING_BYTES", "FOLD_MAX_SPLITS", "FOLD_COUNTER_BYTES", "folds", "fold_fits",
           "fold_counters", "fold_slice_floats", "wgmma_workspace_bytes"]

ELEM_BYTES = {"bf16": 2, "fp16": 2, "tf32": 4}
SWIZZLE_LINE = 128    # bytes: one 128-byte swizzled line per row of a box
X_BOX = 64            # the tile_x-wide operand of a stage arrives in boxes 64 wide
WGMMA_N = (64, 128, 192, 256)   # the wgmma N (tile_x) the kernel is built for
WGMMA_N_SWAPPED_16 = (8, 16, 32)   # the swapped 16-bit tile: wgmma N = rows of A
CONSUMER_ROWS = 64    # each consumer warpgroup owns 64 rows (wgmma M) of the block's tile
C_BOX_ROWS = 64       # EPILOGUE=2: rows per TMA store (one 8 KB staging buffer)
ALIGN_SLACK = 1024    # the ring starts on a 1024-byte boundary (the swizzle repeats per 8 lines)
# The split-K counts a rung-20 entry offers the dispatcher (the kernel takes any S >= 1):
# up to 128 pieces, for a product of one or two tiles with a long K (128 x 128 x 65536
# is one tile: 1024 k-tiles, 8 per piece at S = 128).
SPLITS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
# Split-K folded in the kernel (folds()): up to this many pieces (the last
# piece of a tile reads the other S - 1 partial tiles on its own SM, at ~100
# GB/s: past three pieces the reduction launch, whose pass spreads over every
# SM, was as fast or faster on the H200, notes/dispatch.md "Twenty-fifth
# round"), and at most FOLD_COUNTER_BYTES / 4 counters (one per tile and
# consumer warpgroup) in the fixed head of the workspace, where no shape's
# partials ever land.
FOLD_MAX_SPLITS = 3
FOLD_COUNTER_BYTES = 64 << 10


@dataclass(frozen=True)
class Geometry:
    """The block tile of one rung-20 entry, in the kernel's own axes: Y is
    wgmma's M (rows of A, or columns of C for the swapped tf32 tile), X its N."""
    elem: str          # "bf16" | "fp16" | "tf32"
    elem_size: int
    k_tile: int        # k per stage
    swapped: bool      # the block computes C^T (wgmma M runs along N): tf32, SWAP_AB
    tile_y: int        # wgmma M per block: 128 (two consumer warpgroups) or 64 (one)
    tile_x: int        # wgmma N per block (64-256; 8, 16 or 32 swapped 16-bit)
    a_box: tuple       # (box_rows, box_cols) of A's map
    b_box: tuple       # (box_rows, box_cols) of B's map

    @property
    def stage_bytes(self) -> int:
        """One stage of the ring: a k-tile of both operands."""
        return self.elem_size * self.k_tile * (self.tile_y + self.tile_x)

    @property
    def consumers(self) -> int:
        """Consumer warpgroups of the block, 64 rows (wgmma M) each."""
        return self.tile_y // CONSUMER_ROWS

    def block(self, warp_specialized: bool = True) -> tuple:
        """The block: the consumer warpgroups, plus the producer's."""
        return ((128 if warp_specialized else 0) + 128 * self.consumers, 1, 1)

    @classmethod
    def of(cls, precision: str, tile_m: int, tile_n: int, defines=None) -> "Geometry":
        if precision not in ELEM_BYTES:
            raise ValueError(f"the TMA + wgmma rung takes bf16, fp16 or tf32, not {precision!r}")
        d = defines or {}
        es = ELEM_BYTES[precision]
        line = SWIZZLE_LINE // es                 # elements of one swizzled line
        bm, bn = int(d.get("BM", tile_m)), int(d.get("BN", tile_n))
        bk = int(d.get("BK", line))
        swapped = precision == "tf32" or bool(int(d.get("SWAP_AB", 0)))
        tile_y, tile_x = (bn, bm) if swapped else (bm, bn)
        rows = (64, 128)
        xs = WGMMA_N_SWAPPED_16 if swapped and precision != "tf32" else WGMMA_N
        if tile_y not in rows or tile_x not in xs:
            shape = ("N x 64 or 128 for tf32" if precision == "tf32"
                     else "N x 64 or 128 swapped" if swapped else "BM x N")
            raise ValueError(
                f"rung 20 tiles are {' or '.join(map(str, rows))} x N with N in {xs} "
                f"({shape}), not {bm} x {bn}")
        x_box = min(X_BOX, tile_x)
        if swapped:   # A is wgmma's K-major B (along X); B is N-major, one line per box row
            a_box, b_box = (x_box, bk), (bk, line)
        else:         # A is wgmma's A (along Y, one box); B arrives in tile_x / 64 column boxes
            a_box, b_box = (tile_y, bk), (bk, x_box)
        return cls(precision, es, bk, swapped, tile_y, tile_x, a_box, b_box)


def geometry(rung) -> Geometry:
    """The geometry of a registered rung-20 entry."""
    return Geometry.of(rung.precision, rung.tile_m, rung.tile_n, rung.defines)


def wgmma_smem_bytes(stages: int, epilogue: int = 0, stage_bytes: int = 49152,
                     consumers: int = 2) -> int:
    """Dynamic shared memory of the rung: the ring, the EPILOGUE=2 staging
    buffers (two 8 KB TMA-store boxes per consumer warpgroup), 2 mbarriers per
    stage and 1024 bytes of slack to align the ring for the 128-byte swizzle.
    ``stage_bytes``: Geometry.stage_bytes (48 KiB for the 128 x 256 tiles, the
    default; 32 / 40 KiB for wgmma N = 128 / 192, 24 KiB for 64 x 128);
    ``consumers``: Geometry.consumers."""
    staging = consumers * 2 * C_BOX_ROWS * SWIZZLE_LINE if int(epilogue) == 2 else 0
    return stages * stage_bytes + staging + 16 * stages + ALIGN_SLACK


def c_map_usable(address: int, n: int, elem_bytes: int = 4) -> bool:
    """EPILOGUE=2 stores C through a tensor map: rows must be a multiple of 16
    bytes and C 16-byte aligned (the kernel checks the same)."""
    return address % 16 == 0 and (n * elem_bytes) % 16 == 0


def fold_counters(geo: Geometry, m: int, n: int) -> int:
    """Counters of a folded split: one per (tile, consumer warpgroup), tiles
    counted as the kernel does (whole clusters of them along Y)."""
    return wgmma_work_units(geo, m, n, 1, 1) * geo.consumers


def fold_fits(geo: Geometry, m: int, n: int) -> bool:
    """Whether the kernel can fold a split of this C: its counters fit the
    workspace's head."""
    return 4 * fold_counters(geo, m, n) <= FOLD_COUNTER_BYTES


def folds(geo: Geometry, m: int, n: int, splits: int, sm_count: int) -> bool:
    """Whether gemm() folds ``splits`` pieces in the kernel (one launch)
    rather than reducing them by split_k.py's launch: 2 .. FOLD_MAX_SPLITS
    pieces of a 16-bit tile, all units in one wave of ``sm_count`` blocks.
    Measured on the H200 (notes/dispatch.md, "Twenty-fifth round"): there
    the fold saves the launch and the pass over M x N partials (512 x 4096 x
    11008 in 128 x 256 tiles, split 2: 71.5 -> 68.7 us); over several waves,
    and for tf32, the same splits ran 5-25% slower than the choices they
    displaced, so those keep the reduction launch."""
    return (geo.elem != "tf32" and 1 < int(splits) <= FOLD_MAX_SPLITS
            and wgmma_work_units(geo, m, n, 1, splits) <= int(sm_count)
            and fold_fits(geo, m, n))


def fold_slice_floats(geo: Geometry, m: int, n: int) -> int:
    """One folded split's slice: every tile whole (the accumulators' order)."""
    return wgmma_work_units(geo, m, n, 1, 1) * geo.tile_y * geo.tile_x


def wgmma_workspace_bytes(geo: Geometry, m: int, n: int, split: int) -> int:
    """The workspace of ``split`` pieces (0 for one): the counters' head,
    then room for either kind of slices (a launch may use fewer pieces, or
    the other kind, never more)."""
    if int(split) <= 1:
        return 0
    folded = 4 * (int(split) - 1) * fold_slice_floats(geo, m, n)
    return FOLD_COUNTER_BYTES + max(split_workspace_bytes(m, n, split), folded)


def k_tiles(geo: Geometry, k: int) -> int:
    """k-tiles of the whole of K (the last one zero-filled past K)."""
    return -(-int(k) // geo.k_tile)


def effective_splits(geo: Geometry, k: int, split: int) -> int:
    """The pieces K is cut into for a requested ``split``: at most one per
    k-tile (a piece of K smaller than a k-tile would only add zeros)."""
    return max(1, min(int(split), k_tiles(geo, k)))


def wgmma_work_units(geo: Geometry, m: int, n: int, cluster: int, splits: int = 1) -> int:
    """Work units of the kernel's scheduler: clusters' worth of tiles (the
    wgmma tile is tile_y x tile_x along (M, N), or (N, M) when swapped), times
    the pieces of K."""
    y_ext, x_ext = (n, m) if geo.swapped else (m, n)
    tiles_y = -(-y_ext // geo.tile_y)
    tiles_x = -(-x_ext // geo.tile_x)
    return -(-tiles_y // cluster) * tiles_x * int(splits)


def wgmma_grid_blocks(geo: Geometry, m: int, n: int, cluster: int, resident=None,
                      balanced: bool = False, splits: int = 1) -> int:
    """Blocks to launch: one per tile, or with ``resident`` (blocks that fit
    on the device at once: a persistent grid) no more than that, rounded down
    to whole clusters; every block then walks tiles blockIdx.x/cluster,
    += gridDim.x/cluster.

    ``balanced``: the fewest blocks that still finish in the same number of
    rounds, so that every block walks the same number of tiles (or one
    fewer): 512 tiles on 132 SMs take 4 rounds either way, on 128 blocks
    with none idle in the last. The SMs left out draw no power, which the
    others' clocks can use."""
    units = wgmma_work_units(geo, m, n, cluster, splits)
    if resident is None:
        return units * cluster
    blocks = max(1, min(units, resident // cluster))
    if balanced:
        rounds = -(-units // blocks)
        blocks = -(-units // rounds)
    return blocks * cluster


PRODUCER_REGS, CONSUMER_REGS = 40, 232   # the kernel's setmaxnreg targets


def check_register_budget(registers: int, warp_specialized: bool, name: str = "kernel",
                          consumers: int = 2):
    """The consumers' setmaxnreg.inc takes registers from what the producer's
    .dec gave back to the block's pool, so with R registers per thread at
    entry, (R - 40) * 128 must cover (232 - R) * 256: R >= 168, and the
    launch bound (384 threads, 1 block) caps R at 168. Any other R would
    leave the consumers waiting for registers forever: refuse it up front.
    One consumer (the 64-row members) moves no registers: nothing to check."""
    if not warp_specialized or consumers < 2:
        return
    freed = (registers - PRODUCER_REGS) * 128
    needed = (CONSUMER_REGS - registers) * 256
    if freed < needed:
        raise RuntimeError(
            f"{name}: ptxas gave {registers} registers per thread at entry; the producer "
            f"warpgroup's setmaxnreg.dec {PRODUCER_REGS} frees {freed} and the consumers' "
            f"setmaxnreg.inc {CONSUMER_REGS} need {needed}: the launch would hang. Expected "
            "168 (65536 / 384, rounded down to 8).")


_max_clusters: dict = {}


def _persistent_blocks(rung, kernel, cluster: int, block: tuple, smem: int,
                       sm_limit: int = 0) -> int:
    """How many blocks can be resident at once, one per SM: the SM count (or
    ``sm_limit`` if smaller), or for clusters what cuOccupancyMaxActiveClusters
    says about ``kernel`` (a GPC whose free SMs are odd leaves one idle)."""
    sms = driver.device().sm_count
    if sm_limit:
        sms = min(sms, sm_limit)
    if cluster == 1:
        return sms
    key = (rung.name, tuple(sorted(rung.defines.items())), smem)
    n = _max_clusters.get(key)
    if n is None:
        n = sms // cluster
        if kernel is not None:
            try:
                # The query counts a block's shared memory only up to the
                # function's opt-in limit, which the launch raises anyway.
                kernel.set_max_dynamic_smem(smem)
                q = driver.occupancy_max_active_clusters(kernel.function, (n * cluster, 1, 1),
                                                        block, smem, (cluster, 1, 1))
                if q:
                    n = min(n, int(q), sms // cluster)
            except Exception:
                pass  # keep sms // cluster: a wrong guess costs speed, never correctness
            _max_clusters[key] = n
    return n * cluster


def wgmma_gemm_launch_config(rung, a, b, c, m, n, k, alpha, beta, *, stream=None,
                             narrow_output=False, kernel=None, splits=1, partials=0, fold=False,
                             staged=None) -> dict:
    """Launch of a rung-20 entry for C = alpha * A @ B + beta * C.

    a, b, c: device arrays (anything ``driver.device_pointer`` accepts) of the
    rung's input type, row-major and contiguous; m, n, k >= 1. ``stream``
    must be the stream of the launch (staging copies are enqueued on it).
    ``kernel``: the compiled instantiation that will be launched (its
    register count is checked against the setmaxnreg budget, and a cluster
    launch asks the driver how many of its clusters fit); None skips both.
    Returns {grid, block, smem, args, cluster, keepalive}: ``keepalive`` holds
    scratch copies of misaligned operands, which must outlive the enqueueing
    of the launch (dropping the dict afterwards frees them stream-ordered).

    Host-side defines of the rung: PERSISTENT (grid = resident blocks),
    SM_LIMIT (at most that many blocks in a persistent grid; 0 = all SMs) and
    BALANCE (1: as few of those as finish in the same number of rounds).
    ``narrow_output``: C has the inputs' 16-bit type (the OUT_16 build).
    ``splits`` > 1: K in that many pieces (not clamped here; an empty piece
    writes a zero partial) through ``partials``, a workspace of
    wgmma_workspace_bytes(geo, m, n, splits), 16-byte aligned, whose first
    FOLD_COUNTER_BYTES are zero; ``fold``: the kernel adds the pieces and
    writes C itself (fold_fits() must allow it), else C is not touched
    (split_launches adds the reduction that writes it).
    """
    m, n, k = int(m), int(n), int(k)
    if m < 1 or n < 1 or k < 1:
        raise ValueError(f"the TMA rung needs M, N, K >= 1 (got {m}, {n}, {k}); the caller "
                         "handles empty products")
    geo = geometry(rung)
    defines = rung.defines
    ws = int(defines["WARP_SPECIALIZED"])
    cluster = int(defines["CLUSTER"])
    stages = int(defines["STAGES"])
    persistent = int(defines["PERSISTENT"])
    epilogue = int(defines["EPILOGUE"])
    sm_limit = int(defines["SM_LIMIT"])      # host side only
    balance = bool(int(defines["BALANCE"]))  # host side only
    block = geo.block(bool(ws))
    if tuple(rung.block) + (1,) * (3 - len(rung.block)) != block:
        raise ValueError(f"{rung.name}: block {rung.block} does not match "
                         f"WARP_SPECIALIZED={ws} (needs {block})")
    smem = wgmma_smem_bytes(stages, epilogue, geo.stage_bytes, geo.consumers)
    if rung.smem and rung.smem != smem:
        raise ValueError(f"{rung.name}: smem {rung.smem} does not match STAGES={stages}, "
                         f"EPILOGUE={epilogue} (needs {smem})")
    if kernel is not None and kernel.resources is not None:
        check_register_budget(kernel.resources.registers, bool(ws), rung.name, geo.consumers)
    splits = int(splits)
    if splits < 1:
        raise ValueError(f"{rung.name}: splits must be >= 1, not {splits}")
    stride = slices = counters = 0
    if fold and (splits < 2 or not fold_fits(geo, m, n)):
        raise ValueError(f"{rung.name}: {splits} pieces of a {m} x {n} C cannot be folded in "
                         f"the kernel (one piece, or more than {FOLD_COUNTER_BYTES // 4} "
                         "counters)")
    if splits > 1:
        pw = driver.device_pointer(partials, "workspace")
        need = wgmma_workspace_bytes(geo, m, n, splits)
        if pw == 0 or pw % 16:
            raise ValueError(f"{rung.name}: split-K needs a 16-byte aligned workspace of "
                             f"{need} bytes, got address {pw:#x}")
        have = getattr(partials, "nbytes", None)
        if have is not None and have < need:
            raise ValueError(f"{rung.name}: the workspace holds {have} bytes; {splits} pieces "
                             f"of a {m} x {n} C need {need}")
        slices = pw + FOLD_COUNTER_BYTES
        counters = pw if fold else 0
        stride = fold_slice_floats(geo, m, n) if fold else split_stride(m, n)

    s = driver.stream_handle(stream)
    pa = driver.device_pointer(a, "A")
    pb = driver.device_pointer(b, "B")
    es = geo.elem_size
    keep = []
    dtype = "fp32" if geo.elem == "tf32" else geo.elem

    staged = staged or {}

    copies = []

    def operand(ptr, rows, cols, name):
        if name in staged:
            return staged[name]
        if needs_staging(ptr, cols, es):
            scratch = PaddedScratch(rows, cols, es, s, stream)
            keep.append(scratch)
            copies.append(scratch.copy_of(ptr))
            return scratch.ptr, scratch.pitch
        return ptr, cols * es

    a_ptr, a_pitch = operand(pa, m, k, "A")
    b_ptr, b_pitch = operand(pb, k, n, "B")
    if copies:
        enqueue_pad(copies, es, s)    # stream-ordered before the product's launch
    if keep:
        # Scratch maps are one-off: don't let the cache keep their addresses.
        map_a = matrix_map(a_ptr, dtype, m, k, a_pitch, *geo.a_box).encode()
        map_b = matrix_map(b_ptr, dtype, k, n, b_pitch, *geo.b_box).encode()
    else:
        map_a = cached_matrix_map(a_ptr, dtype, m, k, a_pitch, *geo.a_box)
        map_b = cached_matrix_map(b_ptr, dtype, k, n, b_pitch, *geo.b_box)

    map_c = UNUSED_MAP
    if epilogue == 2 and not geo.swapped:
        pc = driver.device_pointer(c, "C")
        c_elem = es if narrow_output else 4
        if c_map_usable(pc, n, c_elem):
            # one 128-byte line per row: 32 fp32 or 64 16-bit columns
            map_c = cached_matrix_map(pc, dtype if narrow_output else "fp32", m, n, c_elem * n,
                                      C_BOX_ROWS, SWIZZLE_LINE // c_elem)

    resident = _persistent_blocks(rung, kernel, cluster, block, smem, sm_limit) \
        if persistent else None
    blocks = wgmma_grid_blocks(geo, m, n, cluster, resident, balanced=balance, splits=splits)
    return {
        "grid": (blocks, 1, 1),
        "block": block,
        "smem": smem,
        "args": [map_a, map_b, map_c, c, m, n, k, float(alpha), float(beta),
                 slices, stride, splits, counters],
        "cluster": (cluster, 1, 1) if cluster > 1 else None,
        "keepalive": keep,
    }


def split_launches(rung, kernel, a, b, c, m, n, k, alpha, beta, *, stream=None,
                   narrow_output=False, split=1, workspace=0, clamp=True, staged=None,
                   fold="auto") -> list:
    """The launches of one product with K in ``split`` pieces, in stream
    order: [(kernel, its LaunchConfig)] for one piece, or for pieces folded in
    the kernel (``fold``: "auto", as folds() says for this device; True or
    False to choose, which tests and sweeps do); else the partial products
    into ``workspace`` (by the split-K build: split_kernel) and the
    reduction that writes C. ``clamp`` (the default)
    cuts K into at most one piece per k-tile; False keeps ``split`` as asked
    (empty pieces add zero partials), which tests use."""
    geo = geometry(rung)
    s = effective_splits(geo, k, split) if clamp else int(split)
    if fold == "auto":
        fold = folds(geo, m, n, s, driver.device().sm_count)
    fold = bool(fold) and s > 1

    def config(cfg):
        return LaunchConfig(cfg["grid"], cfg["block"], cfg["smem"], cfg["args"],
                            cfg["cluster"], tuple(cfg["keepalive"]))

    if s > 1:
        kernel = split_kernel(rung, kernel, narrow_output=narrow_output)
    main = wgmma_gemm_launch_config(rung, a, b, c, m, n, k, alpha, beta, stream=stream,
                                    narrow_output=narrow_output, kernel=kernel, splits=s,
                                    partials=workspace, fold=fold, staged=staged)
    if s == 1 or fold:
        return [(kernel, config(main))]
    out = rung.precision if narrow_output else "fp32"
    return [(kernel, config(main)),
            reduce_launch(main["args"][9], c, m, n, s, alpha, beta, out)]


# Operands up to this size that need padded rows get a staging buffer of their
# own per cached call signature (TmaBinding); larger ones a stream-ordered
# copy per call (whose allocation is small against the copy itself).
KEEP_STAGING_BYTES = 64 << 20


class TmaBinding(Binding):
    """Rung 20's launches for one call signature. The first call builds them
    through the checked path (split_launches); later calls re-encode only
    the maps over the new pointers (MapEncoder: one driver call each) and
    put the pointers and scalars into copies of the argument lists. An
    operand that needs padded rows is copied into this binding's own
    buffer (when at most KEEP_STAGING_BYTES), whose map never changes: the
    copy (pad_rows) is the first of the calls, so replaying them for the
    same pointers copies the operands' current data again."""

    def __init__(self, rung, kernel, m, n, k, *, stream, narrow_output, split):
        super().__init__(rung, kernel, m, n, k, stream=stream, narrow_output=narrow_output,
                         split=split)
        self._calls = None
        self._staging = {}
        self._pad = None           # (kernel, grid, block, args) of the staging copy
        self._per_call = False     # staging too large to keep: the checked path every call

    def __call__(self, pa, pb, pc, alpha, beta, ws):
        if self._per_call:
            return super().__call__(pa, pb, pc, alpha, beta, ws)
        if self._calls is None:
            return self._first(pa, pb, pc, alpha, beta, ws)
        pad = []
        if self._staging:
            pk, pgrid, pblock, pargs = self._pad
            pargs = list(pargs)
            for i, name in enumerate(self._staging):
                pargs[5 * i] = pa if name == "A" else pb
            pad = [(pk, pgrid, pblock, pargs, 0, None)]
        (kern, grid, block, args, smem, cluster), *rest = self._calls
        args = list(args)
        if self._enc_a is not None:
            args[0] = self._enc_a(pa)
        if self._enc_b is not None:
            args[1] = self._enc_b(pb)
        if self._enc_c is not None:
            args[2] = self._enc_c(pc)
        args[3], args[7], args[8] = pc, alpha, beta
        if args[11] > 1:   # split: the slices after the counters' head
            args[9] = ws + FOLD_COUNTER_BYTES
            if args[12]:
                args[12] = ws
        if rest:
            rk, rgrid, rblock, rargs, rsmem, rcluster = rest[0]
            rargs = (args[9], pc) + tuple(rargs[2:5]) + (alpha, beta)
            return pad + [(kern, grid, block, args, smem, cluster),
                          (rk, rgrid, rblock, rargs, rsmem, rcluster)], ()
        return pad + [(kern, grid, block, args, smem, cluster)], ()

    def _first(self, pa, pb, pc, alpha, beta, ws):
        geo = geometry(self.rung)
        es = geo.elem_size
        m, n, k = self.m, self.n, self.k
        for name, ptr, rows, cols in (("A", pa, m, k), ("B", pb, k, n)):
            if needs_staging(ptr, cols, es):
                if padded_pitch(cols * es) * rows > KEEP_STAGING_BYTES:
                    self._per_call = True
                    return super().__call__(pa, pb, pc, alpha, beta, ws)
                self._staging[name] = PaddedBuffer(rows, cols, es)
        pad = []
        if self._staging:
            cfg = pad_launch_config([st.copy_of(pa if name == "A" else pb)
                                     for name, st in self._staging.items()])
            self._pad = (pad_kernel(es), cfg.grid, cfg.block, cfg.args)
            pad = [(self._pad[0], cfg.grid, cfg.block, cfg.args, 0, None)]
        staged = {name: (st.ptr, st.pitch) for name, st in self._staging.items()}
        steps = split_launches(self.rung, self.kernel, pa, pb, pc, m, n, k, alpha, beta,
                               stream=self.stream, narrow_output=self.narrow, split=self.split,
                               workspace=ws, staged=staged)
        calls = [(kern, cfg.grid, cfg.block, cfg.args, cfg.smem, cfg.cluster)
                 for kern, cfg in steps]
        args = calls[0][3]
        self._enc_a = None if "A" in staged else MapEncoder(args[0])
        self._enc_b = None if "B" in staged else MapEncoder(args[1])
        self._enc_c = MapEncoder(args[2]) if isinstance(args[2], TensorMap) else None
        self._calls = calls
        return pad + calls, ()


class TmaWgmmaHost(PlainHost):
    """The host side of a ``host="tma"`` entry: A and B go in as tensor maps
    (misaligned operands staged, so one ALIGNED=1 instantiation serves every
    shape), grid and shared memory from the entry's geometry. K = 0 has no
    tensor-map extent: the dispatcher scales C instead."""
    name = "tma"
    unaligned = False      # no ALIGNED=0 instantiation
    takes_empty_k = False
    dependent_launch = True   # cu/gemm/20_tma_wgmma.cu: grid_dependency_wait()

    def aligned(self, rung, m, n, k, pa, pb, pc) -> bool:
        return True

    def split_counts(self, rung, m, n, k) -> tuple:
        """The entry's ``splits`` up to K (launches clamp a count to the
        k-tiles; the model prices each piece's fixed cost)."""
        return tuple(s for s in rung.splits if s == 1 or s <= k)

    def launch_config(self, rung, kernel, a, b, c, m, n, k, alpha, beta, *, stream=None,
                      narrow_output=False) -> LaunchConfig:
        cfg = wgmma_gemm_launch_config(rung, a, b, c, m, n, k, alpha, beta, stream=stream,
                                       narrow_output=narrow_output, kernel=kernel)
        return LaunchConfig(cfg["grid"], cfg["block"], cfg["smem"], cfg["args"],
                            cfg["cluster"], tuple(cfg["keepalive"]))

    def binding(self, rung, kernel, m, n, k, *, stream=0, narrow_output=False,
                split=1) -> TmaBinding:
        self._check_split(rung, split)
        return TmaBinding(rung, kernel, m, n, k, stream=stream, narrow_output=narrow_output,
                          split=split)

    def workspace_bytes(self, rung, m, n, split) -> int:
        """wgmma_workspace_bytes: the counters' head and S fp32 partials for
        ``split`` = S > 1 (0 for 1), enough for any K (launches may cut K
        into fewer pieces, never more); its head must be zero."""
        self._check_split(rung, split)
        return wgmma_workspace_bytes(geometry(rung), m, n, split)

    def split_k_build(self, rung, k, split) -> bool:
        """K in more than one piece (after the clamp to the k-tiles) runs the
        SPLIT_K=1 instantiation; one piece, the SPLIT_K=0 one."""
        return effective_splits(geometry(rung), k, split) > 1

    def split_in_kernel(self, rung, m, n, k, split, sm_count) -> bool:
        """The pieces K is cut into are folded in the kernel (folds())."""
        geo = geometry(rung)
        return folds(geo, m, n, effective_splits(geo, k, split), sm_count)

    def launches(self, rung, kernel, a, b, c, m, n, k, alpha, beta, *, stream=None,
                 narrow_output=False, split=1, workspace=0) -> list:
        """[(kernel, LaunchConfig)] for K in one piece; for ``split`` > 1 the
        split-K product into ``workspace`` (workspace_bytes(rung, m, n,
        split), 16-byte aligned, its head zero) and, past FOLD_MAX_SPLITS
        pieces, its deterministic reduction into C, with K cut into
        min(split, k-tiles) pieces."""
        self._check_split(rung, split)
        return split_launches(rung, kernel, a, b, c, m, n, k, alpha, beta, stream=stream,
                              narrow_output=narrow_output, split=split, workspace=workspace)

    @staticmethod
    def _check_split(rung, split):
        if split not in rung.splits:
            raise ValueError(f"{rung.name} splits K into one of {rung.splits} pieces, "
                             f"not {split!r}")


TMA_WGMMA = TmaWgmmaHost()
