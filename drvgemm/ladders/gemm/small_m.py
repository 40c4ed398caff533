"""The host side of rung 30 (small M, cu/gemm/30_small_m.cu): its geometry,
the alignment rule, the split of K and its workspace, the launch.

With M this small the product is a stream over B (K x N elements, read
once). A block is WARPS warps on one strip of columns (64 for 16-bit inputs,
128 for fp32) and ROWS rows of M; more rows are more blocks along the grid's
z part (adjacent in launch order, so they share B in L2). N / strip is often
far fewer blocks than the GPU holds (N = 4096 in bf16 is 64 strips), so K is
split too: ``split`` blocks per strip, each on a contiguous range of K, their
partial strips added in a fixed order by the last one to finish
(deterministic). How many splits: the dispatcher asks the streaming model
(analysis/gemm_model.predict_stream) for each count ``split_counts`` offers.

Kernel parameters: (A, B, C, work, counters, M, N, K, alpha, beta, strips,
zchunks, splits, steps_per_split, group). Many splits are added in two
levels: groups of ``group`` consecutive splits (``reduction_group``), each
summed by its last block, then the groups' sums, still in a fixed order. The
workspace (``workspace_bytes``) is int32 counters, one per (z chunk, strip)
and, with more than one group, one per (z chunk, strip, group), then fp32
partial tiles [zchunks * strips][splits][ROWS][strip]. The counters must be
0 when a launch starts. Where the tiles start depends on strips x zchunks, so bytes
that held one launch's partials can be a later launch's counters: every
launch leaves the whole workspace 0 (the last block of a strip resets its
counter and clears the partials it has read), so a workspace zeroed once
serves every later call on its stream, of any shape and any rung-30 entry.
Two launches that may run at the same time (two streams) need two
workspaces.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...runtime.driver import device_pointer
from ...runtime.launch import LaunchConfig
from .host import Binding, PlainHost

__all__ = ["auto_domain", "ELEM_BYTES", "Geometry", "geometry", "smem_bytes", "SmallMHost", "SMALL_M",
           "COUNTER_BYTES_ALIGN", "MAX_SPLITS", "SPLITS", "MIN_STEPS_PER_WARP",
           "reduction_group"]

ELEM_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
PREC = {"fp32": 0, "bf16": 1, "fp16": 2}
B_STAGE = 4 * 32 * 16          # per warp step: 32 lanes x 4 chunks of 16 B of B
# fp32 ALIGNED=0: each of the 4 rows copies the 33 aligned 16-byte blocks that
# cover its 128 columns wherever they start (SEG_BYTES in the .cu)
B_STAGE_SHIFTED = 4 * 33 * 16
COUNTER_BYTES_ALIGN = 256      # partial tiles start on a 256-byte boundary after the counters
MIN_STEPS_PER_WARP = 4         # a split gives each warp >= 4 steps (>= 32 KB of B per block)
# Split counts: every count to 64, then a coarser ladder to 512 for long K over
# a few strips (32 x 32 x 131072: one strip, 8192 bf16 steps), added in two
# levels. Measured there: fp32 at 256 splits 47-48 us against rung 08's 68;
# 16-bit at 373 splits 25 us, no better than rung 20's 24 (the model's
# StreamFigures.two_level_s carries the difference, so auto keeps rung 20).
SPLITS = tuple(range(1, 65)) + (80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512)
MAX_SPLITS = SPLITS[-1]
# Up to this many splits the last block of a strip adds them all (a chain of
# ceil(splits / 8) L2 round trips); beyond, groups of about sqrt(splits).
ONE_LEVEL_MAX_SPLITS = 32
# kernel="auto" offers rung 30 where it was measured: 16-bit inputs with all of M
# in one block (M <= ROWS; more rows are z chunks that re-read B, unmeasured),
# fp32 up to 512 rows (z chunks of 16 share B through L2; FFMA-bound there, measured
# to 64 rows: beyond, the model's FFMA figure decides against the SIMT tiles).
AUTO_MAX_M_FP32 = 512


def auto_domain(rung, m: int) -> bool:
    """Whether kernel="auto" may rank ``rung`` (a rung-30 entry) for M rows."""
    if rung.precision == "fp32":
        return m <= AUTO_MAX_M_FP32
    return m <= int(rung.defines["ROWS"])


def reduction_group(splits: int) -> int:
    """Splits per reduction group: all of them (one level) up to
    ONE_LEVEL_MAX_SPLITS, else the smallest power of two >= 8 whose square
    reaches ``splits`` (both levels then chain about sqrt(splits) / 8 round
    trips: 512 splits are 16 groups of 32)."""
    if splits <= ONE_LEVEL_MAX_SPLITS:
        return max(1, splits)
    g = 8
    while g * g < splits:
        g *= 2
    return g


def counter_bytes(strips: int, zchunks: int, splits: int) -> int:
    """The workspace's head: a counter per strip, and with two levels one per
    group of each strip, rounded up to COUNTER_BYTES_ALIGN."""
    groups = -(-splits // reduction_group(splits))
    per_strip = 1 + (groups if groups > 1 else 0)
    return -(-strips * zchunks * per_strip * 4 // COUNTER_BYTES_ALIGN) * COUNTER_BYTES_ALIGN


def smem_bytes(precision: str, rows: int, warps: int, stages: int, nwarps: int = 1) -> int:
    """Dynamic shared memory a launch declares: the larger of the two
    instantiations' figures (build_smem_bytes), so that a launch is right
    whichever one it runs (the host side is handed a kernel, not told which;
    the fp32 ALIGNED=1 build then has 1.5 KB it does not use, with the same
    blocks per SM)."""
    return max(build_smem_bytes(precision, rows, warps, stages, nwarps, aligned)
               for aligned in (True, False))


def build_smem_bytes(precision: str, rows: int, warps: int, stages: int, nwarps: int = 1,
                     aligned: bool = True) -> int:
    """Dynamic shared memory of one instantiation: the rings, or the
    cross-warp reduction buffer aliased on them, whichever is larger
    (SMEM_BYTES in the .cu, which checks this figure at compile time through
    SMEM_BYTES_HOST). Only fp32's ALIGNED=0 stage differs (B_STAGE_SHIFTED)."""
    strip = (128 if precision == "fp32" else 64) * nwarps
    if precision == "fp32":
        a_stage = rows * 16
    else:
        a_stage = (rows // 16) * 2 * 32 * 8
    b_stage = B_STAGE_SHIFTED if precision == "fp32" and not aligned else B_STAGE
    pipe = warps * stages * (b_stage + a_stage)
    red = (warps // nwarps) * rows * (strip + 4) * 4
    return max(pipe, red)


@dataclass(frozen=True)
class Geometry:
    """A rung-30 entry's launch figures, all derived from its defines."""
    precision: str
    rows: int          # ROWS: rows of M per block
    warps: int         # WARPS
    stages: int        # STAGES: depth of each lane's cp.async ring
    min_blocks: int    # MIN_BLOCKS of __launch_bounds__
    nwarps: int = 1    # NWARPS: warps side by side along N

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def kwarps(self) -> int:
        return self.warps // self.nwarps

    @property
    def strip(self) -> int:
        """Columns of C per block: 32 lanes x 4 floats, or 8 lanes x 8 halves, per warp."""
        return (128 if self.precision == "fp32" else 64) * self.nwarps

    @property
    def kstep(self) -> int:
        """Rows of B per warp step: 4 x 512 B (fp32) or one k16 mma block (16-bit)."""
        return 4 if self.precision == "fp32" else 16

    @property
    def step_bytes(self) -> int:
        return self.kstep * (self.strip // self.nwarps) * ELEM_BYTES[self.precision]

    @property
    def smem(self) -> int:
        return smem_bytes(self.precision, self.rows, self.warps, self.stages, self.nwarps)

    def smem_of(self, aligned: bool) -> int:
        """The shared memory one instantiation uses (its SMEM_BYTES_HOST)."""
        return build_smem_bytes(self.precision, self.rows, self.warps, self.stages, self.nwarps,
                                aligned)

    @property
    def in_flight_bytes(self) -> int:
        """B bytes a block keeps in flight in steady state: (STAGES-1) steps per warp."""
        return self.warps * (self.stages - 1) * self.step_bytes

    @property
    def register_cap(self) -> int:
        per_thread = 65536 // (self.threads * self.min_blocks)
        return min(255, per_thread - per_thread % 8)

    def blocks_per_sm(self, *, smem_per_sm=233472, smem_reserved=1024, regs_per_sm=65536,
                      threads_per_sm=2048, blocks_limit=32) -> int:
        """Resident blocks per SM at the launch-bounds register cap (which
        the compile never exceeds; H200 figures by default)."""
        by_regs = regs_per_sm // (self.register_cap * self.threads)
        by_smem = smem_per_sm // (self.smem + smem_reserved)
        return max(1, min(by_regs, by_smem, threads_per_sm // self.threads, blocks_limit))

    def shape(self, m: int, n: int, k: int, split: int) -> tuple:
        """(strips, zchunks, splits, steps_per_split) of a launch: ``split``
        normalised so that no split is empty."""
        strips = -(-n // self.strip)
        zchunks = -(-m // self.rows)
        steps = -(-k // self.kstep)
        if steps == 0:
            return strips, zchunks, 1, 0
        sps = -(-steps // max(1, min(split, steps)))
        return strips, zchunks, -(-steps // sps), sps


def defines(precision, ROWS, WARPS=4, STAGES=6, MIN_BLOCKS=4) -> dict:
    """The -D defines of an entry but ALIGNED and SMEM_BYTES_HOST, which
    depend on the instantiation (SmallMHost.instantiation_defines; OUT_16 0:
    the registry's narrow instantiation sets it to 1)."""
    return {"PREC": PREC[precision], "ROWS": ROWS, "WARPS": WARPS, "STAGES": STAGES,
            "MIN_BLOCKS": MIN_BLOCKS, "OUT_16": 0}


def geometry(rung) -> Geometry:
    d = rung.defines
    return Geometry(rung.precision, int(d["ROWS"]), int(d["WARPS"]), int(d["STAGES"]),
                    int(d["MIN_BLOCKS"]), int(d.get("NWARPS", 1)))


class SmallMHost(PlainHost):
    """The host side of a ``host="small_m"`` entry."""
    name = "small_m"
    unaligned = True
    takes_empty_k = True   # an empty K loop: the kernel writes beta * C itself
    dependent_launch = True   # cu/gemm/30_small_m.cu waits for the grid before it

    def instantiation_defines(self, rung, aligned: bool) -> dict:
        """The kernel checks the shared memory of its own build."""
        return {"SMEM_BYTES_HOST": geometry(rung).smem_of(aligned)}

    def aligned(self, rung, m, n, k, pa, pb, pc) -> bool:
        """ALIGNED=1: B rows in whole 16-byte chunks (N a multiple of 16 /
        element size, B 16-byte aligned), A copied in 8-byte (16-bit) or
        16-byte (fp32) pieces (K % 4 == 0, A aligned to that). C has no
        requirement: it is written element by element."""
        vec = 16 // ELEM_BYTES[rung.precision]
        a_align = 16 if rung.precision == "fp32" else 8
        return n % vec == 0 and k % 4 == 0 and pb % 16 == 0 and pa % a_align == 0

    def split_counts(self, rung, m, n, k) -> tuple:
        """The distinct split counts worth considering: up to what keeps
        every warp >= MIN_STEPS_PER_WARP steps, normalised (no empty split)."""
        g = geometry(rung)
        steps = -(-k // g.kstep)
        top = max(1, min(MAX_SPLITS, steps // (g.kwarps * MIN_STEPS_PER_WARP)))
        out = []
        for s in rung.splits:
            if s > top:
                break
            eff = g.shape(m, n, k, s)[2]
            if not out or eff != out[-1]:
                out.append(eff)
        return tuple(out)

    def workspace_bytes(self, rung, m, n, split) -> int:
        if split <= 1:
            return 0
        g = geometry(rung)
        strips, zchunks = -(-n // g.strip), -(-m // g.rows)
        return counter_bytes(strips, zchunks, split) + zchunks * strips * split * g.rows * g.strip * 4

    def grid(self, rung, m, n, k, split=1) -> tuple:
        strips, zchunks, splits, _ = geometry(rung).shape(m, n, k, split)
        return (strips * zchunks * splits, 1, 1)

    def launch_config(self, rung, kernel, a, b, c, m, n, k, alpha, beta, *, stream=None,
                      narrow_output=False) -> LaunchConfig:
        return self.launches(rung, kernel, a, b, c, m, n, k, alpha, beta, stream=stream,
                             narrow_output=narrow_output)[0][1]

    def launches(self, rung, kernel, a, b, c, m, n, k, alpha, beta, *, stream=None,
                 narrow_output=False, split=1, workspace=0) -> list:
        """One launch; ``workspace``: the device address of
        ``workspace_bytes(rung, m, n, split)`` bytes, all 0 (a workspace
        that earlier launches left as they found it; any value for one
        split)."""
        g = geometry(rung)
        strips, zchunks, splits, sps = g.shape(m, n, k, split)
        work = counters = 0
        if splits > 1:
            if not workspace:
                raise ValueError(f"{rung.name}: a split of K in {splits} needs a workspace "
                                 f"of {self.workspace_bytes(rung, m, n, splits)} bytes")
            counters = device_pointer(workspace, "workspace")
            work = counters + counter_bytes(strips, zchunks, splits)
        if k == 0:
            a = b = c    # never read (an empty K loop): any valid address
        args = (a, b, c, work, counters, m, n, k, alpha, beta, strips, zchunks, splits, sps,
                reduction_group(splits))
        return [(kernel, LaunchConfig((strips * zchunks * splits, 1, 1), (g.threads, 1, 1),
                                      g.smem, args))]

    def binding(self, rung, kernel, m, n, k, *, stream=0, narrow_output=False,
                split=1) -> Binding:
        return SmallMBinding(rung, kernel, m, n, k, stream=stream,
                             narrow_output=narrow_output, split=split)


class SmallMBinding(Binding):
    """Rung 30's launch for one call signature: the grid, the geometry and
    the split's figures are computed once (the first call, through
    ``launches``); a call with new pointers or scalars only fills them into
    the argument list. On the H200 host, building the launch through
    ``launches`` on every new pointer cost ~10 us a call (22.8 against 12.3
    us with one operand set, benchmarks/notes/launch.md): the shape suite's
    rotating operands and a caller's allocator give new pointers often."""

    def __init__(self, rung, kernel, m, n, k, *, stream, narrow_output, split):
        super().__init__(rung, kernel, m, n, k, stream=stream, narrow_output=narrow_output,
                         split=split)
        self._launch = None     # (kernel, grid, block, smem, args) of the first call
        self._work_offset = 0   # partial tiles past the counters, in the workspace

    def __call__(self, pa, pb, pc, alpha, beta, ws):
        first = self._launch
        if first is None:
            return self._first(pa, pb, pc, alpha, beta, ws)
        kern, grid, block, smem, args = first
        if self.k == 0:
            pa = pb = pc      # never read (an empty K loop): any valid address
        counters = ws if args[4] else 0
        work = counters + self._work_offset if counters else 0
        return [(kern, grid, block, (pa, pb, pc, work, counters) + args[5:8] + (alpha, beta)
                 + args[10:], smem, None)], ()

    def _first(self, pa, pb, pc, alpha, beta, ws):
        (kern, cfg), = self.rung.launches(self.kernel, pa, pb, pc, self.m, self.n, self.k,
                                         alpha, beta, stream=self.stream,
                                         narrow_output=self.narrow, split=self.split,
                                         workspace=ws)
        args = cfg.args
        self._work_offset = args[3] - args[4] if args[4] else 0
        self._launch = (kern, cfg.grid, cfg.block, cfg.smem, args)
        return [(kern, cfg.grid, cfg.block, args, cfg.smem, None)], ()


SMALL_M = SmallMHost()
