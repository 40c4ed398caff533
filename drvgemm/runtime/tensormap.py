"""Tensor maps for the copy engine (TMA).

A ``TensorMap`` describes a tiled view of a global tensor, which the kernel
receives by value as a ``const __grid_constant__`` 128-byte parameter
(``.param .align 64 .b8 name[128]`` in PTX); ``drvgemm.launch`` packs any
object with a ``param_bytes`` attribute into such a slot. Every requirement
of ``cuTensorMapEncodeTiled`` is checked here first, so a bad map is a
``ValueError`` naming the field, raised before (and without) any GPU; the
driver encodes the map on first use of ``param_bytes``.

The copy engine needs 16-byte aligned base addresses and row pitches that are
multiples of 16 bytes. An operand with neither (``needs_staging``) must be
copied first into rows of ``padded_pitch`` bytes; the map's extent stays the
operand's own, so the padding is never read. The GEMM that does this keeps
its copies in drvgemm/ladders/gemm/staging.py.

A ``MapEncoder`` re-encodes one validated map at other addresses (one C
call into the driver with runtime/_fastlaunch.c, else cuda.bindings with the
arguments prepared once): what a GEMM called on new buffers needs.

The host side of a rung that takes tensor maps (drvgemm/ladders/gemm/hopper.py)
builds its maps from these pieces.
"""
from __future__ import annotations

import struct
import threading
from collections import OrderedDict

from . import driver
from .launch import fast_module

__all__ = ["TensorMap", "MapEncoder", "padded_pitch", "matrix_map", "cached_matrix_map",
           "ELEMENT_TYPES", "SWIZZLE_BYTES", "SWIZZLES", "INTERLEAVES", "tiled_map_problem",
           "needs_staging", "UNUSED_MAP"]


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
    "fp32_ftz": ("FLOAT32_FTZ", 4),
    # The copy engine rounds these to TF32 on the way (not what "tf32", an
    # alias of fp32 storage, means).
    "tfloat32": ("TFLOAT32", 4),
    "tfloat32_ftz": ("TFLOAT32_FTZ", 4),
}
_FLOAT_TYPES = ("fp16", "bf16", "fp32", "fp64", "fp32_ftz", "tfloat32", "tfloat32_ftz")
_ALIASES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32",
            "float": "fp32", "tf32": "fp32", "float64": "fp64", "double": "fp64", "int8": "uint8",
            "int16": "uint16"}
_PACKED = ("16u4_align8b", "16u4_align16b", "16u6_align16b")

# swizzle: bytes of the span (0 = none), or the name of a 128-byte atom mode.
# name -> (driver enum suffix, the most bytes the inner box row may have)
SWIZZLES = {0: ("NONE", None), 32: ("32B", 32), 64: ("64B", 64), 128: ("128B", 128),
            "128B_ATOM_32B": ("128B_ATOM_32B", 128),
            "128B_ATOM_32B_FLIP_8B": ("128B_ATOM_32B_FLIP_8B", 128),
            "128B_ATOM_64B": ("128B_ATOM_64B", 128)}
SWIZZLE_BYTES = (0, 32, 64, 128)   # the byte-span modes
INTERLEAVES = {0: "NONE", 16: "16B", 32: "32B"}
_L2_PROMOTION = (0, 64, 128, 256)
_MAX_RANK = 5
_MAX_DIM = 2**32
_MAX_STRIDE = 2**40
_MAX_BOX = 256
_MAX_ELEMENT_STRIDE = 8


def _element(dtype) -> tuple[str, str, int]:
    """(canonical name, driver enum suffix, size) for a name or numpy dtype."""
    name = dtype if isinstance(dtype, str) else str(getattr(dtype, "name", dtype))
    name = _ALIASES.get(name.lower(), name.lower())
    if name in _PACKED:
        raise ValueError(f"TensorMap element type {dtype!r} (packed sub-byte data, sm_100) is "
                         "not supported by drvgemm")
    if name not in ELEMENT_TYPES:
        raise ValueError(f"TensorMap element type {dtype!r} is not supported; use one of "
                         f"{', '.join(ELEMENT_TYPES)}")
    enum, size = ELEMENT_TYPES[name]
    return name, enum, size


def _swizzle_key(swizzle):
    if isinstance(swizzle, str):
        key = swizzle.upper().removeprefix("CU_TENSOR_MAP_SWIZZLE_")
        key = {"NONE": 0, "32B": 32, "64B": 64, "128B": 128}.get(key, key)
    elif isinstance(swizzle, bool) or not hasattr(swizzle, "__index__"):
        raise TypeError(f"TensorMap swizzle must be 0, 32, 64, 128 or a mode name, got "
                        f"{type(swizzle).__name__} {swizzle!r}")
    else:
        key = int(swizzle)
    if key not in SWIZZLES:
        raise ValueError(f"TensorMap swizzle = {swizzle!r}: use one of 0, 32, 64, 128 (bytes; "
                         f"0 = none) or {', '.join(k for k in SWIZZLES if isinstance(k, str))}")
    return key


def _interleave_key(interleave):
    if isinstance(interleave, str):
        key = {"NONE": 0, "16B": 16, "32B": 32}.get(
            interleave.upper().removeprefix("CU_TENSOR_MAP_INTERLEAVE_"))
        if key is None:
            raise ValueError(f"TensorMap interleave = {interleave!r}: use 'none', '16B' or '32B'")
        return key
    key = _as_int(interleave, "interleave")
    if key not in INTERLEAVES:
        raise ValueError(f"TensorMap interleave = {interleave!r}: use 0 (none), 16 or 32 (bytes)")
    return key


def tiled_map_problem(dtype, address, dims, strides, box, element_strides=None, *,
                      interleave=0, swizzle=0, l2_promotion=0, oob_fill="zero") -> str | None:
    """Why ``cuTensorMapEncodeTiled`` would refuse this map (the driver's
    documented requirements), or None when it is a valid map. Pure Python:
    no GPU. Dimensions innermost first; ``strides`` in bytes for dims[1:].

    What is not a requirement, and not checked: that strides grow with the
    dimension or that consecutive indices do not overlap (a map may walk a
    middle dimension with a smaller stride than an outer one, or revisit
    memory: the copy engine just computes addresses)."""
    try:
        name, _, esize = _element(dtype)
        swz = _swizzle_key(swizzle)
        il = _interleave_key(interleave)
    except (ValueError, TypeError) as e:
        return str(e)
    rank = len(dims)
    if not 1 <= rank <= _MAX_RANK:
        return f"TensorMap rank must be 1..{_MAX_RANK}, got {rank} dimensions"
    if il and rank < 3:
        return (f"TensorMap with {il}-byte interleave needs rank >= 3 (e.g. N, C/8, HW... "
                f"innermost first), got rank {rank}")
    align = 32 if il == 32 else 16
    if address % align:
        return (f"TensorMap global address 0x{address:x} is not {align}-byte aligned (it is "
                f"{address % align} bytes past a {align}-byte boundary); the copy engine needs "
                f"{align}-byte aligned tensors" + (" with 32-byte interleave" if il == 32 else ""))
    for i, d in enumerate(dims):
        if not 1 <= d <= _MAX_DIM:
            return f"TensorMap dims[{i}] = {d}: each dimension must be in 1..2^32 elements"
    if len(strides) != rank - 1:
        return (f"TensorMap needs {rank - 1} strides (bytes between indices of dims[1:]) for "
                f"{rank} dimensions, got {len(strides)}")
    for i, st in enumerate(strides):
        if st % align or not 0 <= st < _MAX_STRIDE:
            return (f"TensorMap strides[{i}] = {st} bytes: strides must be multiples of "
                    f"{align} bytes below 2^40 (a row of {dims[i]} {name} elements is "
                    f"{dims[i] * esize} bytes; pad rows to a multiple of {align} bytes)")
    if len(box) != rank:
        return f"TensorMap box must have {rank} entries, got {len(box)}"
    for i, bx in enumerate(box):
        if not 1 <= bx <= _MAX_BOX:
            return f"TensorMap box[{i}] = {bx}: box dimensions must be in 1..{_MAX_BOX}"
    row = box[0] * esize
    if il == 0 and row % 16:
        return (f"TensorMap box[0] = {box[0]} {name} elements = {row} bytes: the innermost box "
                "dimension must be a multiple of 16 bytes")
    es = (1,) * rank if element_strides is None else tuple(element_strides)
    if len(es) != rank:
        return f"TensorMap element_strides must have {rank} entries, got {len(es)}"
    for i, e in enumerate(es):
        if not 1 <= e <= _MAX_ELEMENT_STRIDE:
            return f"TensorMap element_strides[{i}] = {e}: must be in 1..{_MAX_ELEMENT_STRIDE}"
    span = SWIZZLES[swz][1]
    if il == 0 and span is not None and row > span:
        return (f"TensorMap box[0] = {box[0]} {name} elements = {row} bytes exceeds the "
                f"{span}-byte swizzle span: the innermost box row must fit in one swizzle "
                f"line (at most {span // esize} elements)")
    if isinstance(l2_promotion, bool) or l2_promotion not in _L2_PROMOTION:
        return f"TensorMap l2_promotion = {l2_promotion!r}: use one of {_L2_PROMOTION} (bytes)"
    if oob_fill not in ("zero", "nan"):
        return f"TensorMap oob_fill = {oob_fill!r}: use 'zero' or 'nan'"
    if oob_fill == "nan" and name not in _FLOAT_TYPES:
        return "TensorMap oob_fill='nan' needs a floating-point element type"
    return None


def _map_bytes(tmap) -> bytes:
    """The 128 bytes of an encoded CUtensorMap (cuda.bindings' object)."""
    raw = struct.pack("<16Q", *(int(x) for x in tmap.opaque))
    assert len(raw) == 128
    return raw


class TensorMap:
    """A tiled tensor map (``cuTensorMapEncodeTiled``), dimensions listed
    innermost first as the driver takes them. Every map the driver accepts
    is accepted (``tiled_map_problem`` holds its documented rules).

    address          device address of element (0, 0, ...): 16-byte aligned
                     (32 with 32-byte interleave)
    dtype            element type ("bf16", "fp16", "fp32", "tf32", ... or a numpy dtype)
    dims             elements along each dimension, innermost (contiguous) first,
                     1..2^32 each, rank 1..5
    strides          bytes between consecutive indices of dims[1:] (len(dims) - 1
                     values), multiples of 16 (32 with 32-byte interleave) below
                     2^40, in any order: nothing requires them to grow
    box              elements per copy along each dimension (1..256 each); without
                     interleave the innermost box row must be a multiple of 16 bytes
                     and, when swizzled, at most the swizzle span
    element_strides  traversal step per dimension (1..8; default all 1)
    interleave       0 (none), 16 or 32 bytes (NC/8HWC8-style layouts; rank >= 3,
                     32 needs swizzle 32)
    swizzle          0, 32, 64 or 128: the shared-memory swizzle span in bytes, or a
                     128-byte atom mode name ("128B_ATOM_32B", ...)
    l2_promotion     0, 64, 128 or 256 bytes
    oob_fill         "zero" (out-of-bounds elements read as 0) or "nan" (floats only)
    """

    __slots__ = ("address", "dtype", "elem_size", "dims", "strides", "box", "element_strides",
                 "interleave", "swizzle", "l2_promotion", "oob_fill", "_enum", "_bytes",
                 "_lock")

    def __init__(self, address, dtype, dims, strides, box, *, element_strides=None,
                 interleave=0, swizzle=128, l2_promotion=256, oob_fill="zero"):
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
        self.interleave = _interleave_key(interleave)
        self.swizzle = _swizzle_key(swizzle)
        self.l2_promotion = _as_int(l2_promotion, "l2_promotion")
        self.oob_fill = oob_fill
        self._bytes = None
        self._lock = threading.Lock()
        self._validate()

    # -- checks (no GPU needed) -------------------------------------------------
    def _validate(self):
        problem = tiled_map_problem(self.dtype, self.address, self.dims, self.strides, self.box,
                                    self.element_strides, interleave=self.interleave,
                                    swizzle=self.swizzle, l2_promotion=self.l2_promotion,
                                    oob_fill=self.oob_fill)
        if problem:
            raise ValueError(problem)

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

    def driver_args(self, d) -> tuple:
        """The arguments of cuTensorMapEncodeTiled for this map, in the
        bindings module ``d``'s types."""
        l2 = {0: "NONE", 64: "L2_64B", 128: "L2_128B", 256: "L2_256B"}[self.l2_promotion]
        fill = "NONE" if self.oob_fill == "zero" else "NAN_REQUEST_ZERO_FMA"
        T = d.CUtensorMapDataType
        return (getattr(T, "CU_TENSOR_MAP_DATA_TYPE_" + self._enum),
                len(self.dims), self.address,
                [d.cuuint64_t(x) for x in self.dims],
                [d.cuuint64_t(x) for x in self.strides],
                [d.cuuint32_t(x) for x in self.box],
                [d.cuuint32_t(x) for x in self.element_strides],
                getattr(d.CUtensorMapInterleave,
                        "CU_TENSOR_MAP_INTERLEAVE_" + INTERLEAVES[self.interleave]),
                getattr(d.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_" + SWIZZLES[self.swizzle][0]),
                getattr(d.CUtensorMapL2promotion, "CU_TENSOR_MAP_L2_PROMOTION_" + l2),
                getattr(d.CUtensorMapFloatOOBfill, "CU_TENSOR_MAP_FLOAT_OOB_FILL_" + fill))

    def _encode(self) -> bytes:
        d = driver.bindings()
        res = d.cuTensorMapEncodeTiled(*self.driver_args(d))
        return _map_bytes(driver.check(res, f"cuTensorMapEncodeTiled({self})"))

    def __repr__(self):
        extra = f", interleave={self.interleave}" if self.interleave else ""
        return (f"TensorMap({self.dtype}, address=0x{self.address:x}, dims={self.dims}, "
                f"strides={self.strides}, box={self.box}, swizzle={self.swizzle}{extra})")

    __str__ = __repr__


class MapEncoder:
    """``template``'s map at any other address of its alignment (16 bytes, 32
    with 32-byte interleave): ``encoder(address)`` -> the 128 bytes of the
    encoded map. Every field but the address was validated when the template
    was built, so a call only checks the address's alignment and asks the
    driver; a refusal raises the checked path's error for the whole map."""
    __slots__ = ("template", "align", "_c", "_args")

    def __init__(self, template: TensorMap):
        self.template = template
        self.align = 32 if template.interleave == 32 else 16
        d = driver.bindings()
        self._args = template.driver_args(d)
        self._c = None
        fl = fast_module()
        fn = driver.proc_address("cuTensorMapEncodeTiled") if fl is not None else 0
        if fn:
            a = self._args
            self._c = fl.Encoder(fn, int(a[0]), template.dims, template.strides, template.box,
                                 template.element_strides, int(a[7]), int(a[8]), int(a[9]),
                                 int(a[10]), self.align)

    def __call__(self, address: int) -> bytes:
        if self._c is not None:
            raw = self._c(address)      # ValueError when misaligned
            if type(raw) is bytes:
                return raw
        elif address % self.align:
            raise ValueError(f"tensor map address {address:#x} is not {self.align}-byte "
                             "aligned")
        else:
            d = driver.bindings()
            a = self._args
            err, tmap = d.cuTensorMapEncodeTiled(a[0], a[1], address, *a[3:])
            if int(err) == 0:
                return _map_bytes(tmap)
        return self.at(address).param_bytes    # raises the driver's error, naming the map

    def at(self, address: int) -> TensorMap:
        """The template's map at ``address``, as a checked TensorMap."""
        t = self.template
        return TensorMap(address, t.dtype, t.dims, t.strides, t.box,
                         element_strides=t.element_strides, interleave=t.interleave,
                         swizzle=t.swizzle, l2_promotion=t.l2_promotion, oob_fill=t.oob_fill)


def matrix_map(address, dtype, rows, cols, row_pitch, box_rows, box_cols, *, swizzle=128,
               l2_promotion=256) -> TensorMap:
    """A map over a row-major rows x cols matrix whose rows are ``row_pitch``
    bytes apart; each copy moves box_rows x box_cols elements. Rows that
    overlap (a pitch below the row's own bytes) are refused here: legal for
    the driver (TensorMap takes them), but never a matrix."""
    _, _, esize = _element(dtype)
    if isinstance(row_pitch, int) and isinstance(cols, int) and 0 < row_pitch < cols * esize:
        raise ValueError(f"matrix row pitch {row_pitch} bytes is smaller than the "
                         f"{cols * esize} bytes of a row of {cols} elements: the rows would "
                         "overlap (use TensorMap directly for such a view)")
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


def padded_pitch(row_bytes: int) -> int:
    """A row of ``row_bytes`` padded to the copy engine's 16 bytes."""
    return -(-int(row_bytes) // 16) * 16


_MAP_CACHE: "OrderedDict[tuple, TensorMap]" = OrderedDict()
_MAP_CACHE_SIZE = 1024    # 128 bytes each: the maps of a few hundred operand sets
_cache_lock = threading.Lock()


@driver.on_reset
def _drop_maps():
    # Maps over addresses of the old context (a new allocation may reuse one).
    with _cache_lock:
        _MAP_CACHE.clear()


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
