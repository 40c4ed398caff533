"""Host side of rung 30 (cu/gemm/30_small_m.cu): C = alpha*A@B + beta*C for
small M (1 <= M <= 64), any N, any K, row-major and contiguous.

A proposal, kept outside the drvgemm package while that is being re-laid
out: the registry (``INSTANCES``), the launch model (``plan``) and the launch
(``launch_small_m``) are meant to move into drvgemm's gemm layer as they are.

Why the plan looks the way it does. With M this small the whole product is a
stream over B (K*N elements, read once), so the time is bytes / bandwidth as
long as every SM keeps enough bytes in flight (Little's law: ~4.27 TB/s x
~1-2 us of loaded DRAM latency over 132 SMs, 32-64 KB per SM). A block is
WARPS warps on one strip of columns (64 for 16-bit inputs, 128 for fp32),
and each warp keeps STAGES-1 steps of 2 KB of B in flight through its
cp.async ring. N / strip is often far fewer blocks than the GPU holds
(N = 4096 in bf16 is 64 strips), so K is split too: ``splits`` blocks per
strip, each on a contiguous range of K, their partial strips added in a
fixed order by the last one to finish (deterministic).
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import drvgemm

__all__ = ["SmallMInstance", "INSTANCES", "Plan", "Workspace", "Launch", "instance_for", "plan",
           "compile_instance", "prepare", "launch_small_m", "alignment_ok", "SOURCE", "ENTRY"]

_HERE = Path(__file__).resolve().parent
SOURCE = "cu/gemm/30_small_m.cu"
ENTRY = "small_m_gemm"

_PREC = {"fp32": 0, "bf16": 1, "fp16": 2}
_ELEM_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


# ---------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SmallMInstance:
    """One compiled variant of rung 30. Every launch figure (block, shared
    memory, strip, step) is derived here from the same constants that reach
    the kernel as -D defines; the kernel checks the shared memory figure at
    compile time (SMEM_BYTES_HOST)."""
    precision: str        # "fp32" | "bf16" | "fp16": input type (fp32 accumulate always)
    rows: int             # ROWS: rows of M per block (16-bit: 16/32/64 = 1/2/4 mma m-tiles)
    aligned: bool         # ALIGNED: 16-byte chunks (see alignment_ok) or element by element
    out16: bool = False   # OUT_16: C in the inputs' 16-bit type instead of float32
    warps: int = 4        # WARPS: warps per block, splitting the block's K range step by step
    stages: int = 4       # STAGES: depth of each lane's cp.async ring
    min_blocks: int = 4   # MIN_BLOCKS of __launch_bounds__: caps registers at 64K/(threads*this)
    nwarps: int = 1       # NWARPS: warps side by side along N (the rest take turns along K)
    extra: tuple = ()     # extra -D names (diagnostic variants only: NO_HINT, SKIP_MATH)
    coalesced: bool = True  # COALESCED (16-bit): copy lanes by whole 128-byte lines

    # -- what the kernel is built from --------------------------------------
    @property
    def name(self) -> str:
        return (f"30_small_m_{self.precision}_r{self.rows}"
                f"{f'_w{self.warps}n{self.nwarps}' if (self.warps, self.nwarps) != (4, 1) else ''}"
                f"{f'_s{self.stages}' if self.stages != 4 else ''}"
                f"{'_out16' if self.out16 else ''}{'' if self.aligned else '_unaligned'}"
                f"{'' if self.coalesced or self.precision == 'fp32' else '_lanecopy'}"
                f"{''.join('_' + x.lower() for x in self.extra)}")

    @property
    def kwarps(self) -> int:
        """Warps taking turns along K (WARPS / NWARPS)."""
        return self.warps // self.nwarps

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def block(self) -> tuple:
        return (self.threads, 1, 1)

    @property
    def elem_bytes(self) -> int:
        return _ELEM_BYTES[self.precision]

    @property
    def vector(self) -> int:
        """Elements of one 16-byte chunk of a B row (the ALIGNED=1 unit)."""
        return 16 // self.elem_bytes

    @property
    def strip(self) -> int:
        """Columns of C per block: NWARPS warps of 32 lanes x 4 floats, or of
        8 lanes x 8 halves."""
        return (128 if self.precision == "fp32" else 64) * self.nwarps

    @property
    def kstep(self) -> int:
        """Rows of B per warp step: 4 x 512 B (fp32) or one k16 mma block (16-bit)."""
        return 4 if self.precision == "fp32" else 16

    @property
    def step_bytes(self) -> int:
        """B bytes of one warp step (one warp's strip): 2 KB for both."""
        return self.kstep * (self.strip // self.nwarps) * self.elem_bytes

    @property
    def smem(self) -> int:
        """Dynamic shared memory: the rings, or the cross-warp reduction
        buffer aliased on them, whichever is larger (as SMEM_BYTES in the .cu)."""
        b_stage = 4 * 32 * 16
        if self.precision == "fp32":
            a_stage = self.rows * 16
        else:
            a_stage = (self.rows // 16) * 2 * 32 * 8
        pipe = self.warps * self.stages * (b_stage + a_stage)
        red = self.kwarps * self.rows * (self.strip + 4) * 4
        return max(pipe, red)

    @property
    def in_flight_bytes(self) -> int:
        """B bytes a block keeps in flight in steady state: (STAGES-1) steps per warp."""
        return self.warps * (self.stages - 1) * self.step_bytes

    @property
    def defines(self) -> dict:
        return {"PREC": _PREC[self.precision], "ALIGNED": int(self.aligned), "ROWS": self.rows,
                "WARPS": self.warps, "STAGES": self.stages, "MIN_BLOCKS": self.min_blocks,
                "OUT_16": int(self.out16), "SMEM_BYTES_HOST": self.smem,
                **({"NWARPS": self.nwarps} if self.nwarps != 1 else {}),
                **({"COALESCED": 0} if not self.coalesced else {}),
                **{x: 1 for x in self.extra}}

    @property
    def register_cap(self) -> int:
        """What __launch_bounds__(threads, min_blocks) lets ptxas use (<= 255)."""
        per_thread = 65536 // (self.threads * self.min_blocks)
        return min(255, per_thread - per_thread % 8)

    def blocks_per_sm(self, registers: int | None = None, *, smem_per_sm: int = 233472,
                      smem_reserved: int = 1024, regs_per_sm: int = 65536,
                      threads_per_sm: int = 2048, blocks_limit: int = 32) -> int:
        """Resident blocks per SM: the least of the register file (registers
        rounded up to 8 per thread; by default the launch-bounds cap, which
        the compile report never exceeds), shared memory (+1 KB reserved per
        block) and the thread / block limits. H200 figures by default."""
        regs = self.register_cap if registers is None else registers
        regs = -(-regs // 8) * 8
        by_regs = regs_per_sm // (regs * self.threads)
        by_smem = smem_per_sm // (self.smem + smem_reserved)
        return max(1, min(by_regs, by_smem, threads_per_sm // self.threads, blocks_limit))


NW16 = 1   # warps side by side along N in the 16-bit instances (4 gained nothing)


def _registry() -> list[SmallMInstance]:
    out = []
    for aligned in (True, False):
        # fp32: 16 rows per block (64 accumulators per lane); more rows of M
        # are more blocks along z, B shared through L2.
        out.append(SmallMInstance("fp32", 16, aligned, min_blocks=4))
        for prec in ("bf16", "fp16"):
            for out16 in (False, True):
                # rows 16: ~96 registers, 5 blocks/SM; rows 32: 128, 4 blocks;
                # rows 64: ~194 (128 accumulators), 2 blocks, so a deeper ring
                # (5 steps of 2 KB per warp in flight) to keep 80 KB per SM in the air.
                # nwarps=4: the four warps side by side along N, so a block reads
                # 512 contiguous bytes of each B row (see benchmarks/notes/small-m.md).
                out.append(SmallMInstance(prec, 16, aligned, out16, stages=6, min_blocks=4,
                                          nwarps=NW16))
                out.append(SmallMInstance(prec, 32, aligned, out16, stages=6, min_blocks=4,
                                          nwarps=NW16))
                out.append(SmallMInstance(prec, 64, aligned, out16, stages=6, min_blocks=2,
                                          nwarps=NW16))
    return out


INSTANCES: list[SmallMInstance] = _registry()


def instance_for(m: int, precision: str, aligned: bool, out16: bool = False) -> SmallMInstance:
    """The registered instance for M rows: 16-bit takes the smallest ROWS >= M
    (all of M in one block, B read once); fp32 always 16 (z chunks)."""
    if precision not in _PREC:
        raise ValueError(f"precision must be one of {', '.join(_PREC)}, got {precision!r}")
    if not 1 <= m <= 64:
        raise ValueError(f"the small-M path takes 1 <= M <= 64, got M = {m}")
    if out16 and precision == "fp32":
        raise ValueError("out16 applies to bf16 / fp16 inputs only")
    cands = [i for i in INSTANCES if i.precision == precision and i.aligned == bool(aligned)
             and i.out16 == bool(out16)]
    if precision == "fp32":
        return cands[0]
    return min((i for i in cands if i.rows >= m), key=lambda i: i.rows)


def alignment_ok(inst_or_precision, n: int, k: int, a_ptr: int, b_ptr: int) -> bool:
    """Whether ALIGNED=1 is allowed: B rows in whole 16-byte chunks (N a
    multiple of 16 / element size, B 16-byte aligned), A copied in 8-byte
    (16-bit) or 16-byte (fp32) pieces (K % 4 == 0, A aligned to that). C has
    no requirement: it is written element by element."""
    prec = getattr(inst_or_precision, "precision", inst_or_precision)
    vec = 16 // _ELEM_BYTES[prec]
    a_align = 16 if prec == "fp32" else 8
    return n % vec == 0 and k % 4 == 0 and b_ptr % 16 == 0 and a_ptr % a_align == 0


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------
# Figures of the H200 the project is measured on (../shared/ANCHORS.md);
# the model only needs their ratios to choose, the absolute values to predict.
COPY_BW = 4.27e12            # bytes/s, device-to-device copy (read + write)
STREAM_EFF = 0.92            # a read-only stream gets a little more than a copy's mix
IN_FLIGHT_PER_SM = 64 << 10  # bytes: Little's law with ~2 us of latency at full load
L2_ROUND_TRIP = 0.6e-6       # s, one dependent L2 access under load (reduction chain)
LAUNCH_AND_RAMP = 2.0e-6     # s, launch, first DRAM latency, last block's epilogue
# Math ceilings (ANCHORS.md, register-only microbenchmarks), derated for the
# loads, conversions and address work that share the issue slots: FFMA for
# fp32 (a lane does 16 * rows FFMA per 64 bytes of B), mma.sync for 16-bit
# (counted on rows padded to ROWS: the padding is computed too).
FFMA_RATE = 60.2e12 * 0.8
MMA_RATE = 643.0e12 * 0.5
MIN_STEPS_PER_WARP = 4       # a split gives each warp >= 4 steps (>= 32 KB of B per block)
MAX_SPLITS = 64


@dataclass
class Plan:
    """A launch of rung 30 and the reasons for it."""
    instance: SmallMInstance
    m: int
    n: int
    k: int
    strips: int              # ceil(N / strip)
    zchunks: int             # ceil(M / ROWS)
    splits: int              # blocks per (strip, z chunk) along K
    steps_per_split: int     # KSTEP-row steps per split (the last split may have fewer)
    blocks_per_sm: int
    waves: float             # grid / resident capacity
    predicted_s: float
    bytes_moved: int         # B + A + C (+ workspace) the model charges
    alternatives: list = field(default_factory=list)   # (splits, predicted_s) considered

    @property
    def grid(self) -> tuple:
        return (self.strips * self.zchunks * self.splits, 1, 1)

    @property
    def block(self) -> tuple:
        return self.instance.block

    @property
    def smem(self) -> int:
        return self.instance.smem

    @property
    def workspace_floats(self) -> int:
        """fp32 tiles [zchunks * strips][splits][ROWS][STRIP]; none for one split."""
        if self.splits == 1:
            return 0
        i = self.instance
        return self.zchunks * self.strips * self.splits * i.rows * i.strip

    @property
    def counters(self) -> int:
        return 0 if self.splits == 1 else self.zchunks * self.strips

    def explain(self) -> str:
        i = self.instance
        alts = ", ".join(f"S={s}: {t * 1e6:.1f} us" for s, t in self.alternatives[:8])
        return (f"{i.name}: {self.m}x{self.n}x{self.k}, {self.strips} strips of {i.strip} x "
                f"{self.zchunks} z x {self.splits} splits = {self.grid[0]} blocks of "
                f"{i.threads} ({self.blocks_per_sm}/SM resident, {self.waves:.2f} waves), "
                f"{self.steps_per_split * i.kstep} rows of K per split; "
                f"predicted {self.predicted_s * 1e6:.1f} us for {self.bytes_moved / 1e6:.1f} MB "
                f"({self.bytes_moved / self.predicted_s / 1e9:.0f} GB/s); considered {alts}")


def _stream_time(blocks: int, bytes_per_block: float, capacity: int, sm_count: int,
                 in_flight_per_block: int) -> float:
    """Time to stream ``blocks`` equal blocks, ``capacity`` at a time: each
    wave runs at the copy bandwidth scaled by how much of Little's law its
    blocks cover (a wave with too few blocks per SM cannot hide the latency)."""
    t, left = 0.0, blocks
    while left > 0:
        wave = min(left, capacity)
        cover = wave / sm_count * in_flight_per_block / IN_FLIGHT_PER_SM
        t += wave * bytes_per_block / (COPY_BW * STREAM_EFF * min(1.0, cover))
        left -= wave
    return t


def plan(m: int, n: int, k: int, precision: str, sm_count: int = 132, *, aligned: bool = True,
         out16: bool = False, beta_nonzero: bool = False, registers: int | None = None,
         inst: SmallMInstance | None = None, force_splits: int | None = None) -> Plan:
    """Choose the instance, split count and grid for an M x N x K product.

    The model: time = max(stream(B, split over the blocks, A and C charged
    once), math at the derated FFMA / mma.sync ceiling)
    + the workspace round trip (each split block writes its ROWS x STRIP
    tile, the last reads them all back) + the last block's reduction chain
    (ceil(S / 8) dependent L2 round trips per item, 8 splits' loads in
    flight at once) + a fixed launch/ramp term. Splits are tried from 1 up
    to what keeps every warp >= MIN_STEPS_PER_WARP steps; the cheapest
    predicted wins, ties to fewer splits. Deterministic for a given device
    (sm_count) and instance."""
    if m < 1 or n < 1 or k < 0:
        raise ValueError(f"plan needs M, N >= 1 and K >= 0, got {m}x{n}x{k}")
    if inst is None:
        inst = instance_for(m, precision, aligned, out16)
    e = inst.elem_bytes
    strips = -(-n // inst.strip)
    zchunks = -(-m // inst.rows)
    steps = -(-k // inst.kstep)
    bps = inst.blocks_per_sm(registers)
    capacity = bps * sm_count
    base = strips * zchunks

    c_bytes = m * n * (2 if out16 else 4) * (2 if beta_nonzero else 1)
    a_bytes = m * k * e
    b_bytes = k * n * e
    flops = 2.0 * zchunks * inst.rows * k * n
    math_time = flops / (FFMA_RATE if precision == "fp32" else MMA_RATE)
    max_splits = max(1, min(MAX_SPLITS, steps // (inst.kwarps * MIN_STEPS_PER_WARP)))
    if force_splits is not None:
        max_splits = max(1, min(force_splits, steps or 1))
    best, alternatives = None, []
    for s_try in (range(1, max_splits + 1) if force_splits is None else (max_splits,)):
        sps = -(-steps // s_try) if steps else 0
        splits = -(-steps // sps) if sps else 1      # no empty split
        if alternatives and splits == alternatives[-1][0]:
            continue
        blocks = base * splits
        # DRAM bytes per block: B and A once over the grid (the z chunks of a
        # strip re-read its B from L2, not DRAM: they are adjacent in launch order).
        stream_bytes = (b_bytes + a_bytes) / blocks
        t = _stream_time(blocks, stream_bytes, capacity, sm_count, inst.in_flight_bytes)
        # The math needs the SMs too: >= 2 resident blocks (8 warps) per SM
        # to keep an SM's FFMA / tensor pipes fed.
        t = max(t, math_time / min(1.0, min(blocks, capacity) / (2 * sm_count)))
        # the workspace and the reduction touch only the rows a block owns
        rows_used = min(m, inst.rows)
        work = 2 * base * splits * rows_used * inst.strip * 4 if splits > 1 else 0
        items = rows_used * inst.strip // 4
        chain = (math.ceil(splits / 8) * math.ceil(items / inst.threads) * L2_ROUND_TRIP
                 if splits > 1 else 0.0)
        t += (c_bytes + work) / (COPY_BW * STREAM_EFF) + chain + LAUNCH_AND_RAMP
        alternatives.append((splits, t))
        if best is None or t < best[1] * (1 - 1e-9):
            best = (splits, t, sps, blocks, work)
    splits, t, sps, blocks, work = best
    return Plan(inst, m, n, k, strips, zchunks, splits, sps, bps, blocks / capacity, t,
                b_bytes + a_bytes + c_bytes + work, alternatives)


# ---------------------------------------------------------------------------
# compile and launch
# ---------------------------------------------------------------------------
_kernels: dict = {}
_lock = threading.Lock()


def _source_path() -> str:
    p = _HERE / SOURCE
    return str(p) if p.is_file() else SOURCE


def compile_instance(inst: SmallMInstance, arch=None):
    """The compiled kernel of an instance (cached per architecture)."""
    key = (inst, arch)
    kern = _kernels.get(key)
    if kern is None:
        with _lock:
            kern = _kernels.get(key)
            if kern is None:
                kern = drvgemm.compile(_source_path(), ENTRY, defines=inst.defines, arch=arch)
                _kernels[key] = kern
    return kern


class Workspace:
    """fp32 partial tiles and int32 counters for split K. Counters start at 0
    and every call leaves them at 0; a workspace must not be shared by
    launches that may run at the same time (two streams): give each stream
    its own (the default one is per stream)."""

    def __init__(self, floats: int = 0, counters: int = 0):
        self.work = None
        self.counters = None
        self.floats = 0
        self.ncounters = 0
        self.ensure(floats, counters)

    def ensure(self, floats: int, counters: int, stream=None):
        if floats > self.floats:
            self.work = drvgemm.empty((max(floats, 1),), np.float32)
            self.floats = floats
        if counters > self.ncounters:
            # A new buffer may be used by a kernel right after: zero it on the
            # same stream, before that launch.
            self.counters = drvgemm.empty((max(counters, 1),), np.int32)
            self.counters.fill_bytes(0, stream)
            self.ncounters = counters
        return self


_workspaces: dict = {}


def _stream_key(stream) -> int:
    from drvgemm import driver
    return driver.stream_handle(stream)


def _ptr(x) -> int:
    from drvgemm import driver
    return driver.device_pointer(x)


@dataclass
class Launch:
    """A planned, compiled launch: ``run()`` enqueues it again (same
    pointers, or ``args`` with some replaced, e.g. a rotated B for timing)."""
    kernel: object
    plan: Plan
    args: tuple
    stream: object = None

    def run(self, args=None):
        drvgemm.launch(self.kernel, self.plan.grid, self.plan.block,
                       self.args if args is None else args, smem=self.plan.smem,
                       stream=self.stream)


def prepare(A, B, C, m, n, k, alpha=1.0, beta=0.0, precision="bf16", out16=False,
            stream=None, workspace=None, inst=None, force_splits=None) -> Launch | None:
    """Everything launch_small_m does except the launch; None when M or N is 0."""
    m, n, k = int(m), int(n), int(k)
    if m < 0 or n < 0 or k < 0:
        raise ValueError(f"negative dimension: {m}x{n}x{k}")
    if m == 0 or n == 0:
        return None
    a_ptr, b_ptr, c_ptr = _ptr(A), _ptr(B), _ptr(C)
    if k == 0:
        a_ptr = b_ptr = c_ptr   # never read: any valid address
    aligned = alignment_ok(precision, n, k, a_ptr, b_ptr)
    sm_count = drvgemm.device().sm_count
    p = plan(m, n, k, precision, sm_count, aligned=aligned, out16=out16,
             beta_nonzero=beta != 0, inst=inst, force_splits=force_splits)
    kern = compile_instance(p.instance)
    res = kern.resources
    if res is not None and p.instance.blocks_per_sm(res.registers) != p.blocks_per_sm:
        # Re-plan with the registers ptxas actually used (more blocks per SM
        # than the launch-bounds floor where they fit).
        p = plan(m, n, k, precision, sm_count, aligned=aligned, out16=out16,
                 beta_nonzero=beta != 0, registers=res.registers, inst=inst,
                 force_splits=force_splits)
    work_ptr = cnt_ptr = 0
    if p.splits > 1:
        if workspace is None:
            key = _stream_key(stream)
            workspace = _workspaces.get(key)
            if workspace is None:
                workspace = _workspaces[key] = Workspace()
        workspace.ensure(p.workspace_floats, p.counters, stream)
        work_ptr, cnt_ptr = workspace.work.ptr, workspace.counters.ptr
    args = (a_ptr, b_ptr, c_ptr, work_ptr, cnt_ptr, m, n, k, float(alpha), float(beta),
            p.strips, p.zchunks, p.splits, p.steps_per_split)
    return Launch(kern, p, args, stream)


def launch_small_m(A, B, C, m, n, k, alpha=1.0, beta=0.0, precision="bf16", out16=False,
                   stream=None, workspace=None):
    """Enqueue C = alpha * A @ B + beta * C on ``stream``; returns the Plan.

    A, B, C: device arrays (DeviceArray, __cuda_array_interface__ objects or
    raw device addresses), row-major and contiguous, A m x k, B k x n,
    C m x n; bf16 data may come as uint16 (raw bits). M or N = 0: nothing.
    K = 0: the kernel writes beta * C (its K loop is empty; beta = 0 writes
    zeros without reading C). The alignment class is read from the pointers
    on every call; the plan is deterministic, so a call gives the same bits
    every time (split-K included). ``workspace``: a Workspace for split K
    (default: one per stream, grown as needed)."""
    launch = prepare(A, B, C, m, n, k, alpha, beta, precision, out16, stream, workspace)
    if launch is None:
        return None
    launch.run()
    return launch.plan
