"""A lane-level numpy emulation of rung 30 (cu/gemm/30_small_m.cu), so that
its indexing can be checked with no GPU: the block decode, each warp's steps,
the cursor, what fill_stage puts in each lane's ring slot (zero-fill rules of
both alignment classes; fp32's unaligned stream as the aligned 16-byte blocks
around each row's columns, clipped at B's end and read back at the row's
shift), the PRMT pairing of B rows into mma fragments, the k-permuted A
fragments, mma.sync itself (through drvgemm.layouts, the same
maps the layout probes check on the hardware), the accumulator -> reduction
buffer map, the warp-ordered block sum, the split tiles and the last block's
fixed-order sum, and the alpha / beta epilogue.

Values are carried in float64; feed small integers and the emulation is
exact, so any indexing slip shows as a wrong element, not as rounding.
"""
from __future__ import annotations

import functools

import numpy as np

from drvgemm.analysis.layouts import mma_fragments, unpack_registers


def _prmt(a, b, sel):
    """prmt.b32 with a 16-bit selector (no sign mode): byte i of the result is
    byte (sel >> 4i) & 7 of the 8-byte value {b, a}."""
    a = a.astype(np.uint64)
    b = b.astype(np.uint64)
    src = a | (b << np.uint64(32))
    out = np.zeros_like(a)
    for i in range(4):
        idx = (sel >> (4 * i)) & 7
        byte = (src >> np.uint64(8 * idx)) & np.uint64(0xFF)
        out |= byte << np.uint64(8 * i)
    return out.astype(np.uint32)


@functools.lru_cache(maxsize=None)
def _stash16_map(rows_per_block):
    """(m, tm, h, lane, j, column) of every register a 16-bit warp stashes:
    Emulator._stash16's map, made once per block height."""
    lane, tm, h, q, i = np.meshgrid(np.arange(32), np.arange(rows_per_block // 16),
                                    np.arange(2), np.arange(2), np.arange(4), indexing="ij")
    g, t = lane >> 2, lane & 3
    return tuple(a.reshape(-1) for a in (16 * tm + 8 * h + g, tm, h, lane, 4 * q + i,
                                         16 * t + 4 * q + i))


class Workspace:
    """A device workspace as bytes at a (fake) device address ``base``, zeroed
    when made, as the dispatcher's. ``Emulator.run(..., workspace=ws, work=,
    counters=)`` keeps rung 30's int32 counters and fp32 partial tiles in it
    at the addresses the host side passes, so that what one launch leaves
    there is what the next one finds."""

    def __init__(self, nbytes, base=0x7000_0000):
        self.base = base
        self.mem = np.zeros(nbytes, np.uint8)

    def _view(self, addr, count, dtype):
        off = addr - self.base
        size = np.dtype(dtype).itemsize
        assert off % size == 0 and 0 <= off and off + count * size <= self.mem.size, \
            "workspace access out of bounds"
        return self.mem[off:off + count * size].view(dtype)

    def i32(self, addr, count=1):
        return self._view(addr, count, np.int32)

    def f32(self, addr, count=1):
        return self._view(addr, count, np.float32)

    def is_zero(self) -> bool:
        return not self.mem.any()


class Emulator:
    """One instance's geometry (WARPS, ROWS, precision) and the kernel's
    arithmetic, block by block. ``run(A, B, C, plan_fields)`` returns the new C
    (float64) and the workspace tiles it wrote."""

    def __init__(self, precision, rows, warps, aligned, nwarps=1, b_offset=0):
        """``b_offset``: B's address modulo 16 bytes (its allocation is
        256-byte aligned, B a few elements into it): where fp32's unaligned
        stream finds each row's columns inside their 16-byte blocks."""
        assert b_offset % 4 == 0 and (b_offset % 16 == 0 or not aligned)
        self.b_words = b_offset // 4 % 4
        self.precision = precision
        self.rows_per_block = rows
        self.warps = warps
        self.nwarps = nwarps                  # side by side along N
        self.kwarps = warps // nwarps         # taking turns along K
        self.aligned = aligned
        self.warp_strip = 128 if precision == "fp32" else 64
        self.strip = self.warp_strip * nwarps
        self.kstep = 4 if precision == "fp32" else 16

    # -- one warp step --------------------------------------------------
    def _b_chunks(self, B, k, col, N, K, vec):
        """The VEC values each lane's chunk holds: row k[i] of B from column
        col[i] (arrays of one shape S; returns S + (vec,)). Inside B or zero:
        the aligned class copies a chunk whole or not at all (N % VEC == 0, so
        that is the same per element), the other element by element."""
        k = np.asarray(k)[..., None]
        c = np.asarray(col)[..., None] + np.arange(vec)
        if self.aligned:
            assert N % vec == 0
        ok = (k < K) & (c < N) & (k >= 0)
        if not B.size:
            return np.zeros(ok.shape)
        return np.where(ok, B[np.where(ok, k, 0), np.where(ok, c, 0)], 0.0)

    def _a_pieces(self, A, m, rows_here, m0, kcol, K):
        """The 4 values of A each lane copies: row m[i] of the block (zero at
        and past rows_here), columns kcol[i] .. kcol[i] + 3 (zero past K)."""
        m = np.asarray(m)[..., None]
        c = np.asarray(kcol)[..., None] + np.arange(4)
        if self.aligned:
            assert K % 4 == 0   # all four or none
        ok = (m < rows_here) & (c < K)
        if not A.size:
            return np.zeros(ok.shape)
        return np.where(ok, A[np.where(ok, m0 + m, 0), np.where(ok, c, 0)], 0.0)

    def _step16(self, acc, A, B, geo, step):
        """compute_stage(fill_stage(step)) for every lane of a warp, 16-bit."""
        M, N, K, m0, rows_here, n0 = geo
        lanes = np.arange(32)
        g, t = lanes >> 2, lanes & 3
        col = n0 + 8 * g
        k = step * 16 + 4 * t                      # cursor.k per lane
        # raw[r] : (32, 8) values -> packed words (32, 4) of float16 bits
        raw = self._b_chunks(B, k[None, :] + np.arange(4)[:, None], col[None, :], N, K, 8)
        words = raw.astype(np.float16).view(np.uint16).astype(np.uint32)
        words = words[..., 0::2] | (words[..., 1::2] << 16)          # (4, 32, 4)
        # b0[:, 2i], b0[:, 2i + 1]: the low and high halves of words i of rows 0 and 1
        # (b1: rows 2 and 3), for every i at once (prmt works word by word)
        b0 = np.zeros((32, 8), np.uint32)
        b1 = np.zeros((32, 8), np.uint32)
        b0[:, 0::2] = _prmt(words[0], words[1], 0x5410)
        b0[:, 1::2] = _prmt(words[0], words[1], 0x7632)
        b1[:, 0::2] = _prmt(words[2], words[3], 0x5410)
        b1[:, 1::2] = _prmt(words[2], words[3], 0x7632)
        m_tiles = self.rows_per_block // 16
        for tm in range(m_tiles):
            if 16 * tm >= rows_here:
                break
            # rows at and past rows_here are never copied, read as zeros
            pieces = self._a_pieces(A, 16 * tm + 8 * np.arange(2)[:, None] + g[None, :],
                                    rows_here, m0, k[None, :], K)         # (2, 32, 4)
            pw = pieces.astype(np.float16).view(np.uint16).astype(np.uint32)
            pw = pw[..., 0::2] | (pw[..., 1::2] << 16)              # (2, 32, 2)
            a_words = np.stack([pw[0, :, 0], pw[1, :, 0], pw[0, :, 1], pw[1, :, 1]], axis=1)
            a_frag = unpack_registers(a_words, "f16").astype(np.float64)
            for j in range(8):
                b_words = np.stack([b0[:, j], b1[:, j]], axis=1)
                b_frag = unpack_registers(b_words, "f16").astype(np.float64)
                c = acc[tm, j][..., None]
                acc[tm, j] = mma_fragments("m16n8k16", "f16", a_frag, b_frag, c)[..., 0]

    def _stash16(self, acc, red, rows_here):
        """acc[tm, j, lane, r] -> red[m, column], every lane at once: lane
        (g, t) holds rows m = 16 tm + 8 h + g (r = 2h, 2h + 1) of columns
        16 t + 4 q + i (even r) and 16 t + 8 + 4 q + i (odd r), j = 4 q + i;
        rows at and past rows_here are not stored. Each (m, column) is one
        lane's one register, so the stores do not overlap."""
        m, tm, h, lane, j, col = _stash16_map(self.rows_per_block)
        kept = m < rows_here
        m, tm, h, lane, j, col = (a[kept] for a in (m, tm, h, lane, j, col))
        red[m, col] = acc[tm, j, lane, 2 * h]
        red[m, col + 8] = acc[tm, j, lane, 2 * h + 1]

    def _shifted_b(self, B, N, K, c0, kb):
        """fp32 ALIGNED=0: what fill_stage copies and compute_stage reads.
        Row j of the step is the 33 aligned 16-byte blocks around columns
        c0 .. c0+127 of row kb+j (from element (kb+j)*N + c0 - shift_j of B,
        read as flat memory), each clipped at B's end; lane l's register q
        is word shift_j + l + 32q of that segment: column c0 + l + 32q.
        Returns (4, 32, 4) [row, lane, q]. The up to 3 elements before B in
        its first block are NaN here: a stored output that used one would
        show it."""
        flat = B.reshape(-1)
        total = K * N
        shifts = [(self.b_words + j * N + c0) % 4 for j in range(4)]
        # the kernel's test for a step whose copies are all whole
        whole_kb = K - 3 - -(-(c0 - shifts[3] + 132) // N)
        out = np.zeros((4, 32, 4))
        for j in range(4):
            assert shifts[j] == (self.b_words + (kb + j) * N + c0) % 4, "shift depends on the step"
            start = (kb + j) * N + c0 - shifts[j]
            assert (self.b_words + start) % 4 == 0          # a 16-byte block of memory
            seg = np.zeros(33 * 4)
            for blk in range(33):
                e0 = start + 4 * blk
                # a block before B is B's own first one, never one before it
                assert e0 >= -self.b_words
                inside = min(4, max(0, total - e0))         # bytes_inside / 4
                if kb <= whole_kb:
                    assert inside == 4, "a step taken as whole copies past B's end"
                for t in range(inside):
                    e = e0 + t
                    seg[4 * blk + t] = flat[e] if e >= 0 else np.nan
            words = shifts[j] + np.arange(32)[:, None] + 32 * np.arange(4)[None, :]
            assert words.max() < seg.size
            out[j] = seg[words]
        return out

    def _step32(self, acc, A, B, geo, step):
        M, N, K, m0, rows_here, n0 = geo
        kb = step * 4
        rows = min(rows_here, self.rows_per_block)
        a = self._a_pieces(A, np.arange(rows), rows_here, m0, np.full(rows, kb), K)  # (rows, 4)
        if self.aligned:
            cols = n0 + 4 * np.arange(32)
            b = self._b_chunks(B, kb + np.arange(4)[:, None], cols[None, :], N, K, 4)  # (4, 32, 4)
        else:
            b = self._shifted_b(B, N, K, n0, kb)
        for r in range(4):       # the kernel's order of the four FFMA steps
            acc[:rows] += a[:, r, None, None] * b[r][None]

    # -- the kernel -------------------------------------------------------
    def run(self, A, B, C, M, N, K, alpha, beta, strips, zchunks, splits, steps_per_split,
            group=0, *, workspace=None, work=0, counters=0, clear_partials=True):
        """``workspace`` (a Workspace) with the ``work`` / ``counters``
        addresses of the launch's arguments: split K goes through those bytes
        as the kernel's does (a counter that does not start at 0 leaves its
        strip unwritten, or written early); ``clear_partials``: the last block
        zeroes the partials it has read (the kernel does). Without a
        workspace: an ideal one, and every element must be written once."""
        A = np.asarray(A, np.float64)
        B = np.asarray(B, np.float64)
        out = np.array(C, np.float64, copy=True)
        ROWS, STRIP = self.rows_per_block, self.strip
        tiles = {}
        cnt_addr = counters
        counters = np.zeros(zchunks * strips, np.int64)
        total_steps = -(-K // self.kstep)
        written = np.zeros((M, N), np.int64)
        for bid0 in range(strips * zchunks * splits):
            bid = bid0
            z = bid % zchunks
            bid //= zchunks
            strip = bid % strips
            split = bid // strips
            m0 = z * ROWS
            rows_here = min(ROWS, M - m0)
            n0 = strip * STRIP
            q0 = split * steps_per_split
            q1 = min(total_steps, q0 + steps_per_split)
            assert q1 > q0 or (K == 0 and splits == 1), "an empty split"
            red = np.zeros((self.kwarps, ROWS, STRIP))
            WS, KW = self.warp_strip, self.kwarps
            for warp in range(self.warps):
                nw, w = warp % self.nwarps, warp // self.nwarps
                geo = (M, N, K, m0, rows_here, n0 + nw * WS)
                mine = (q1 - q0 - w + KW - 1) // KW if q1 - q0 > w else 0
                if self.precision == "fp32":
                    acc = np.zeros((ROWS, 32, 4))
                else:
                    acc = np.zeros((ROWS // 16, 8, 32, 4))
                for i in range(mine):
                    step = q0 + w + i * KW
                    assert q0 <= step < q1
                    if self.precision == "fp32":
                        self._step32(acc, A, B, geo, step)
                    else:
                        self._step16(acc, A, B, geo, step)
                if self.precision == "fp32":
                    for m in range(rows_here):
                        # [lane, j]: column 4 lane + j, or (unaligned) lane + 32 j
                        vals = acc[m] if self.aligned else acc[m].T
                        red[w, m, nw * WS:(nw + 1) * WS] = vals.reshape(-1)
                else:
                    self._stash16(acc, red[w, :, nw * WS:(nw + 1) * WS], rows_here)
            part = np.zeros((ROWS, STRIP))
            for w in range(KW):                    # warp order
                part[:rows_here] += red[w, :rows_here]
            cid = z * strips + strip

            def epilogue(vals):
                for m in range(rows_here):
                    for c in range(STRIP):
                        n = n0 + c
                        if n >= N:
                            continue
                        v = alpha * vals[m, c]
                        if beta != 0:
                            v += beta * C[m0 + m, n]
                        out[m0 + m, n] = v
                        written[m0 + m, n] += 1

            if splits == 1:
                epilogue(part)
                continue
            if workspace is not None:
                tile = ROWS * STRIP
                qn = -(-min(STRIP, N - n0) // 4)         # float4s of a tile row inside N
                cols = slice(0, 4 * qn)
                t0 = work + 4 * (cid * splits * tile)

                def tile_at(sp):
                    return workspace.f32(t0 + 4 * sp * tile, tile).reshape(ROWS, STRIP)

                def add_and_clear(sps):
                    total = np.zeros((ROWS, STRIP))
                    for sp in sps:                              # fixed order
                        t = tile_at(sp)
                        total[:rows_here, cols] += t[:rows_here, cols]
                        if clear_partials:
                            t[:rows_here, cols] = 0.0
                    return total

                tile_at(split)[:rows_here, cols] = part[:rows_here, cols]
                group = group if 0 < group < splits else splits
                ngroups = -(-splits // group)
                if ngroups > 1:
                    g = split // group
                    first = g * group
                    count = min(group, splits - first)
                    gcnt = workspace.i32(cnt_addr + 4 * (strips * zchunks + cid * ngroups + g))
                    old = int(gcnt[0])
                    gcnt[0] = old + 1                           # atomicAdd
                    if old != count - 1:
                        continue
                    s = add_and_clear(range(first, first + count))
                    tile_at(first)[:rows_here, cols] = s[:rows_here, cols]
                    gcnt[0] = 0
                    terms = range(0, splits, group)
                else:
                    terms = range(splits)
                cnt = workspace.i32(cnt_addr + 4 * cid)
                old = int(cnt[0])
                cnt[0] = old + 1                                # atomicAdd
                if old == (ngroups if ngroups > 1 else splits) - 1:    # the last to arrive
                    epilogue(add_and_clear(terms))
                    cnt[0] = 0
                continue
            tiles[(cid, split)] = part.copy()
            counters[cid] += 1
            if counters[cid] == splits:             # the last one to arrive
                total = np.zeros((ROWS, STRIP))
                for sp in range(splits):            # fixed order
                    total += tiles[(cid, sp)]
                epilogue(total)
                counters[cid] = 0
        if workspace is not None:
            return out
        assert (written == 1).all(), "every element of C written exactly once"
        assert (counters == 0).all()
        return out
