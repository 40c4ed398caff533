"""Tensor maps for the copy engine (TMA).

A ``TensorMap`` describes a tiled view of a global tensor, which the kernel
receives by value as a ``const __grid_constant__`` 128-byte parameter
(``.param .align 64 .b8 name[128]`` in PTX); ``drvgemm.launch`` packs any
object with a ``param_bytes`` attribute into such a slot. Every requirement
of ``cuTensorMapEncodeTiled`` is checked here first, so a bad map is a
``ValueError`` naming the field, raised before (and without) any GPU; the
driver encodes the map on first use of ``param_bytes``.

The copy engine needs 16-byte aligned base addresses and row pitches that are
multiples of 16 bytes. An operand with neither (``needs_staging``) can be
copied first into a ``PaddedCopy``: a scratch buffer whose rows are padded to
16 bytes (cuMemcpy2DAsync on the launch's stream), freed stream-ordered
(cuMemFreeAsync) when the object goes away, i.e. after the launch that reads
it was enqueued. The padding is never read, as the map's extent stays the
operand's own.

The host side of a rung that takes tensor maps (drvgemm/gemm/hopper.py)
builds its maps from these pieces.
"""
from __future__ import annotations

import struct
import threading
from collections import OrderedDict

from . import driver

__all__ = ["TensorMap", "matrix_map", "cached_matrix_map", "ELEMENT_TYPES", "SWIZZLE_BYTES",
           "needs_staging", "PaddedCopy", "UNUSED_MAP"]


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



def needs_staging(address: int, cols: int, elem_size: int) -> bool:
    """True when a row-major operand cannot be described to the copy engine
    as it is: base not 16-byte aligned, or rows not a multiple of 16 bytes."""
    return address % 16 != 0 or (cols * elem_size) % 16 != 0


class PaddedCopy:
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


def cached_matrix_map(address, dtype, rows, cols, pitch, box_rows, box_cols) -> TensorMap:
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
