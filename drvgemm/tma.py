"""Tensor maps for the copy engine (TMA) and the host side of the TMA + wgmma
rung (cu/gemm/20_tma_wgmma.cu).

Part of the driver layer: with driver.py, the only module that calls
``cuda.bindings.driver``.

A ``TensorMap`` describes a tiled view of a global tensor, which the kernel
receives by value as a ``const __grid_constant__`` 128-byte parameter
(``.param .align 64 .b8 name[128]`` in PTX); ``drvgemm.launch`` packs any
object with a ``param_bytes`` attribute into such a slot. Every requirement
of ``cuTensorMapEncodeTiled`` is checked here first, so a bad map is a
``ValueError`` naming the field, raised before (and without) any GPU; the
driver encodes the map on first use of ``param_bytes``.

The rung's kernels take (mapA, mapB, mapC, C, M, N, K, alpha, beta, sched):
  bf16 / fp16: mapA over A (M x K): box 64 (k) x 128 (rows); mapB over B
               (K x N): box 64 (columns) x 64 (k); both 128-byte swizzled.
  tf32:        mapA: box 32 (k) x 64 (rows); mapB: box 32 (columns) x 32 (k)
               (the kernel computes C^T = B^T A^T: see the .cu file).
  mapC:        only for EPILOGUE=2 (16-bit inputs): C (M x N fp32), box 32
               (columns) x 64 (rows), 128-byte swizzled; encoded when N % 4 == 0
               and C is 16-byte aligned (the kernel tests the same condition
               and otherwise stores directly), else 128 zero bytes, never read.
  sched:       only for SCHED=1: two ints that are zero between launches (the
               kernel's last block zeroes them again). One buffer per stream,
               allocated on first use and kept: launches on one stream run one
               after another, so they can share it; launches on different
               streams, which may overlap, never do.
``wgmma_gemm_launch_config`` builds the maps and returns the launch: grid,
block, shared memory, arguments and the cluster shape.

The copy engine needs 16-byte aligned base addresses and row pitches that are
multiples of 16 bytes. When A or B has neither (K or N not a multiple of 8
for 16-bit types, of 4 for fp32, or a misaligned base), the operand is first
copied (cuMemcpy2DAsync, on the launch's stream) into a scratch buffer whose
rows are padded to 16 bytes; the padding is never read, as the map's extent
stays K or N. The scratch buffer is freed stream-ordered (cuMemFreeAsync) when
the returned configuration is dropped, i.e. after the launch was enqueued.
"""
from __future__ import annotations

import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass

from . import driver

__all__ = ["TensorMap", "matrix_map", "ELEMENT_TYPES", "SWIZZLE_BYTES",
           "wgmma_gemm_launch_config", "wgmma_smem_bytes", "wgmma_geometry",
           "wgmma_work_units", "wgmma_grid_blocks", "needs_staging", "c_map_usable",
           "check_register_budget", "UNUSED_MAP"]

# element type name -> (CUtensorMapDataType member suffix, bytes)
ELEMENT_TYPES = {
    "uint8": ("UINT8", 1),
    "uint16": ("UINT16", 2),
    "uint32": ("UINT32", 4),
    "int32": ("INT32", 4),
    "uint64": ("UINT64", 8),
    "int64": ("INT64", 8),
    "fp16": ("FLOAT16", 2),
    "bf16": ("BFLOAT16", 2),
    "fp32": ("FLOAT32", 4),
    "fp64": ("FLOAT64", 8),
}
_ALIASES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32",
            "float": "fp32", "tf32": "fp32", "float64": "fp64", "double": "fp64"}

SWIZZLE_BYTES = (0, 32, 64, 128)   # 0: no swizzle
_L2_PROMOTION = (0, 64, 128, 256)
_MAX_RANK = 5


def _element(dtype) -> tuple[str, str, int]:
    """(canonical name, driver enum suffix, size) for a name or numpy dtype."""
    name = dtype if isinstance(dtype, str) else str(getattr(dtype, "name", dtype))
    name = _ALIASES.get(name.lower(), name.lower())
    if name not in ELEMENT_TYPES:
        raise ValueError(f"TensorMap element type {dtype!r} is not supported; use one of "
                         f"{', '.join(ELEMENT_TYPES)}")
    enum, size = ELEMENT_TYPES[name]
    return name, enum, size


class TensorMap:
    """A tiled tensor map (``cuTensorMapEncodeTiled``), dimensions listed
    innermost first as the driver takes them.

    address          device address of element (0, 0, ...): 16-byte aligned
    dtype            element type ("bf16", "fp16", "fp32", ... or a numpy dtype)
    dims             elements along each dimension, innermost (contiguous) first
    strides          bytes between consecutive indices of dims[1:], each a multiple
                     of 16 (len(dims) - 1 values)
    box              elements per copy along each dimension (1..256 each); the
                     innermost box row must be a multiple of 16 bytes and, when
                     swizzled, at most the swizzle span
    element_strides  traversal step per dimension (1..8; default all 1)
    swizzle          0, 32, 64 or 128: the shared-memory swizzle span in bytes
    l2_promotion     0, 64, 128 or 256 bytes
    oob_fill         "zero" (out-of-bounds elements read as 0) or "nan"
    """

    __slots__ = ("address", "dtype", "elem_size", "dims", "strides", "box", "element_strides",
                 "swizzle", "l2_promotion", "oob_fill", "_enum", "_bytes", "_lock")

    def __init__(self, address, dtype, dims, strides, box, *, element_strides=None,
                 swizzle=128, l2_promotion=256, oob_fill="zero"):
        name, enum, size = _element(dtype)
        self.dtype = name
        self._enum = enum
        self.elem_size = size
        self.address = _as_int(address, "address")
        self.dims = tuple(_as_int(d, f"dims[{i}]") for i, d in enumerate(_seq(dims, "dims")))
        self.strides = tuple(_as_int(s, f"strides[{i}]")
                             for i, s in enumerate(_seq(strides, "strides")))
        self.box = tuple(_as_int(b, f"box[{i}]") for i, b in enumerate(_seq(box, "box")))
        if element_strides is None:
            element_strides = (1,) * len(self.dims)
        self.element_strides = tuple(_as_int(e, f"element_strides[{i}]")
                                     for i, e in enumerate(_seq(element_strides,
                                                                "element_strides")))
        self.swizzle = _as_int(swizzle, "swizzle")
        self.l2_promotion = _as_int(l2_promotion, "l2_promotion")
        self.oob_fill = oob_fill
        self._bytes = None
        self._lock = threading.Lock()
        self._validate()

    # -- checks (no GPU needed) -------------------------------------------------
    def _validate(self):
        rank = len(self.dims)
        if not 1 <= rank <= _MAX_RANK:
            raise ValueError(f"TensorMap rank must be 1..{_MAX_RANK}, got {rank} dimensions")
        if self.address % 16:
            raise ValueError(f"TensorMap global address 0x{self.address:x} is not 16-byte "
                             f"aligned (it is {self.address % 16} bytes past a 16-byte "
                             "boundary); the copy engine needs 16-byte aligned tensors")
        for i, d in enumerate(self.dims):
            if not 1 <= d <= 2**32:
                raise ValueError(f"TensorMap dims[{i}] = {d}: each dimension must be in "
                                 "1..2^32 elements")
        if len(self.strides) != rank - 1:
            raise ValueError(f"TensorMap needs {rank - 1} strides (bytes between indices of "
                             f"dims[1:]) for {rank} dimensions, got {len(self.strides)}")
        extent = self.dims[0] * self.elem_size
        for i, s in enumerate(self.strides):
            if s % 16 or not 0 < s < 2**40:
                raise ValueError(
                    f"TensorMap strides[{i}] = {s} bytes: strides must be positive multiples "
                    f"of 16 bytes below 2^40 (a row of {self.dims[i]} {self.dtype} elements "
                    f"is {self.dims[i] * self.elem_size} bytes; pad rows to a multiple of 16 "
                    "bytes)")
            if s < extent:
                raise ValueError(f"TensorMap strides[{i}] = {s} bytes is smaller than the "
                                 f"{extent} bytes of dimension {i}: consecutive indices of "
                                 f"dims[{i + 1}] would overlap")
            extent = s * self.dims[i + 1]
        if len(self.box) != rank:
            raise ValueError(f"TensorMap box must have {rank} entries, got {len(self.box)}")
        for i, b in enumerate(self.box):
            if not 1 <= b <= 256:
                raise ValueError(f"TensorMap box[{i}] = {b}: box dimensions must be in 1..256")
        row = self.box[0] * self.elem_size
        if row % 16:
            raise ValueError(f"TensorMap box[0] = {self.box[0]} {self.dtype} elements = {row} "
                             "bytes: the innermost box dimension must be a multiple of 16 "
                             "bytes")
        if len(self.element_strides) != rank:
            raise ValueError(f"TensorMap element_strides must have {rank} entries")
        for i, e in enumerate(self.element_strides):
            if not 1 <= e <= 8:
                raise ValueError(f"TensorMap element_strides[{i}] = {e}: must be in 1..8")
        if self.swizzle not in SWIZZLE_BYTES:
            raise ValueError(f"TensorMap swizzle = {self.swizzle}: use one of "
                             f"{SWIZZLE_BYTES} (bytes; 0 = none)")
        if self.swizzle and row > self.swizzle:
            raise ValueError(f"TensorMap box[0] = {self.box[0]} {self.dtype} elements = {row} "
                             f"bytes exceeds the {self.swizzle}-byte swizzle span: the "
                             f"innermost box row must fit in one swizzle line (at most "
                             f"{self.swizzle // self.elem_size} elements)")
        if self.l2_promotion not in _L2_PROMOTION:
            raise ValueError(f"TensorMap l2_promotion = {self.l2_promotion}: use one of "
                             f"{_L2_PROMOTION}")
        if self.oob_fill not in ("zero", "nan"):
            raise ValueError(f"TensorMap oob_fill = {self.oob_fill!r}: use 'zero' or 'nan'")
        if self.oob_fill == "nan" and self.dtype not in ("fp16", "bf16", "fp32", "fp64"):
            raise ValueError("TensorMap oob_fill='nan' needs a floating-point element type")

    # -- derived ----------------------------------------------------------------
    @property
    def box_bytes(self) -> int:
        """Bytes one copy delivers to shared memory (and to the mbarrier's
        transaction count), whether or not the box lies inside the tensor."""
        n = self.elem_size
        for b, e in zip(self.box, self.element_strides):
            n *= -(-b // e)
        return n

    @property
    def param_bytes(self) -> bytes:
        """The 128 raw bytes of the encoded CUtensorMap, for a
        ``.param .align 64 .b8 [128]`` kernel parameter."""
        if self._bytes is None:
            with self._lock:
                if self._bytes is None:
                    self._bytes = self._encode()
        return self._bytes

    def encode(self) -> "TensorMap":
        """Encode now (needs the CUDA driver); returns self."""
        self.param_bytes
        return self

    def _encode(self) -> bytes:
        d = driver.bindings()
        rank = len(self.dims)
        swz = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}[self.swizzle]
        l2 = {0: "NONE", 64: "L2_64B", 128: "L2_128B", 256: "L2_256B"}[self.l2_promotion]
        fill = "NONE" if self.oob_fill == "zero" else "NAN_REQUEST_ZERO_FMA"
        T = d.CUtensorMapDataType
        res = d.cuTensorMapEncodeTiled(
            getattr(T, "CU_TENSOR_MAP_DATA_TYPE_" + self._enum),
            rank, self.address,
            [d.cuuint64_t(x) for x in self.dims],
            [d.cuuint64_t(x) for x in self.strides],
            [d.cuuint32_t(x) for x in self.box],
            [d.cuuint32_t(x) for x in self.element_strides],
            d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            getattr(d.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_" + swz),
            getattr(d.CUtensorMapL2promotion, "CU_TENSOR_MAP_L2_PROMOTION_" + l2),
            getattr(d.CUtensorMapFloatOOBfill, "CU_TENSOR_MAP_FLOAT_OOB_FILL_" + fill))
        tmap = driver.check(res, f"cuTensorMapEncodeTiled({self})")
        raw = struct.pack("<16Q", *(int(x) for x in tmap.opaque))
        assert len(raw) == 128
        return raw

    def __repr__(self):
        return (f"TensorMap({self.dtype}, address=0x{self.address:x}, dims={self.dims}, "
                f"strides={self.strides}, box={self.box}, swizzle={self.swizzle})")

    __str__ = __repr__


def matrix_map(address, dtype, rows, cols, row_pitch, box_rows, box_cols, *, swizzle=128,
               l2_promotion=256) -> TensorMap:
    """A map over a row-major rows x cols matrix whose rows are ``row_pitch``
    bytes apart; each copy moves box_rows x box_cols elements."""
    return TensorMap(address, dtype, (cols, rows), (row_pitch,), (box_cols, box_rows),
                     swizzle=swizzle, l2_promotion=l2_promotion)


def _seq(v, what):
    try:
        return list(v)
    except TypeError:
        raise TypeError(f"TensorMap {what} must be a sequence of integers, got "
                        f"{type(v).__name__}") from None


def _as_int(v, what) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"TensorMap {what} must be an integer, got {type(v).__name__} {v!r}")
    return int(v.__index__())


# ---------------------------------------------------------------------------
# The rung's geometry: mirrors the constants of cu/gemm/20_tma_wgmma.cu
# ---------------------------------------------------------------------------
TILE_Y = 128          # wgmma M per block: 2 consumer warpgroups x 64
TILE_X = 256          # wgmma N per block
STAGE_BYTES = 16384 + 4 * 8192
C_BOX = (64, 32)      # EPILOGUE=2: (rows, fp32 columns) per TMA store = one 8 KB staging buffer
                      # (64 columns for a 16-bit C: the same 128-byte lines)
STAGING_BYTES = 2 * 2 * 64 * 32 * 4   # two buffers per consumer warpgroup
QUEUE_BYTES = 64      # the unit queue: 2 full + 2 empty mbarriers and 2 unit slots, padded


def wgmma_smem_bytes(stages: int, epilogue: int = 0) -> int:
    """Dynamic shared memory of the rung: the ring, the EPILOGUE=2 staging
    buffers, 2 mbarriers per stage, the unit queue and 1024 bytes of slack to
    align the ring for the 128-byte swizzle."""
    staging = STAGING_BYTES if int(epilogue) == 2 else 0
    return stages * STAGE_BYTES + staging + 16 * stages + QUEUE_BYTES + 1024


@dataclass(frozen=True)
class Geometry:
    elem: str          # "bf16" | "fp16" | "tf32"
    elem_size: int
    k_tile: int        # k per stage (one 128-byte line)
    swapped: bool      # tf32: the block computes C^T (wgmma M runs along N)
    a_box: tuple       # (box_rows, box_cols) of A's map
    b_box: tuple       # (box_rows, box_cols) of B's map


def wgmma_geometry(precision: str) -> Geometry:
    if precision in ("bf16", "fp16"):
        return Geometry(precision, 2, 64, False, a_box=(128, 64), b_box=(64, 64))
    if precision == "tf32":
        return Geometry("tf32", 4, 32, True, a_box=(64, 32), b_box=(32, 32))
    raise ValueError(f"the TMA + wgmma rung takes bf16, fp16 or tf32, not {precision!r}")


def c_map_usable(address: int, n: int, elem_bytes: int = 4) -> bool:
    """EPILOGUE=2 stores C through a tensor map: rows must be a multiple of 16
    bytes and C 16-byte aligned (the kernel checks the same)."""
    return address % 16 == 0 and (n * elem_bytes) % 16 == 0


def wgmma_work_units(geo: Geometry, m: int, n: int, cluster: int) -> int:
    """Work units of the kernel's scheduler: clusters' worth of tiles (the
    wgmma tile is TILE_Y x TILE_X along (M, N), or (N, M) when swapped)."""
    y_ext, x_ext = (n, m) if geo.swapped else (m, n)
    tiles_y = -(-y_ext // TILE_Y)
    tiles_x = -(-x_ext // TILE_X)
    return -(-tiles_y // cluster) * tiles_x


def wgmma_grid_blocks(geo: Geometry, m: int, n: int, cluster: int, resident=None,
                      balanced: bool = False) -> int:
    """Blocks to launch: one per tile, or with ``resident`` (blocks that fit
    on the device at once: a persistent grid) no more than that, rounded down
    to whole clusters; every block then walks tiles blockIdx.x/cluster,
    += gridDim.x/cluster.

    ``balanced``: the fewest blocks that still finish in the same number of
    rounds, so that every block walks the same number of tiles (or one
    fewer): 512 tiles on 132 SMs take 4 rounds either way, on 128 blocks
    with none idle in the last. The SMs left out draw no power, which the
    others' clocks can use."""
    units = wgmma_work_units(geo, m, n, cluster)
    if resident is None:
        return units * cluster
    blocks = max(1, min(units, resident // cluster))
    if balanced:
        rounds = -(-units // blocks)
        blocks = -(-units // rounds)
    return blocks * cluster


def needs_staging(address: int, cols: int, elem_size: int) -> bool:
    """True when a row-major operand cannot be described to the copy engine
    as it is: base not 16-byte aligned, or rows not a multiple of 16 bytes."""
    return address % 16 != 0 or (cols * elem_size) % 16 != 0


class _Scratch:
    """A stream-ordered device buffer holding a copy of an operand with rows
    padded to 16 bytes; freed (cuMemFreeAsync on the same stream) when this
    object goes away, which the caller arranges to be after the launch."""

    def __init__(self, src: int, rows: int, cols: int, elem_size: int, stream: int,
                 stream_owner=None):
        d = driver.bindings()
        # The stream object (when there is one) stays alive as long as this
        # buffer: freeing on a stream that was already destroyed crashes the
        # driver, and a caller's locals may well go in that order.
        self._stream_owner = stream_owner
        self.width = cols * elem_size
        self.pitch = -(-self.width // 16) * 16
        self.stream = stream
        self.ptr = 0
        nbytes = max(self.pitch * rows, 16)
        ptr = driver.check(d.cuMemAllocAsync(nbytes, d.CUstream(stream)),
                           f"cuMemAllocAsync({nbytes})")
        self.ptr = int(ptr)
        cp = d.CUDA_MEMCPY2D()
        cp.srcMemoryType = d.CUmemorytype.CU_MEMORYTYPE_DEVICE
        cp.srcDevice = src
        cp.srcPitch = self.width
        cp.dstMemoryType = d.CUmemorytype.CU_MEMORYTYPE_DEVICE
        cp.dstDevice = self.ptr
        cp.dstPitch = self.pitch
        cp.WidthInBytes = self.width
        cp.Height = rows
        driver.check(d.cuMemcpy2DAsync(cp, d.CUstream(stream)), "cuMemcpy2DAsync")

    def free(self):
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            d = driver.bindings()
            stream = self.stream
            if isinstance(self._stream_owner, driver.Stream) and not self._stream_owner.ptr:
                # Closed by its owner: wait for all work, free on the legacy stream.
                driver.synchronize()
                stream = 0
            d.cuMemFreeAsync(ptr, d.CUstream(stream))

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


_MAP_CACHE: "OrderedDict[tuple, TensorMap]" = OrderedDict()
_MAP_CACHE_SIZE = 64
_cache_lock = threading.Lock()


def _cached_map(address, dtype, rows, cols, pitch, box_rows, box_cols) -> TensorMap:
    """Encoding a map is a driver call; a GEMM called again on the same
    buffers reuses the maps (they only describe addresses and shapes)."""
    key = (address, dtype, rows, cols, pitch, box_rows, box_cols)
    with _cache_lock:
        m = _MAP_CACHE.get(key)
        if m is not None:
            _MAP_CACHE.move_to_end(key)
            return m
    m = matrix_map(address, dtype, rows, cols, pitch, box_rows, box_cols).encode()
    with _cache_lock:
        _MAP_CACHE[key] = m
        while len(_MAP_CACHE) > _MAP_CACHE_SIZE:
            _MAP_CACHE.popitem(last=False)
    return m


class _UnusedMap:
    """128 zero bytes in a tensor-map parameter the kernel never reads."""
    param_bytes = bytes(128)

    def __repr__(self):
        return "TensorMap(unused)"


UNUSED_MAP = _UnusedMap()

_sched_buffers: dict = {}
_sched_lock = threading.Lock()


def _sched_workspace(stream: int) -> int:
    """The SCHED=1 counters for launches on ``stream``: 2 ints, zeroed once
    (stream-ordered) when first handed out, zero again after every launch."""
    with _sched_lock:
        ptr = _sched_buffers.get(stream)
        if ptr is None:
            d = driver.bindings()
            ptr = int(driver.check(d.cuMemAlloc(256), "cuMemAlloc(256)"))
            driver.check(d.cuMemsetD8Async(ptr, 0, 256, d.CUstream(stream)), "cuMemsetD8Async")
            _sched_buffers[stream] = ptr
        return ptr


_max_clusters: dict = {}


def _persistent_blocks(rung, cluster: int, block: tuple, smem: int, sm_limit: int = 0) -> int:
    """How many blocks can be resident at once, one per SM: the SM count (or
    ``sm_limit`` if smaller), or for clusters what cuOccupancyMaxActiveClusters
    says (a GPC whose free SMs are odd leaves one idle)."""
    sms = driver.device().sm_count
    if sm_limit:
        sms = min(sms, sm_limit)
    if cluster == 1:
        return sms
    key = (rung.name, tuple(sorted(rung.defines.items())), smem)
    n = _max_clusters.get(key)
    if n is None:
        n = sms // cluster
        try:
            from .ladder import rung_kernel
            fn = rung_kernel(rung, True).function
            # The query counts a block's shared memory only up to the
            # function's opt-in limit, which the first launch would raise.
            driver.set_function_attribute(fn, "MAX_DYNAMIC_SHARED_SIZE_BYTES", smem)
            q = driver.occupancy_max_active_clusters(fn, (n * cluster, 1, 1), block, smem,
                                                    (cluster, 1, 1))
            if q:
                n = min(n, int(q), sms // cluster)
        except Exception:
            pass  # keep sms // cluster: a wrong guess costs speed, never correctness
        _max_clusters[key] = n
    return n * cluster


PRODUCER_REGS, CONSUMER_REGS = 40, 232   # the kernel's setmaxnreg targets


def check_register_budget(registers: int, warp_specialized: bool, name: str = "kernel"):
    """The consumers' setmaxnreg.inc takes registers from what the producer's
    .dec gave back to the block's pool, so with R registers per thread at
    entry, (R - 40) * 128 must cover (232 - R) * 256: R >= 168, and the
    launch bound (384 threads, 1 block) caps R at 168. Any other R would
    leave the consumers waiting for registers forever: refuse it up front."""
    if not warp_specialized:
        return
    freed = (registers - PRODUCER_REGS) * 128
    needed = (CONSUMER_REGS - registers) * 256
    if freed < needed:
        raise RuntimeError(
            f"{name}: ptxas gave {registers} registers per thread at entry; the producer "
            f"warpgroup's setmaxnreg.dec {PRODUCER_REGS} frees {freed} and the consumers' "
            f"setmaxnreg.inc {CONSUMER_REGS} need {needed}: the launch would hang. Expected "
            "168 (65536 / 384, rounded down to 8).")


def wgmma_gemm_launch_config(rung, a, b, c, m, n, k, alpha, beta, *, stream=None,
                             narrow_output=False) -> dict:
    """Launch of a ``host="tma"`` rung for C = alpha * A @ B + beta * C.

    a, b, c: device arrays (anything ``driver.device_pointer`` accepts) of the
    rung's input type, row-major and contiguous; m, n, k >= 1. ``stream``
    must be the stream of the launch (staging copies are enqueued on it).
    Returns {grid, block, smem, args, cluster, keepalive}: ``keepalive`` holds
    scratch copies of misaligned operands, which must outlive the enqueueing
    of the launch (dropping the dict afterwards frees them stream-ordered).

    Host-side defines of the rung: PERSISTENT (grid = resident blocks),
    SM_LIMIT (at most that many blocks in a persistent grid; 0 = all SMs) and
    BALANCE (1: as few of those as finish in the same number of rounds).
    ``narrow_output``: C has the inputs' 16-bit type (the OUT_16 build).
    """
    m, n, k = int(m), int(n), int(k)
    if m < 1 or n < 1 or k < 1:
        raise ValueError(f"the TMA rung needs M, N, K >= 1 (got {m}, {n}, {k}); the caller "
                         "handles empty products")
    geo = wgmma_geometry(rung.precision)
    defines = dict(rung.defines)
    ws = int(defines["WARP_SPECIALIZED"])
    cluster = int(defines["CLUSTER"])
    stages = int(defines["STAGES"])
    persistent = int(defines["PERSISTENT"])
    epilogue = int(defines["EPILOGUE"])
    sm_limit = int(defines["SM_LIMIT"])
    balance = bool(int(defines["BALANCE"]))
    block = (384 if ws else 256, 1, 1)
    if tuple(rung.block) + (1,) * (3 - len(rung.block)) != block:
        raise ValueError(f"{rung.name}: block {rung.block} does not match "
                         f"WARP_SPECIALIZED={ws} (needs {block})")
    smem = wgmma_smem_bytes(stages, epilogue)
    if rung.smem and rung.smem != smem:
        raise ValueError(f"{rung.name}: smem {rung.smem} does not match STAGES={stages}, "
                         f"EPILOGUE={epilogue} (needs {smem})")

    try:
        from .ladder import rung_kernel
        res = rung_kernel(rung, True, narrow_output=narrow_output).resources
    except Exception:   # compiling failed: the launch will say why
        res = None
    if res is not None:
        check_register_budget(res.registers, bool(ws), rung.name)

    s = driver.stream_handle(stream)
    pa = driver.device_pointer(a, "A")
    pb = driver.device_pointer(b, "B")
    es = geo.elem_size
    keep = []
    dtype = "fp32" if geo.elem == "tf32" else geo.elem

    def operand(ptr, rows, cols):
        if needs_staging(ptr, cols, es):
            scratch = _Scratch(ptr, rows, cols, es, s, stream)
            keep.append(scratch)
            return scratch.ptr, scratch.pitch
        return ptr, cols * es

    a_ptr, a_pitch = operand(pa, m, k)
    b_ptr, b_pitch = operand(pb, k, n)
    if keep:
        # Scratch maps are one-off: don't let the cache keep their addresses.
        map_a = matrix_map(a_ptr, dtype, m, k, a_pitch, *geo.a_box).encode()
        map_b = matrix_map(b_ptr, dtype, k, n, b_pitch, *geo.b_box).encode()
    else:
        map_a = _cached_map(a_ptr, dtype, m, k, a_pitch, *geo.a_box)
        map_b = _cached_map(b_ptr, dtype, k, n, b_pitch, *geo.b_box)

    map_c = UNUSED_MAP
    if epilogue == 2 and not geo.swapped:
        pc = driver.device_pointer(c, "C")
        c_elem = es if narrow_output else 4
        if c_map_usable(pc, n, c_elem):
            # one 128-byte line per row: 32 fp32 or 64 16-bit columns
            map_c = _cached_map(pc, dtype if narrow_output else "fp32", m, n, c_elem * n,
                                C_BOX[0], 128 // c_elem)
    workspace = 0   # the kernel's last parameter is unused (the dynamic scheduler is gone)

    resident = _persistent_blocks(rung, cluster, block, smem, sm_limit) if persistent else None
    blocks = wgmma_grid_blocks(geo, m, n, cluster, resident, balanced=balance)
    return {
        "grid": (blocks, 1, 1),
        "block": block,
        "smem": smem,
        "args": [map_a, map_b, map_c, c, m, n, k, float(alpha), float(beta), workspace],
        "cluster": (cluster, 1, 1) if cluster > 1 else None,
        "keepalive": keep,
    }
