"""Which thread holds which matrix element: the register layouts of the
tensor-core instructions, as data you can print, test and emulate.

A warp-level ``mma.sync`` does not take matrices, it takes registers: every
one of the 32 lanes brings a few 32-bit registers of A, B and C and receives
a few of D, and the instruction only computes the right product if each lane
put the right elements in the right registers. This module states those maps,
after the PTX ISA's "Matrix Fragments for mma.m16n8k8 / mma.m16n8k16"
sections (with groupID = lane >> 2 and threadID_in_group = lane % 4), for

* ``mma.sync.aligned.m16n8k8``  with .tf32, .f16 and .bf16 inputs,
* ``mma.sync.aligned.m16n8k16`` with .f16 and .bf16 inputs,

fp32 accumulators in both; ``ldmatrix`` (.x1/.x2/.x4, with and without
.trans); and the fp32 accumulator of the warpgroup-wide ``wgmma.mma_async``
m64nNk16. The probes in ``ptx/probe_*.ptx`` check every map against the
hardware (tests/test_layout_probes_gpu.py).

Conventions. A fragment element is addressed as (lane, register, element):
``element`` is the position inside one 32-bit register, 0 for the low 16 bits
and 1 for the high 16 bits of a packed .f16x2/.bf16x2 register; a .tf32 or
.f32 register holds a single element (element 0). For wgmma, "lane" is the
thread's index in its warpgroup (0..127), warp w = lane >> 5 of the group.

Pure Python + numpy: no GPU, no CUDA import.
"""
from __future__ import annotations

import functools

import numpy as np

__all__ = [
    "FragmentLayout", "LdmatrixLayout", "MMA_SHAPES", "MMA_TYPES", "WGMMA_N",
    "normalize_dtype", "element_dtype", "mma_layout", "ldmatrix_layout",
    "wgmma_d_layout", "wgmma_d_coord", "wgmma_kmajor_offset",
    "mma_fragments", "mma_emulate", "ldmatrix_emulate",
    "pack_registers", "unpack_registers", "picture",
]

WARP = 32
WARPGROUP = 128

# shape name -> (M, N, K)
MMA_SHAPES = {"m16n8k8": (16, 8, 8), "m16n8k16": (16, 8, 16)}
# input types each shape takes (with fp32 accumulators)
MMA_TYPES = {"m16n8k8": ("tf32", "f16", "bf16"), "m16n8k16": ("f16", "bf16")}
# wgmma.m64nNk16: N is a multiple of 8 up to 256
WGMMA_N = tuple(range(8, 257, 8))

_DTYPE_ALIASES = {"tf32": "tf32", "f16": "f16", "fp16": "f16", "half": "f16",
                  "bf16": "bf16", "f32": "f32", "fp32": "f32"}


def normalize_dtype(dtype: str) -> str:
    """'fp16' -> 'f16' etc.; raises ValueError on a type no layout here uses."""
    key = str(dtype).strip().lower().lstrip(".")
    if key not in _DTYPE_ALIASES:
        raise ValueError(f"unknown element type {dtype!r}: expected one of tf32, f16 (fp16), "
                         "bf16, f32")
    return _DTYPE_ALIASES[key]


def element_dtype(dtype: str) -> np.dtype:
    """The numpy type that holds one element on the host. tf32 travels as
    float32: the tensor core reads the upper 19 bits of the 32-bit register."""
    d = normalize_dtype(dtype)
    if d == "bf16":
        import ml_dtypes   # imported on first use: ~0.5 s (see runtime/dtypes.py)
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({"tf32": np.float32, "f32": np.float32, "f16": np.float16}[d])


def _elems_per_reg(dtype: str) -> int:
    # 16-bit types are packed two to a 32-bit register; tf32/f32 take a whole one
    return 2 if normalize_dtype(dtype) in ("f16", "bf16") else 1


# --------------------------------------------------------------------------
# the layout object
# --------------------------------------------------------------------------
class FragmentLayout:
    """The map (lane, register, element) -> (row, col) of one operand of one
    instruction, and its inverse.

    ``coords`` is the array form: shape (lanes, regs_per_lane, elems_per_reg, 2)
    holding (row, col). ``owners`` is the inverse: shape (rows, cols, 3) holding
    (lane, reg, elem), -1 where no register holds the element (only possible
    when the map is not a bijection, which ``is_bijection`` reports)."""

    def __init__(self, name: str, shape: tuple[int, int], lanes: int, regs_per_lane: int,
                 elems_per_reg: int, rule):
        self.name = name
        self.shape = (int(shape[0]), int(shape[1]))
        self.lanes = int(lanes)
        self.regs_per_lane = int(regs_per_lane)
        self.elems_per_reg = int(elems_per_reg)
        lane, reg, elem = np.meshgrid(np.arange(self.lanes), np.arange(self.regs_per_lane),
                                      np.arange(self.elems_per_reg), indexing="ij")
        rows, cols = rule(lane, reg, elem)
        coords = np.stack(np.broadcast_arrays(rows, cols), axis=-1).astype(np.int64)
        coords.setflags(write=False)
        self.coords = coords

        owners = np.full(self.shape + (3,), -1, dtype=np.int64)
        hits = np.zeros(self.shape, dtype=np.int64)
        r, c = coords[..., 0].ravel(), coords[..., 1].ravel()
        inside = (r >= 0) & (r < self.shape[0]) & (c >= 0) & (c < self.shape[1])
        np.add.at(hits, (r[inside], c[inside]), 1)
        who = np.stack([lane.ravel(), reg.ravel(), elem.ravel()], axis=-1)
        owners[r[inside], c[inside]] = who[inside]
        owners.setflags(write=False)
        self.owners = owners
        self._bijective = bool(inside.all() and (hits == 1).all())

    def __repr__(self):
        return (f"FragmentLayout({self.name}: {self.shape[0]}x{self.shape[1]}, "
                f"{self.lanes} lanes x {self.regs_per_lane} regs x {self.elems_per_reg} elems)")

    @property
    def elements_per_lane(self) -> int:
        return self.regs_per_lane * self.elems_per_reg

    def is_bijection(self) -> bool:
        """Every matrix element is held by exactly one (lane, reg, elem) and
        every (lane, reg, elem) holds an element inside the matrix."""
        return self._bijective

    def coord(self, lane: int, reg: int, elem: int = 0) -> tuple[int, int]:
        """(row, col) of the element that ``lane`` holds in register ``reg``,
        half ``elem`` (0 = low 16 bits)."""
        self._check_slot(lane, reg, elem)
        r, c = self.coords[lane, reg, elem]
        return int(r), int(c)

    def owner(self, row: int, col: int) -> tuple[int, int, int]:
        """(lane, reg, elem) that holds element (row, col)."""
        if not (0 <= row < self.shape[0] and 0 <= col < self.shape[1]):
            raise IndexError(f"({row}, {col}) is outside the {self.shape[0]}x{self.shape[1]} "
                             f"matrix of {self.name}")
        lane, reg, elem = self.owners[row, col]
        if lane < 0:
            raise LookupError(f"no register of {self.name} holds ({row}, {col})")
        return int(lane), int(reg), int(elem)

    def _check_slot(self, lane, reg, elem):
        if not (0 <= lane < self.lanes and 0 <= reg < self.regs_per_lane
                and 0 <= elem < self.elems_per_reg):
            raise IndexError(f"(lane {lane}, reg {reg}, elem {elem}) is not a register slot of "
                             f"{self.name} ({self.lanes} lanes, {self.regs_per_lane} regs, "
                             f"{self.elems_per_reg} elems per reg)")

    # -- moving whole matrices in and out of fragments --------------------
    def scatter(self, matrix) -> np.ndarray:
        """Per-lane fragments of ``matrix``: array (lanes, regs, elems), what
        each lane must hold before the instruction (or holds after it)."""
        m = np.asarray(matrix)
        if m.shape != self.shape:
            raise ValueError(f"{self.name} is {self.shape[0]}x{self.shape[1]}, got a matrix of "
                             f"shape {m.shape}")
        return m[self.coords[..., 0], self.coords[..., 1]]

    def gather(self, fragments) -> np.ndarray:
        """The matrix that per-lane ``fragments`` (lanes, regs, elems) spell,
        read through the inverse map."""
        f = np.asarray(fragments)
        want = (self.lanes, self.regs_per_lane, self.elems_per_reg)
        if f.shape != want:
            raise ValueError(f"{self.name} fragments have shape {want}, got {f.shape}")
        if not self._bijective:
            raise ValueError(f"{self.name} is not a bijection: a matrix cannot be gathered")
        o = self.owners
        return f[o[..., 0], o[..., 1], o[..., 2]]

    def picture(self, row_label=None) -> str:
        """A grid of the matrix: each cell names the lane and register (and
        half, for packed 16-bit registers) that holds that element."""
        def cell(lane, reg, elem):
            if lane < 0:
                return "--"
            s = f"T{lane}:r{reg}"
            return s + f".{elem}" if self.elems_per_reg > 1 else s
        cells = [[cell(*map(int, self.owners[r, c])) for c in range(self.shape[1])]
                 for r in range(self.shape[0])]
        labels = [row_label(r) if row_label else f"row {r}" for r in range(self.shape[0])]
        lw = max(len(s) for s in labels)
        cw = max(max(len(s) for row in cells for s in row), len(f"col {self.shape[1] - 1}"))
        head = " " * lw + " | " + " ".join(f"col {c}".rjust(cw) for c in range(self.shape[1]))
        lines = [head, "-" * len(head)]
        for label, row in zip(labels, cells):
            lines.append(label.rjust(lw) + " | " + " ".join(s.rjust(cw) for s in row))
        return "\n".join(lines)


class LdmatrixLayout(FragmentLayout):
    """``ldmatrix.sync.aligned.m8n8.xNUM{.trans}.shared.b16``.

    The NUM 8x8 matrices are stacked into one (8*NUM) x 8 matrix of *stored*
    rows: stacked row 8*m + r is row r of matrix m, as it sits in shared
    memory (8 consecutive 16-bit elements at the address one lane supplies).
    ``coord(lane, reg, elem)`` is the stored (stacked row, col) that lands in
    half ``elem`` of register ``reg`` of ``lane``; register i always carries
    matrix i. With .trans, the stored row becomes a column of the fragment:
    a lane receives two vertically adjacent elements of the stored matrix."""

    def __init__(self, num: int, trans: bool):
        if num not in (1, 2, 4):
            raise ValueError(f"ldmatrix loads 1, 2 or 4 matrices (.x1/.x2/.x4), not {num}")
        self.num = num
        self.trans = bool(trans)

        def rule(lane, reg, elem):
            g, t = lane >> 2, lane & 3
            if trans:
                return 8 * reg + 2 * t + elem, g
            return 8 * reg + g, 2 * t + elem

        super().__init__(f"ldmatrix.x{num}{'.trans' if trans else ''}", (8 * num, 8), WARP,
                         num, 2, rule)

    @property
    def address_lanes(self) -> int:
        """How many lanes' addresses the instruction reads (8 per matrix); the
        addresses of the other lanes are ignored."""
        return 8 * self.num

    def address_lane(self, matrix: int, row: int) -> int:
        """The lane whose address operand gives the start of stored row
        ``row`` of matrix ``matrix``."""
        if not (0 <= matrix < self.num and 0 <= row < 8):
            raise IndexError(f"{self.name} has matrices 0..{self.num - 1} of rows 0..7, "
                             f"not matrix {matrix} row {row}")
        return 8 * matrix + row

    def addressed_row(self, lane: int) -> tuple[int, int] | None:
        """(matrix, row) whose address ``lane`` supplies, or None when the
        instruction ignores that lane's address."""
        if not 0 <= lane < WARP:
            raise IndexError(f"lane {lane} is not in a warp")
        if lane >= self.address_lanes:
            return None
        return lane >> 3, lane & 7

    def picture(self, row_label=None) -> str:
        def label(s):
            m, r = divmod(s, 8)
            return f"m{m} row {r} (address from T{self.address_lane(m, r)})"
        body = super().picture(row_label or label)
        note = (f"ldmatrix.x{self.num}{'.trans' if self.trans else ''}: rows as stored in shared "
                f"memory; lanes 0..{self.address_lanes - 1} give the row addresses"
                + (f", lanes {self.address_lanes}..31 are ignored" if self.num < 4 else "")
                + "; register i of every lane holds matrix i"
                + ("; .trans: a lane receives a column pair of the stored rows" if self.trans
                   else ""))
        return note + "\n" + body


# --------------------------------------------------------------------------
# the maps themselves
# --------------------------------------------------------------------------
# Each rule receives integer arrays (lane, reg, elem) and returns (row, col).
# groupID g = lane >> 2 picks a row (of A, C, D) or a column (of B); the four
# lanes of a group, t = lane % 4, split the K (or N) extent between them.

def _accumulator_f32(lane, reg, elem):
    # 16x8 fp32: c0,c1 on row g, c2,c3 on row g+8; each lane two adjacent columns
    g, t = lane >> 2, lane & 3
    return g + 8 * (reg >> 1), 2 * t + (reg & 1)


def _a_m16n8k8_tf32(lane, reg, elem):
    # a0: (g, t)  a1: (g+8, t)  a2: (g, t+4)  a3: (g+8, t+4)
    g, t = lane >> 2, lane & 3
    return g + 8 * (reg & 1), t + 4 * (reg >> 1)


def _b_m16n8k8_tf32(lane, reg, elem):
    # b0: (t, g)  b1: (t+4, g)
    g, t = lane >> 2, lane & 3
    return t + 4 * reg, g


def _a_m16n8k8_16bit(lane, reg, elem):
    # reg 0 = {a0,a1} on row g, reg 1 = {a2,a3} on row g+8; halves are adjacent columns
    g, t = lane >> 2, lane & 3
    return g + 8 * reg, 2 * t + elem


def _b_m16n8k8_16bit(lane, reg, elem):
    # one register {b0,b1}: two adjacent K rows of column g
    g, t = lane >> 2, lane & 3
    return 2 * t + elem, g


def _a_m16n8k16_16bit(lane, reg, elem):
    # regs 0,1 cover K columns 0..7 (rows g, g+8); regs 2,3 the same rows at K 8..15
    g, t = lane >> 2, lane & 3
    return g + 8 * (reg & 1), 2 * t + elem + 8 * (reg >> 1)


def _b_m16n8k16_16bit(lane, reg, elem):
    # reg 0: K rows 2t, 2t+1 of column g; reg 1: the same 8 rows further down
    g, t = lane >> 2, lane & 3
    return 2 * t + elem + 8 * reg, g


_RULES = {
    ("m16n8k8", "tf32", "a"): (4, _a_m16n8k8_tf32),
    ("m16n8k8", "tf32", "b"): (2, _b_m16n8k8_tf32),
    ("m16n8k8", "16bit", "a"): (2, _a_m16n8k8_16bit),
    ("m16n8k8", "16bit", "b"): (1, _b_m16n8k8_16bit),
    ("m16n8k16", "16bit", "a"): (4, _a_m16n8k16_16bit),
    ("m16n8k16", "16bit", "b"): (2, _b_m16n8k16_16bit),
}


def _normalize_shape(shape: str) -> str:
    s = str(shape).strip().lower().lstrip(".")
    if s not in MMA_SHAPES:
        raise ValueError(f"unknown mma shape {shape!r}: expected one of {', '.join(MMA_SHAPES)}")
    return s


def _normalize_operand(operand: str) -> str:
    o = str(operand).strip().lower()
    if o not in ("a", "b", "c", "d"):
        raise ValueError(f"unknown operand {operand!r}: expected A, B, C or D")
    return "c" if o == "d" else o


@functools.lru_cache(maxsize=None)
def _mma_layout(shape: str, dtype: str, operand: str) -> FragmentLayout:
    m, n, k = MMA_SHAPES[shape]
    label = f"mma.{shape}.{dtype}.{operand.upper() if operand != 'c' else 'C/D'}"
    if operand == "c":
        # the fp32 accumulator tile is the same for every input type and both shapes
        return FragmentLayout(label, (m, n), WARP, 4, 1, _accumulator_f32)
    family = "tf32" if dtype == "tf32" else "16bit"
    regs, rule = _RULES[(shape, family, operand)]
    dims = (m, k) if operand == "a" else (k, n)
    return FragmentLayout(label, dims, WARP, regs, _elems_per_reg(dtype), rule)


def mma_layout(shape: str, dtype: str, operand: str) -> FragmentLayout:
    """The fragment layout of one operand of ``mma.sync.aligned.<shape>.row.col``
    with ``dtype`` inputs and fp32 accumulators. ``operand``: 'A', 'B', 'C' or
    'D' (C and D share one layout)."""
    shape = _normalize_shape(shape)
    dtype = normalize_dtype(dtype)
    if dtype not in MMA_TYPES[shape]:
        raise ValueError(f"mma.{shape} takes {', '.join(MMA_TYPES[shape])} inputs, not {dtype}")
    return _mma_layout(shape, dtype, _normalize_operand(operand))


@functools.lru_cache(maxsize=None)
def ldmatrix_layout(num: int = 4, trans: bool = False) -> LdmatrixLayout:
    """The layout of ``ldmatrix.sync.aligned.m8n8.x<num>{.trans}.shared.b16``."""
    return LdmatrixLayout(int(num), bool(trans))


def _wgmma_d_rule(thread, reg, elem):
    # Each warp of the warpgroup owns a 16-row band; inside it the registers
    # repeat the mma.sync accumulator pattern once per 8 columns.
    w, lane = thread >> 5, thread & 31
    g, t = lane >> 2, lane & 3
    return 16 * w + g + 8 * ((reg >> 1) & 1), 8 * (reg >> 2) + 2 * t + (reg & 1)


@functools.lru_cache(maxsize=None)
def wgmma_d_layout(n: int) -> FragmentLayout:
    """The fp32 accumulator of ``wgmma.mma_async.m64n<n>k16``: 128 threads of a
    warpgroup, n/2 registers each; lane index = 32 * warp + lane in warp."""
    n = int(n)
    if n not in WGMMA_N:
        raise ValueError(f"wgmma m64nNk16 needs N a multiple of 8 in 8..256, not {n}")
    return FragmentLayout(f"wgmma.m64n{n}k16.f32.D", (64, n), WARPGROUP, n // 2, 1, _wgmma_d_rule)


def wgmma_d_coord(warp: int, lane: int, reg: int, n: int) -> tuple[int, int]:
    """(row, col) of accumulator register ``reg`` of ``lane`` in warp ``warp``
    (0..3) of the warpgroup, for wgmma m64n<n>k16 with fp32 accumulators."""
    if not (0 <= warp < 4 and 0 <= lane < WARP):
        raise IndexError(f"warp {warp}, lane {lane}: a warpgroup has warps 0..3 of lanes 0..31")
    return wgmma_d_layout(n).coord(32 * warp + lane, reg, 0)


def wgmma_kmajor_offset(row, k, *, lbo: int, sbo: int, elem_bytes: int = 2):
    """Byte offset of element (row, k) of a K-major operand tile in shared
    memory without swizzle, as a wgmma descriptor with that leading (LBO) and
    stride (SBO) byte offset reads it: the tile is cut into 'core matrices'
    of 8 rows x 16 bytes, each stored as 128 contiguous bytes (row after row);
    core matrices next to each other along K are LBO bytes apart, along M (or
    N, for B) SBO bytes apart. Works on scalars and numpy arrays."""
    row = np.asarray(row)
    k = np.asarray(k)
    per_row = 16 // elem_bytes
    off = ((row // 8) * sbo + (k // per_row) * lbo + (row % 8) * 16 + (k % per_row) * elem_bytes)
    return int(off) if off.ndim == 0 else off


# --------------------------------------------------------------------------
# emulators
# --------------------------------------------------------------------------
def mma_fragments(shape: str, dtype: str, a_frag, b_frag, c_frag) -> np.ndarray:
    """What one ``mma.sync`` does to a warp's registers, lane by lane, in
    float64: per-lane fragments of A (32, regs, elems), B and C (32, 4, 1) in,
    per-lane D fragments (32, 4, 1) out.

    Every lane's D elements need a whole row of A and a whole column of B,
    which other lanes hold: the tensor core gathers them across the warp. The
    emulator does the same through the inverse maps, then writes each D
    element to the lane and register that the accumulator map assigns it."""
    la, lb, lc = (mma_layout(shape, dtype, op) for op in "abc")
    a = la.gather(np.asarray(a_frag, dtype=np.float64))
    b = lb.gather(np.asarray(b_frag, dtype=np.float64))
    c = np.asarray(c_frag, dtype=np.float64)
    if c.shape != (lc.lanes, lc.regs_per_lane, lc.elems_per_reg):
        raise ValueError(f"C fragments have shape {(lc.lanes, lc.regs_per_lane, 1)}, "
                         f"got {c.shape}")
    rows, cols = lc.coords[..., 0], lc.coords[..., 1]
    # a[rows] : (32, 4, 1, K); b[:, cols] : (K, 32, 4, 1)
    return np.einsum("lrek,klre->lre", a[rows], b[:, cols]) + c


def mma_emulate(shape: str, dtype: str, A, B, C) -> np.ndarray:
    """D = A·B + C computed the way the hardware sees it: scatter A, B, C
    into per-lane fragments with the layout maps, run ``mma_fragments``,
    gather D with the accumulator map. float64 throughout; inputs are used as
    given (no rounding to the input type)."""
    la, lb, lc = (mma_layout(shape, dtype, op) for op in "abc")
    d_frag = mma_fragments(shape, dtype, la.scatter(np.asarray(A, np.float64)),
                           lb.scatter(np.asarray(B, np.float64)),
                           lc.scatter(np.asarray(C, np.float64)))
    return lc.gather(d_frag)


def ldmatrix_emulate(num: int, trans: bool, stored_rows) -> np.ndarray:
    """Per-lane registers (32, num, 2) that ``ldmatrix.x<num>{.trans}``
    delivers when the addressed rows hold ``stored_rows`` ((8*num, 8) array:
    stacked row 8*m + r is what lane 8*m + r points at)."""
    lay = ldmatrix_layout(num, trans)
    return lay.scatter(np.asarray(stored_rows))


# --------------------------------------------------------------------------
# host packing: fragments <-> 32-bit register words
# --------------------------------------------------------------------------
def pack_registers(fragments, dtype: str) -> np.ndarray:
    """(lanes, regs, elems) element values -> (lanes, regs) uint32 register
    words, element 0 in the low half of a packed 16-bit pair."""
    dt = element_dtype(dtype)
    f = np.ascontiguousarray(np.asarray(fragments).astype(dt))
    # little-endian host: the first 16-bit element in memory is the low half
    return f.view(np.uint32).reshape(f.shape[:-1]) if dt.itemsize == 2 \
        else f.reshape(f.shape[:-1]).view(np.uint32)


def unpack_registers(words, dtype: str) -> np.ndarray:
    """(lanes, regs) uint32 register words -> (lanes, regs, elems) values."""
    dt = element_dtype(dtype)
    w = np.ascontiguousarray(np.asarray(words, dtype=np.uint32))
    per = 4 // dt.itemsize
    return w.view(dt).reshape(w.shape + (per,))


# --------------------------------------------------------------------------
# pictures
# --------------------------------------------------------------------------
def picture(shape: str, dtype: str = "", operand: str = "") -> str:
    """Printable grid of a fragment. ``picture('m16n8k8', 'tf32', 'A')``;
    ``picture('ldmatrix', 'x4', 'trans')`` (third argument '' or 'trans');
    ``picture('wgmma', 'm64n16', 'D')``."""
    what = str(shape).strip().lower()
    if what == "ldmatrix":
        num = _parse_ldmatrix_count(dtype or "x4")
        trans = str(operand).strip().lower() in ("trans", ".trans", "t", "true", "1")
        return ldmatrix_layout(num, trans).picture()
    if what == "wgmma":
        n = _parse_wgmma_shape(dtype or "m64n16")
        if operand and _normalize_operand(operand) != "c":
            raise ValueError("only the wgmma accumulator (D) layout is described here")
        lay = wgmma_d_layout(n)
        title = (f"wgmma.mma_async.m64n{n}k16 fp32 accumulator D: T = thread in the warpgroup "
                 f"(warp = T // 32 owns rows 16*warp .. 16*warp+15), {n // 2} registers each")
        return title + "\n" + lay.picture(lambda r: f"w{r // 16} row {r}")
    lay = mma_layout(shape, dtype, operand)
    op = lay.name.rsplit(".", 1)[1]
    title = (f"mma.sync.aligned.{_normalize_shape(shape)} {normalize_dtype(dtype)} {op}: "
             f"{lay.shape[0]}x{lay.shape[1]}, {lay.regs_per_lane} register(s) per lane"
             + (", two elements per register (.0 = low half, .1 = high half)"
                if lay.elems_per_reg == 2 else ""))
    return title + "\n" + lay.picture()


def _parse_ldmatrix_count(s: str) -> int:
    t = str(s).strip().lower().lstrip(".")
    if t not in ("x1", "x2", "x4", "1", "2", "4"):
        raise ValueError(f"ldmatrix count {s!r}: expected x1, x2 or x4")
    return int(t.lstrip("x"))


def _parse_wgmma_shape(s: str) -> int:
    t = str(s).strip().lower().lstrip(".")
    if t.endswith("k16"):
        t = t[:-3]
    if not t.startswith("m64n") or not t[4:].isdigit():
        raise ValueError(f"wgmma shape {s!r}: expected m64nN (N = 8, 16, ..., 256)")
    return int(t[4:])
