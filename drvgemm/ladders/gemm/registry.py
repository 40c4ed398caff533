"""The registry of GEMM rungs: each rung declared once, next to its tile
constants, with the host side that turns the entry and a compiled kernel into
a launch (grid, block, dynamic shared memory, arguments). The dispatcher
(dispatch.py) picks a rung and an instantiation and launches what the host
side returns; nothing else about a rung is written down anywhere.

Plain kernel signature, shared by every rung but 20 (row-major, contiguous):
    extern "C" __global__ void ENTRY(const T* A, const T* B, float* C,
                                     int M, int N, int K, float alpha, float beta)
A is M x K, B is K x N, C is M x N (float32). C = alpha*A@B + beta*C, and
beta == 0 must never read C.

Every plain rung is compiled with -DALIGNED=1 or -DALIGNED=0. ALIGNED=1 is
picked only when K and N are multiples of ``vector`` and the three pointers
are 16-byte aligned, so a rung's vector loads may assume that; the ALIGNED=0
instantiation must be correct for any M, N, K >= 1. Rung 20 (``host="tma"``)
takes tensor maps; its host side is drvgemm/ladders/gemm/hopper.py. Rung 30
(``host="small_m"``) has its own signature (a split-K workspace, the grid's
strips, z chunks and splits); its host side is drvgemm/ladders/gemm/small_m.py.

``auto=True`` entries are the candidates of kernel="auto": the dispatcher
(plan.py) predicts each one's time on the shape with analysis/gemm_model.py
and launches the fastest; the teaching rungs are ``auto=False``.

Why each entry's constants are what they are, with the measurements behind
them: benchmarks/notes/gemm-registry.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...runtime.kernel import Kernel, compile, dependent_launch_arch
from ...runtime.launch import LaunchConfig
from . import hopper, small_m, split_k
from .host import PlainHost


PLAIN = PlainHost()
# The split-K counts of the fp32 SIMT top rung (08), for few tiles and a long K
# (1024 x 1024 x 32768 is 64 tiles of 128 x 128, 256 of 64 x 64, on 132 SMs).
# tests/test_gemm_gpu.py's split-K tests run every count on the H200, and
# benchmarks/sanitize.py puts some of them under the sanitizers.
SIMT_SPLITS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
# Rung.host (a name, so that an entry stays plain data) -> its host side.
HOSTS = {"": PLAIN, "tma": hopper.TMA_WGMMA, "small_m": small_m.SMALL_M}


@dataclass(frozen=True)
class Rung:
    name: str                 # ladder number + what it adds, e.g. "04_reg_tiled"
    source: str               # kernel file name, found under cu/ or ptx/
    entry: str                # kernel symbol (extern "C", or a template name expression)
    precision: str            # "fp32" | "tf32" | "bf16" | "fp16": the input type and math
    block: tuple              # threads per block (x, y, z)
    tile_m: int               # rows of C per block
    tile_n: int               # columns of C per block: grid = (ceil(N/tile_n), ceil(M/tile_m))
    smem: int = 0             # dynamic shared memory in bytes
    defines: dict = field(default_factory=dict)   # tile constants, passed as -D
    vector: int = 1           # elements per vector access (ALIGNED=1 needs K % vector == N % vector == 0)
    arch: str = "sm_80"       # lowest architecture it runs on ("sm_90a" for wgmma)
    options: tuple = ()       # extra NVRTC options (e.g. "--maxrregcount=128")
    summary: str = ""         # one line: what this rung adds over the one before
    # Relative rounding of an input as the tensor core sees it, when it is not the
    # precision's usual one: TF32 wgmma reads A straight from shared memory, and the
    # hardware drops the low 13 mantissa bits (truncation, 2^-10) instead of rna (2^-11).
    input_roundoff: float = 0.0
    host: str = ""            # a key of HOSTS: "" plain, "tma" (hopper.py), "small_m" (small_m.py)
    # C may also be in the inputs' own 16-bit type (compiled with OUT_16=1),
    # not only float32: gemm(..., out_dtype=...) or a 16-bit C picks it.
    narrow_output: bool = False
    auto: bool = True         # a candidate of kernel="auto" (False: a teaching rung only)
    splits: tuple = (1,)      # the split-K counts its host side runs (1: K in one piece)

    def __post_init__(self):
        if self.host not in HOSTS:
            raise ValueError(f"{self.name}: host {self.host!r} is not one of {sorted(HOSTS)}")

    @property
    def host_side(self):
        """The object that computes this rung's launch (PlainHost or
        hopper.TmaWgmmaHost)."""
        return HOSTS[self.host]

    def grid(self, m: int, n: int) -> tuple:
        return ((n + self.tile_n - 1) // self.tile_n, (m + self.tile_m - 1) // self.tile_m, 1)

    @property
    def threads(self) -> int:
        b = tuple(self.block) + (1, 1)
        return b[0] * b[1] * b[2]

    def instantiation_defines(self, aligned: bool, narrow_output: bool = False,
                              split_k: bool = False) -> dict | None:
        """The -D defines of one instantiation (None for hand-written PTX,
        which has one instantiation for every shape). ``split_k``: the
        split-K instantiation (SPLIT_K=1) of a rung that has one (its
        defines carry SPLIT_K=0, the unsplit build)."""
        if self.source.endswith(".ptx"):
            if split_k:
                raise ValueError(f"{self.name} has no split-K instantiation")
            return None
        defines = dict(self.defines)
        defines["ALIGNED"] = int(bool(aligned))
        defines.update(self.host_side.instantiation_defines(self, bool(aligned)))
        if narrow_output:
            defines["OUT_16"] = 1
        if split_k:
            if "SPLIT_K" not in defines:
                raise ValueError(f"{self.name} has no split-K instantiation")
            defines["SPLIT_K"] = 1
        return defines

    @property
    def has_split_k_build(self) -> bool:
        """Whether split counts > 1 run a separate SPLIT_K=1 instantiation."""
        return "SPLIT_K" in self.defines

    def launch_config(self, kernel, a, b, c, m, n, k, alpha, beta, *, stream=None,
                      narrow_output=False) -> LaunchConfig:
        """Grid, block, shared memory and arguments of one launch of ``kernel``
        (an instantiation of this rung) for C = alpha * A @ B + beta * C."""
        return self.host_side.launch_config(self, kernel, a, b, c, m, n, k, alpha, beta,
                                            stream=stream, narrow_output=narrow_output)

    def launches(self, kernel, a, b, c, m, n, k, alpha, beta, *, stream=None,
                 narrow_output=False, split=1, workspace=0) -> list:
        """Every launch of one product with K in ``split`` pieces: see
        PlainHost.launches."""
        return self.host_side.launches(self, kernel, a, b, c, m, n, k, alpha, beta,
                                       stream=stream, narrow_output=narrow_output,
                                       split=split, workspace=workspace)

    def workspace_bytes(self, m, n, split) -> int:
        return self.host_side.workspace_bytes(self, m, n, split)


def compile_arch(r: Rung) -> str | None:
    """sm_90a-only rungs (wgmma, setmaxnreg) compile for sm_90a; the rest for
    the current device (sm_90 when there is none)."""
    return r.arch if r.arch.endswith("a") else None


_kernels: dict = {}


def rung_kernel(r: Rung, aligned: bool, arch=None, *, narrow_output=False,
                split_k=False) -> Kernel:
    """The compiled instantiation of a rung (cached per process);
    ``narrow_output``: the one that writes C in the inputs' 16-bit type;
    ``split_k``: the split-K build (SPLIT_K=1, rung 20: launched for
    splits > 1 only; the default is the unsplit one)."""
    arch = arch or compile_arch(r)
    if narrow_output and not r.narrow_output:
        raise ValueError(f"{r.name} writes a float32 C only")
    key = (r.name, bool(aligned), arch, bool(narrow_output), bool(split_k))
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = compile(r.source, r.entry,
                                    defines=r.instantiation_defines(aligned, narrow_output,
                                                                    split_k),
                                    arch=arch, options=r.options)
        k.split_k = bool(split_k)   # split_k.split_kernel checks which build it was given
        k.dependent_launch = r.host_side.dependent_launch and dependent_launch_arch(k.arch)
    return k


# split_k.split_kernel compiles the split-K build through the one cache above
split_k._split_build = lambda r, aligned, narrow_output: rung_kernel(
    r, aligned, narrow_output=narrow_output, split_k=True)


# The 16-bit precisions of rung 20 and their WGMMA_ELEM codes: their members
# are declared together, bf16's first.
WGMMA_16_BIT = (("bf16", 1), ("fp16", 2))


def _wgmma_rung(precision, elem, *, tile_m, tile_n, vector, summary, STAGES=4, EPILOGUE=0,
                BALANCE=0, SWAP_AB=None, **extra) -> Rung:
    """One member of rung 20's family (cu/gemm/20_tma_wgmma.cu, WGMMA_ELEM 1/2/3 =
    bf16/fp16/tf32): BM x BN is the block's tile of C, BK the k per stage (one 128-byte
    line: 64 16-bit or 32 fp32 elements). The wgmma tile is BM x BN (BN x BM for tf32,
    which computes C^T), so BM = 128 (or 64: one consumer warpgroup) for 16-bit inputs,
    BN = 128 (or 64) for tf32, and the other side (wgmma's N) is 64, 128, 192 or 256. The flagship 128 x 256 tile (256 x 128 for tf32)
    keeps the plain name ``20_tma_wgmma_<precision>``; the other members append their tile,
    ``20_tma_wgmma_<precision>_<BM>x<BN>``. Shared memory: hopper.wgmma_smem_bytes."""
    flagship = (tile_m, tile_n) == ((256, 128) if elem == 3 else (128, 256))
    name = f"20_tma_wgmma_{precision}" + ("" if flagship else f"_{tile_m}x{tile_n}")
    swap = int(elem == 3) if SWAP_AB is None else SWAP_AB
    geo = hopper.Geometry.of(precision, tile_m, tile_n, {"SWAP_AB": swap})
    return Rung(
        name, "20_tma_wgmma.cu", f"gemm_tma_wgmma_{precision}",
        precision, block=geo.block(), tile_m=tile_m, tile_n=tile_n,
        smem=hopper.wgmma_smem_bytes(STAGES, EPILOGUE, geo.stage_bytes, geo.consumers),
        defines={"WGMMA_ELEM": elem, "BM": tile_m, "BN": tile_n, "BK": geo.k_tile,
                 "WARP_SPECIALIZED": 1, "PERSISTENT": 1, "CLUSTER": 1, "STAGES": STAGES,
                 "GROUP": 16, "EPILOGUE": EPILOGUE, "OUT_16": 0, "BALANCE": BALANCE,
                 "SM_LIMIT": 0, "SPLIT_K": 0, "SWAP_AB": swap},
        vector=vector, arch="sm_90a", host="tma", summary=summary, splits=hopper.SPLITS,
        **extra)


RUNGS: list[Rung] = [
    # ---- fp32 SIMT ladder (cu/gemm/01 .. 08) ----
    # Each entry names its tile constants once, as the defaults of a lambda:
    # block shape, tile and shared-memory size are computed from them, and
    # the same numbers reach the kernel as -D defines.
    (lambda BM=16, BN=16: Rung(
        name="01_naive", auto=False, source="01_naive.cu", entry="gemm_naive", precision="fp32",
        block=(BN, BM, 1), tile_m=BM, tile_n=BN,
        defines=dict(BM=BM, BN=BN),
        summary="one thread per element of C, straight from global memory"))(),
    (lambda TILE=32: Rung(
        name="02_smem_tiled", auto=False, source="02_smem_tiled.cu", entry="gemm_smem_tiled", precision="fp32",
        block=(TILE, TILE, 1), tile_m=TILE, tile_n=TILE,
        smem=2 * TILE * TILE * 4,  # one TILE x TILE tile each of A and B
        defines=dict(TILE=TILE),
        summary="32x32 tiles of A and B in dynamic shared memory, each value reused 32 times"))(),
    (lambda TILE=32, BK=32, COARSEN=2, APAD=4: Rung(
        name="03_coarsened", auto=False, source="03_coarsened.cu", entry="gemm_coarsened", precision="fp32",
        block=(TILE // COARSEN, TILE // COARSEN, 1), tile_m=TILE, tile_n=TILE,
        smem=(TILE * (BK + APAD) + BK * TILE) * 4,  # A [TILE][BK + APAD], B [BK][TILE]
        defines=dict(TILE=TILE, BK=BK, COARSEN=COARSEN, APAD=APAD),
        summary="2x2 outputs per thread: half the shared-memory loads per FMA"))(),
    (lambda BM=128, BN=128, BK=16, TM=8, TN=8: Rung(
        name="04_reg_tiled", auto=False, source="04_reg_tiled.cu", entry="gemm_reg_tiled", precision="fp32",
        block=(BN // TN, BM // TM, 1), tile_m=BM, tile_n=BN,
        smem=(BM * BK + BK * BN) * 4,  # A [BM][BK], B [BK][BN]
        defines=dict(BM=BM, BN=BN, BK=BK, TM=TM, TN=TN),
        summary="8x8 register micro-tile per thread (the seed's MB=8, TS=128)"))(),
    (lambda BM=128, BN=128, BK=16, TM=8, TN=8, MIN_BLOCKS=1: Rung(
        name="05_double_buffered", auto=False, source="05_double_buffered.cu", entry="gemm_double_buffered",
        precision="fp32", block=(BN // TN, BM // TM, 1), tile_m=BM, tile_n=BN,
        smem=2 * (BM * BK + BK * BN) * 4,  # two buffers of rung 4's tiles
        defines=dict(BM=BM, BN=BN, BK=BK, TM=TM, TN=TN, MIN_BLOCKS=MIN_BLOCKS),
        summary="the next tile's global loads overlap this tile's FMAs; one barrier per tile"))(),
    (lambda BM=128, BN=128, BK=8, TM=8, TN=8, APAD=4, MIN_BLOCKS=2: Rung(
        name="06_vectorized", auto=False, source="06_vectorized.cu", entry="gemm_vectorized", precision="fp32",
        block=(BN // TN, BM // TM, 1), tile_m=BM, tile_n=BN,
        smem=2 * BK * ((BM + APAD) + BN) * 4,  # two buffers of A^T [BK][BM + APAD], B [BK][BN]
        defines=dict(BM=BM, BN=BN, BK=BK, TM=TM, TN=TN, APAD=APAD, MIN_BLOCKS=MIN_BLOCKS),
        vector=4,
        summary="float4 global loads, A transposed in shared memory, conflict-free LDS.128"))(),
    (lambda BM=128, BN=128, BK=16, TM=8, TN=8, STAGES=3, APAD=4, MIN_BLOCKS=2: Rung(
        name="07_cp_async", auto=False, source="07_cp_async.cu", entry="gemm_cp_async", precision="fp32",
        block=(BN // TN, BM // TM, 1), tile_m=BM, tile_n=BN,
        smem=STAGES * (BM * (BK + APAD) + BK * BN) * 4,  # STAGES x (A [BM][BK + APAD], B [BK][BN])
        defines=dict(BM=BM, BN=BN, BK=BK, TM=TM, TN=TN, STAGES=STAGES, APAD=APAD,
                     MIN_BLOCKS=MIN_BLOCKS),
        vector=4,
        summary="3-stage cp.async pipeline from global straight into shared memory"))(),
    # Why: the fastest of benchmarks/autotune_warp_tiled.py's variants on the H200.
    (lambda BM=128, BN=128, BK=8, WM=64, WN=64, TM=16, TN=8, APAD=4, MIN_BLOCKS=2, KT_UNROLL=2: Rung(
        name="08_warp_tiled", source="08_warp_tiled.cu", entry="gemm_warp_tiled", precision="fp32",
        block=((BM // WM) * (BN // WN) * 32, 1, 1), tile_m=BM, tile_n=BN,
        smem=2 * BK * ((BM + APAD) + BN) * 4,  # two buffers of A^T [BK][BM + APAD], B [BK][BN]
        defines=dict(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, TM=TM, TN=TN, APAD=APAD,
                     MIN_BLOCKS=MIN_BLOCKS, KT_UNROLL=KT_UNROLL, SPLIT_K=0),
        vector=4, splits=SIMT_SPLITS,
        summary="warp tiles of 4x8 threads, double-buffered fragments, __launch_bounds__"))(),
    # Rung 08 on 64x64 tiles (4 warps of 32x32, 8x4 per thread): four times the
    # blocks of the 128x128 tile for the shapes that leave most SMs idle there
    # (1024^2 is 64 tiles of 128x128 on 132 SMs).
    (lambda BM=64, BN=64, BK=8, WM=32, WN=32, TM=8, TN=4, APAD=4, MIN_BLOCKS=4, KT_UNROLL=2: Rung(
        name="08_warp_tiled_64x64", source="08_warp_tiled.cu", entry="gemm_warp_tiled",
        precision="fp32", block=((BM // WM) * (BN // WN) * 32, 1, 1), tile_m=BM, tile_n=BN,
        smem=2 * BK * ((BM + APAD) + BN) * 4,
        defines=dict(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, TM=TM, TN=TN, APAD=APAD,
                     MIN_BLOCKS=MIN_BLOCKS, KT_UNROLL=KT_UNROLL, SPLIT_K=0),
        vector=4, splits=SIMT_SPLITS,
        summary="rung 08 on 64x64 tiles: more blocks for medium shapes"))(),
    # ---- tensor cores: mma.sync / WMMA ----
    # Shared memory is STAGES x (A tile + B tile). Rungs 12-14 share one block
    # tile (cu/gemm/mma_bf16_block.cuh) so that 12 and 14 differ only in who copies.
    (lambda BM=128, BN=128, WM=64, WN=32, BK=32, STAGES=2, A_LD=32 + 16, B_LD=128 + 16: Rung(
        name="09_wmma_fp16", auto=False, source="09_wmma_fp16.cu", entry="wmma_fp16_gemm", precision="fp16",
        block=((BM // WM) * (BN // WN) * 32, 1, 1), tile_m=BM, tile_n=BN,
        smem=STAGES * (BM * A_LD + BK * B_LD) * 2,  # padded A [BM][BK+16], B [BK][BN+16]
        defines=dict(BM=BM, BN=BN, WM=WM, WN=WN, BK=BK, STAGES=STAGES, GROUP_M=8),
        vector=8,
        summary="tensor cores through WMMA: 16x16x16 fp16 fragments, fp32 accumulators, "
                "opaque layouts (epilogue via shared memory)"))(),
    (lambda BM=128, BN=256, BK=32, STAGES=3: Rung(
        name="10_mma_tf32_ptx", auto=False, source="10_mma_tf32_ptx.ptx", entry="mma_tf32_ptx_gemm",
        precision="tf32", block=(256, 1, 1), tile_m=BM, tile_n=BN,
        smem=STAGES * (BM * BK + BK * BN) * 4,  # 3 x (A [128][32] + B [32][256]) fp32
        vector=4,  # the 16-byte path is chosen at run time: a .ptx takes no -D
        summary="TF32 mma.sync.m16n8k8 in hand-written PTX: the twin of rung 11"))(),
    (lambda BM=128, BN=256, BK=32, WN=64, STAGES=3: Rung(
        name="11_mma_tf32", auto=False, source="11_mma_tf32.cu", entry="mma_tf32_gemm", precision="tf32",
        block=((BM // 64) * (BN // WN) * 32, 1, 1), tile_m=BM, tile_n=BN,
        smem=STAGES * (BM * BK + BK * BN) * 4,  # A [BM][BK], B [BK][BN] fp32, swizzled
        defines=dict(BM=BM, BK=BK, WN=WN, STAGES=STAGES, GROUP_M=8, CVT=1),
        vector=4,
        summary="TF32 mma.sync.m16n8k8 (cvt.rna), 3-stage cp.async commit groups, "
                "XOR-swizzled shared memory, ldmatrix for A"))(),
    (lambda BM=128, BN=256, BK=64, WM=64, WN=64, STAGES=3, FRAG_PIPE=1: Rung(
        name="12_mma_bf16", auto=False, source="12_mma_bf16_fp16.cu", entry="mma_bf16_gemm", precision="bf16",
        block=((BM // WM) * (BN // WN) * 32, 1, 1), tile_m=BM, tile_n=BN,
        smem=STAGES * (BM * BK + BK * BN) * 2,  # A [BM][BK], B [BK][BN] bf16, swizzled
        defines=dict(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, STAGES=STAGES, GROUP_M=8,
                     FRAG_PIPE=FRAG_PIPE, USE_FP16=0),
        vector=8,
        summary="bf16 mma.sync.m16n8k16, ldmatrix.x4 (.trans for B) from swizzled shared "
                "memory, 3-stage cp.async of 64-wide k-tiles, fragments double-buffered "
                "in registers"))(),
    (lambda BM=128, BN=256, BK=64, WM=64, WN=64, STAGES=3, FRAG_PIPE=1: Rung(
        name="13_mma_fp16", auto=False, source="12_mma_bf16_fp16.cu", entry="mma_fp16_gemm", precision="fp16",
        block=((BM // WM) * (BN // WN) * 32, 1, 1), tile_m=BM, tile_n=BN,
        smem=STAGES * (BM * BK + BK * BN) * 2,
        defines=dict(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, STAGES=STAGES, GROUP_M=8,
                     FRAG_PIPE=FRAG_PIPE, USE_FP16=1),
        vector=8,
        summary="rung 12 with fp16 inputs"))(),
    # Why 14's constants: the faster of two measured against 12 (benchmarks/mma_sweep.py);
    # no FRAG_PIPE, as two fragment sets beside 128 accumulators spill at 168 registers.
    (lambda BM=128, BN=256, BK=32, WM=64, WN=64, STAGES=4, PRODUCER_WARPS=4: Rung(
        name="14_warp_specialized_mma_bf16", auto=False, source="14_warp_specialized_mma_bf16.cu",
        entry="ws_mma_bf16_gemm", precision="bf16",
        block=((BM // WM) * (BN // WN) * 32 + PRODUCER_WARPS * 32, 1, 1), tile_m=BM, tile_n=BN,
        smem=STAGES * (BM * BK + BK * BN) * 2,
        defines=dict(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, STAGES=STAGES, GROUP_M=8,
                     PRODUCER_WARPS=PRODUCER_WARPS),
        vector=8,
        summary="rung 12 warp-specialised: 4 producer warps copy, 8 consumer warps compute, "
                "stages handed over with named barriers"))(),
    # 15: rung 11's tile rebuilt around the tensor pipe; 1.30x rung 11 at 4096 and
    # 8192 (0.65-0.66 of the mma.sync TF32 ceiling, benchmarks/notes/tf32-mma.md).
    (lambda BM=128, BN=256, BK=32, WM=64, WN=64, STAGES=3, GROUP_M=8, BVEC=2, MINB=1: Rung(
        name="15_mma_tf32_rotating", source="15_mma_tf32_rotating.cu",
        entry="mma_tf32_rotating_gemm", precision="tf32",
        block=((BM // WM) * (BN // WN) * 32, 1, 1), tile_m=BM, tile_n=BN,
        smem=STAGES * (BM * BK + BK * BN) * 4,  # STAGES x (A [BM][BK] + B [BK][BN]) fp32
        defines=dict(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, STAGES=STAGES, GROUP_M=GROUP_M,
                     BVEC=BVEC, MINB=MINB),
        vector=4,
        input_roundoff=2.0 ** -11,   # half-ulp add then the unit's truncation: rna
        summary="TF32 mma.sync.m16n8k8 with one fragment set reloaded right after each "
                "register's last MMA, rounding in one VIADDMNMX, B fragments of two n-tiles "
                "per LDS.64"))(),
    (lambda BM=128, BN=256, BK=32, STAGES=3: Rung(
        name="16_mma_tf32_rotating_ptx", auto=False, source="16_mma_tf32_rotating_ptx.ptx",
        entry="mma_tf32_rotating_ptx_gemm", precision="tf32", block=(256, 1, 1),
        tile_m=BM, tile_n=BN,
        smem=STAGES * (BM * BK + BK * BN) * 4,  # 3 x (A [128][32] + B [32][256]) fp32
        vector=4,  # the 16-byte loop is chosen at run time: a .ptx takes no -D
        input_roundoff=2.0 ** -11,   # half-ulp add then the unit's truncation: rna
        summary="TF32 mma.sync.m16n8k8 in hand-written PTX: the twin of rung 15"))(),
    # ---- Hopper: TMA + wgmma ----
    # One source, three entries (one per precision), each built for several tiles;
    # the launch comes from ladders/gemm/hopper.py (host="tma").
    # Why these knobs: the best of benchmarks/wgmma_sweep.py on the H200 (TMA-store
    # epilogue, grouped static order, no clusters; BALANCE=1 for the 16-bit rungs).
    # The knobs that lost: benchmarks/notes/removed-knobs.md.
    # The family: smaller wgmma N for shapes the 128 x 256 tile covers in too few or
    # too unevenly filled waves (1024^2 .. 2048^2: 128 x 128 gives twice the tiles;
    # 3072^2: 288 tiles of 128 x 256 are 2.2 waves on 132 SMs, 384 of 128 x 192 are
    # 2.9). Listed before the flagship, which stays the last (auto's pick until the
    # dispatcher chooses by shape). STAGES: as many as fit 227 KB (unmeasured).
    *(_wgmma_rung(prec, elem, tile_m=128, tile_n=bn, vector=8, narrow_output=True,
                  EPILOGUE=2, BALANCE=1, STAGES=stages,
                  summary=f"the {prec} rung with a 128 x {bn} tile (wgmma m64n{bn}k16)" + note)
      for prec, elem in WGMMA_16_BIT
      for bn, stages, note in ((128, 6, ", 6 stages"), (192, 4, ""))),
    # 64-row members for M of at most 64 (or a few blocks more of 64 rows): the
    # 128-row tile computes twice the rows such a product has, and at M = 64 its
    # wgmma time per k-tile matches the time to stream the k-tile of B, so
    # neither hides the other (benchmarks/notes/dispatch.md). 8 stages of 24 KB.
    *(_wgmma_rung(prec, elem, tile_m=64, tile_n=128, vector=8, narrow_output=True,
                  EPILOGUE=2, BALANCE=1, STAGES=8,
                  summary=f"the {prec} rung with a 64 x 128 tile: one consumer warpgroup, "
                          "8 stages")
      for prec, elem in WGMMA_16_BIT),
    # Swapped members for a few rows of A (C^T = B^T A^T, wgmma m64nBMk16 with BM = 16
    # or 32 rows of A as wgmma's N): each block streams a 64-column strip of B, so a
    # decode-sized product has N / 64 strips to spread over the SMs (the 64 x 128
    # member has half as many and computes 64 rows a tile). 8 stages of 10 / 12 KB.
    # auto offers each the products whose rows it holds and the smaller one does
    # not (plan.swapped_domain); the 32-row tile streamed M <= 4 products 5-28%
    # slower than the 16-row one (results/h200-wgmma-swapped.json).
    *(_wgmma_rung(prec, elem, tile_m=rows, tile_n=64, vector=8, narrow_output=True,
                  SWAP_AB=1, BALANCE=1, STAGES=8,
                  summary=f"the {prec} rung on C^T for {rows} rows of A: 64-column strips of "
                          f"B as wgmma's MN-major A (m64n{rows}k16), 8 stages")
      for prec, elem in WGMMA_16_BIT for rows in (16, 32)),
    _wgmma_rung("tf32", 3, tile_m=128, tile_n=128, vector=4, input_roundoff=2.0 ** -10,
                STAGES=6,
                summary="the tf32 rung with a 128 x 128 tile (wgmma m64n128k8 on C^T), 6 stages"),
    _wgmma_rung("tf32", 3, tile_m=192, tile_n=128, vector=4, input_roundoff=2.0 ** -10,
                STAGES=5,
                summary="the tf32 rung with a 192 x 128 tile (wgmma m64n192k8 on C^T), 5 stages"),
    # 64-column tf32 members (C^T's wgmma M = 64: one consumer warpgroup), for
    # the products whose 128-column tiles leave most SMs idle or need a split
    # of K and its reduction to fill them (tf32 512^3: 16 tiles of 128 x 128,
    # split 4, 14.1 us against cuBLAS's 8.4, h200-shapes.json). 8 stages of
    # 24 / 16 KB.
    *(_wgmma_rung("tf32", 3, tile_m=bm, tile_n=64, vector=4, input_roundoff=2.0 ** -10,
                  STAGES=8,
                  summary=f"the tf32 rung with a {bm} x 64 tile (wgmma m64n{bm}k8 on C^T): one "
                          "consumer warpgroup, 8 stages")
      for bm in (128, 64)),
    _wgmma_rung("bf16", 1, tile_m=128, tile_n=256, vector=8, narrow_output=True, EPILOGUE=2,
                BALANCE=1,
                summary="TMA loads into a 4-stage mbarrier ring, wgmma m64n256k16 from shared "
                        "memory, producer/consumer warpgroups, balanced persistent grid in "
                        "grouped tile order, C through TMA stores"),
    _wgmma_rung("fp16", 2, tile_m=128, tile_n=256, vector=8, narrow_output=True, EPILOGUE=2,
                BALANCE=1, summary="the bf16 rung with f16 inputs"),
    _wgmma_rung("tf32", 3, tile_m=256, tile_n=128, vector=4, input_roundoff=2.0 ** -10,
                summary="TF32 wgmma m64n256k8 on C^T = B^T A^T: A through TMA as wgmma's "
                        "K-major B, B from shared memory into register fragments (32-bit "
                        "wgmma operands cannot be transposed)"),
]


def _small_m_rung(precision, ROWS, *, STAGES=6, MIN_BLOCKS=4, WARPS=4, summary) -> Rung:
    """One entry of cu/gemm/30_small_m.cu (PREC 0/1/2 = fp32/bf16/fp16): ROWS rows of M
    and one strip of columns (128 fp32, 64 16-bit) per block of WARPS warps, each warp
    streaming B through a STAGES-deep cp.async ring; more rows of M are more blocks
    along z. Shared memory and the defines: ladders/gemm/small_m.py, from the same
    constants (the kernel checks the figure through SMEM_BYTES_HOST)."""
    g = small_m.Geometry(precision, ROWS, WARPS, STAGES, MIN_BLOCKS)
    return Rung(
        f"30_small_m_{precision}" + ("" if ROWS == 16 else f"_r{ROWS}"), "30_small_m.cu",
        "small_m_gemm", precision, block=(g.threads, 1, 1), tile_m=ROWS, tile_n=g.strip,
        smem=g.smem, defines=small_m.defines(precision, ROWS, WARPS, STAGES, MIN_BLOCKS),
        vector=16 // small_m.ELEM_BYTES[precision], host="small_m",
        narrow_output=precision != "fp32", splits=small_m.SPLITS,
        summary=summary)


# ---- Rung 30: small M ----
# Why these constants (benchmarks/notes/small-m.md, three H200 runs): COALESCED copies
# (each quarter-warp one 128-byte line) took bf16 M <= 8 from 0.35-0.50 to 0.94-0.98 of
# copy bandwidth; STAGES 6 was better or equal on every measured shape for ROWS 16/32
# (ROWS 64: 194 registers, 2 blocks/SM, so MIN_BLOCKS 2). fp32: 16 rows per block
# (64 accumulators per lane).
RUNGS += [
    _small_m_rung("fp32", 16, summary="small M: B streamed once through per-lane cp.async "
                                      "rings, FFMA, deterministic split-K (last block sums)"),
    _small_m_rung("bf16", 16, summary="small M, bf16: mma.sync m16n8k16 on rows padded to 16, "
                                      "B fragments paired from row-major rows by PRMT"),
    _small_m_rung("bf16", 32, summary="the bf16 small-M rung with 32 rows per block"),
    _small_m_rung("bf16", 64, MIN_BLOCKS=2, summary="the bf16 small-M rung with 64 rows per block"),
    _small_m_rung("fp16", 16, summary="the bf16 small-M rung with fp16 inputs"),
    _small_m_rung("fp16", 32, summary="the fp16 small-M rung with 32 rows per block"),
    _small_m_rung("fp16", 64, MIN_BLOCKS=2, summary="the fp16 small-M rung with 64 rows per block"),
]


def by_name() -> dict[str, Rung]:
    return {r.name: r for r in RUNGS}
