"""check_small_m.py's own logic, with no GPU: its device buffers and the
kernel launch are replaced by a fake memory and a numpy "kernel", so the
offsets, guard zones, encodings, exact comparison and error bound of the
GPU check are exercised. A correct fake passes every case; a fake that
accumulates in 16 bits, writes one element past C, or reads C when beta = 0
is caught."""
from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import check_small_m as chk  # noqa: E402
import drvgemm_small_m as sm  # noqa: E402


class FakeMemory:
    def __init__(self):
        self.blocks = {}
        self.next = 1 << 20

    def alloc(self, nbytes):
        base = self.next
        self.next += (nbytes + 4096) // 4096 * 4096 + 4096
        self.blocks[base] = np.zeros(nbytes, np.uint8)
        return base

    def locate(self, ptr):
        for base, arr in self.blocks.items():
            if base <= ptr < base + max(len(arr), 1):
                return arr, ptr - base
        raise ValueError(f"wild pointer {ptr:#x}")

    def read(self, ptr, count, dtype):
        arr, off = self.locate(ptr)
        nb = count * np.dtype(dtype).itemsize
        assert off + nb <= len(arr), "read past the allocation"
        return arr[off:off + nb].copy().view(dtype)

    def write(self, ptr, values):
        arr, off = self.locate(ptr)
        b = np.ascontiguousarray(values).view(np.uint8).ravel()
        assert off + len(b) <= len(arr), "write past the allocation"
        arr[off:off + len(b)] = b


def _install(monkeypatch, kernel):
    mem = FakeMemory()

    class FakeArr:
        def __init__(self, base, nbytes):
            self.base, self.nbytes = base, nbytes

        def fill_bytes(self, byte, stream=None):
            mem.blocks[self.base][:] = byte

        def to_host(self):
            return mem.blocks[self.base].copy()

    class FakeBuf:
        def __init__(self, nbytes):
            self.base = mem.alloc(max(1, nbytes))
            self.arr = FakeArr(self.base, nbytes)
            self.nbytes = nbytes

        def put(self, host, byte_off):
            host = np.ascontiguousarray(host)
            if host.nbytes:
                mem.write(self.base + byte_off, host)
            return self.base + byte_off

        def get_bytes(self):
            return self.arr.to_host()

    monkeypatch.setattr(chk, "DevBuf", FakeBuf)
    monkeypatch.setattr(chk, "drvgemm", types.SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setattr(chk.sm, "launch_small_m",
                        lambda *a, **kw: kernel(mem, *a, **kw))
    return mem


_IN = {"fp32": np.float32, "bf16": np.uint16, "fp16": np.float16}


def numpy_kernel(mem, A, B, C, m, n, k, alpha, beta, precision, out16=False, stream=None,
                 workspace=None, *, acc16=False, overrun=False, read_c_always=False):
    if m == 0 or n == 0:
        return None
    cfmt = chk.c_format(precision, out16)
    a = chk.decode(mem.read(A, m * k, _IN[precision]).reshape(m, k), precision) if k else \
        np.zeros((m, 0))
    b = chk.decode(mem.read(B, k * n, _IN[precision]).reshape(k, n), precision) if k else \
        np.zeros((0, n))
    if acc16:
        s = np.zeros((m, n), np.float16)
        for kk in range(k):
            s = (s + (a[:, kk:kk + 1] * b[kk:kk + 1, :]).astype(np.float16)).astype(np.float16)
        s = s.astype(np.float32)
    else:
        s = (a @ b).astype(np.float32)
    v = np.float32(alpha) * s
    if beta != 0 or read_c_always:
        c = chk.decode(mem.read(C, m * n, _IN[cfmt]).reshape(m, n), cfmt).astype(np.float32)
        v = np.float32(beta) * c + v
    stored, _ = chk.encode(v, cfmt)
    if overrun:
        stored = np.concatenate([stored.ravel(), stored.ravel()[:1]])
    mem.write(C, stored)
    return types.SimpleNamespace(instance=sm.instance_for(m, precision, True, out16), splits=1)


SMALL = [c for c in chk.correctness_cases() if c["k"] * c["n"] <= 300_000]


def _run(c):
    kw = {x: c[x] for x in ("mode", "alpha", "beta", "seed")}
    return chk.run_case(c["prec"], c["m"], c["n"], c["k"], out16=c.get("out16", False),
                        offs=c.get("offs", (0, 0, 0)), **kw)


def test_the_case_list_covers_what_the_brief_asks():
    cases = chk.correctness_cases()
    assert {c["prec"] for c in cases} == {"fp32", "bf16", "fp16"}
    assert any(c.get("out16") for c in cases)
    assert any(c["beta"] == 0 for c in cases) and any(c["beta"] != 0 for c in cases)
    assert any(c.get("offs", (0, 0, 0)) != (0, 0, 0) for c in cases)
    assert max(c["k"] for c in cases) >= 65536
    assert {c["m"] for c in cases} >= {1, 16, 17, 32, 33, 63, 64}
    assert any(c["k"] == 0 for c in cases)
    assert any(c["mode"] == "exact" and c["prec"] == "fp32" for c in cases)


def test_a_correct_kernel_passes(monkeypatch):
    _install(monkeypatch, numpy_kernel)
    bad = [(c, r) for c in SMALL for r in [_run(c)] if not r["ok"]]
    assert not bad, bad[:3]


def test_a_16_bit_accumulator_is_caught(monkeypatch):
    _install(monkeypatch, lambda *a, **kw: numpy_kernel(*a, acc16=True, **kw))
    c = dict(prec="bf16", m=3, n=67, k=1009, mode="random", alpha=1.0, beta=0.0, seed=5)
    assert not _run(c)["ok"]


def test_a_write_past_c_is_caught(monkeypatch):
    _install(monkeypatch, lambda *a, **kw: numpy_kernel(*a, overrun=True, **kw))
    c = dict(prec="fp32", m=3, n=7, k=5, mode="exact", alpha=1.0, beta=0.0, seed=5)
    r = _run(c)
    assert not r["ok"] and not r["guards_ok"]


def test_reading_c_when_beta_is_zero_is_caught(monkeypatch):
    _install(monkeypatch, lambda *a, **kw: numpy_kernel(*a, read_c_always=True, **kw))
    c = dict(prec="bf16", m=3, n=7, k=5, mode="exact", alpha=1.0, beta=0.0, seed=5)
    assert not _run(c)["ok"]


@pytest.mark.parametrize("prec", ["bf16", "fp16", "fp32"])
def test_encodings_round_trip(prec):
    x = np.array([0.0, 1.0, -2.5, 3.140625, 65504.0 if prec != "bf16" else 1e30], np.float32)
    s, v = chk.encode(x, prec)
    assert np.array_equal(chk.decode(s, prec), v)
    assert np.array_equal(v[:4], x[:4].astype(np.float64))
