"""The shape suite of ``drvgemm bench --shapes``: the GEMM shapes people call
``gemm()`` with, as data. Each entry is M x N x K (C = A @ B, A is M x K,
B is K x N, row-major) with a class:

- ``decode``: M = 1...128 rows of activations against the weight matrices of
  common models (N, K among 4096, 5120, 8192, 11008, 14336, 28672, 128256;
  Llama-2 7B/13B, Llama-3 8B/70B, the 128256-entry vocabulary head);
  bound by reading B once;
- ``prefill``: M = 512...16384 tokens through the same weights;
- ``square``: 128 ... 16384, powers of two and not (768, 1536, 3072, ...);
- ``long_k``: K >= 32768 with a small C: few output tiles, the work is in K;
- ``tall`` / ``wide``: one of M, N far larger than the other;
- ``short_k``: K of 64 or 128 under a large C (the epilogue dominates);
- ``odd``: prime or odd sizes: edge tiles, unaligned rows, staging copies.

``quick`` marks the reduced suite of ``--quick``. Nothing here touches a GPU;
``estimate_seconds`` is the time model the repetition policy was chosen by
(tests hold it under the suite's budget)."""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Shape", "SUITE", "CLASSES", "PRECISIONS", "suite", "Policy", "POLICY",
           "QUICK_POLICY", "repetitions", "rotation_sets", "estimate_seconds"]

PRECISIONS = ("bf16", "fp16", "tf32", "fp32")
CLASSES = ("decode", "prefill", "square", "long_k", "tall", "wide", "short_k", "odd")


@dataclass(frozen=True)
class Shape:
    m: int
    n: int
    k: int
    shape_class: str
    note: str = ""
    quick: bool = False

    @property
    def name(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    def min_bytes(self, in_bytes: int, out_bytes: int) -> int:
        """A and B read once, C written once: the floor of any kernel's traffic."""
        return (self.m * self.k + self.k * self.n) * in_bytes + self.m * self.n * out_bytes


def _s(m, n, k, cls, note="", quick=False):
    return Shape(m, n, k, cls, note, quick)


SUITE: tuple[Shape, ...] = (
    # ---- decode: M activation rows x (K x N) weights ----
    _s(1, 4096, 4096, "decode", "Llama-2 7B attention projection, one token", quick=True),
    _s(8, 4096, 4096, "decode", "Llama-2 7B attention projection"),
    _s(16, 11008, 4096, "decode", "Llama-2 7B MLP up/gate", quick=True),
    _s(32, 4096, 11008, "decode", "Llama-2 7B MLP down"),
    _s(4, 14336, 4096, "decode", "Llama-3 8B MLP up/gate"),
    _s(64, 14336, 4096, "decode", "Llama-3 8B MLP up/gate"),
    _s(128, 4096, 14336, "decode", "Llama-3 8B MLP down", quick=True),
    _s(2, 5120, 5120, "decode", "Llama-2 13B attention projection"),
    _s(128, 5120, 5120, "decode", "Llama-2 13B attention projection"),
    _s(16, 8192, 8192, "decode", "Llama-3 70B attention projection"),
    _s(64, 8192, 8192, "decode", "Llama-3 70B attention projection"),
    _s(1, 28672, 8192, "decode", "Llama-3 70B MLP up/gate, one token"),
    _s(128, 28672, 8192, "decode", "Llama-3 70B MLP up/gate"),
    _s(4, 8192, 28672, "decode", "Llama-3 70B MLP down"),
    _s(1, 128256, 4096, "decode", "Llama-3 8B vocabulary head, one token"),
    _s(8, 128256, 4096, "decode", "Llama-3 8B vocabulary head"),
    # ---- prefill: M tokens through the same weights ----
    _s(512, 4096, 11008, "prefill", "Llama-2 7B MLP down", quick=True),
    _s(1024, 11008, 4096, "prefill", "Llama-2 7B MLP up/gate"),
    _s(2048, 4096, 4096, "prefill", "Llama-2 7B attention projection"),
    _s(3000, 5120, 5120, "prefill", "Llama-2 13B attention, a prompt of 3000 tokens"),
    _s(4096, 14336, 4096, "prefill", "Llama-3 8B MLP up/gate", quick=True),
    _s(8192, 4096, 14336, "prefill", "Llama-3 8B MLP down"),
    _s(512, 28672, 8192, "prefill", "Llama-3 70B MLP up/gate"),
    _s(16384, 8192, 8192, "prefill", "Llama-3 70B attention projection, 16k tokens"),
    # ---- squares, powers of two and not ----
    _s(128, 128, 128, "square"),
    _s(256, 256, 256, "square", quick=True),
    _s(512, 512, 512, "square"),
    _s(768, 768, 768, "square", "not a power of two"),
    _s(1024, 1024, 1024, "square", quick=True),
    _s(1536, 1536, 1536, "square", "not a power of two"),
    _s(2048, 2048, 2048, "square", quick=True),
    _s(3072, 3072, 3072, "square", "2.2 waves of 128x256 tiles on 132 SMs", quick=True),
    _s(4096, 4096, 4096, "square", quick=True),
    _s(6144, 6144, 6144, "square", "not a power of two"),
    _s(8192, 8192, 8192, "square", quick=True),
    _s(12288, 12288, 12288, "square", "not a power of two"),
    _s(16384, 16384, 16384, "square"),
    # ---- long K, small C ----
    _s(32, 32, 131072, "long_k", "one output tile"),
    _s(128, 128, 65536, "long_k", quick=True),
    _s(256, 256, 32768, "long_k"),
    _s(512, 512, 65536, "long_k"),
    _s(1024, 1024, 32768, "long_k"),
    # ---- tall and wide ----
    _s(16384, 1024, 1024, "tall", quick=True),
    _s(65536, 128, 4096, "tall"),
    _s(32768, 64, 2048, "tall"),
    _s(1024, 16384, 1024, "wide", quick=True),
    _s(256, 65536, 1024, "wide"),
    _s(64, 32768, 2048, "wide"),
    # ---- short K ----
    _s(4096, 4096, 128, "short_k", quick=True),
    _s(8192, 8192, 64, "short_k"),
    # ---- odd and prime sizes ----
    _s(17, 19, 23, "odd", "primes: one partial tile, all launch cost"),
    _s(257, 129, 2049, "odd", "tile + 1 everywhere", quick=True),
    _s(1000, 700, 900, "odd", "the README's example", quick=True),
    _s(127, 8191, 131, "odd", "Mersenne primes"),
    _s(2053, 3001, 1999, "odd", "primes"),
    _s(31, 4097, 4099, "odd", "decode-like, unaligned rows"),
    _s(4099, 4097, 4093, "odd", "primes around 4096", quick=True),
    _s(4096, 4096, 4100, "odd", "K not a multiple of the k-tile"),
    _s(8191, 8193, 4096, "odd", "M, N = 2^13 -/+ 1"),
)


def suite(quick: bool = False) -> list[Shape]:
    return [s for s in SUITE if s.quick or not quick]


# ---------------------------------------------------------------------------
# repetitions
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Policy:
    """How much each entry (one call path at one shape) is timed.

    ``one_call``: isolated calls (L2 flushed, synchronised, then one call
    timed from the call to the end of a synchronise), fewer when a call is
    long; back to back: ``rounds`` rounds (interleaved with the other entries
    of the shape) of ``batch`` calls between two events, the batch sized so
    that an entry spends about ``b2b_target_ms`` of GPU time in all."""
    one_call: int = 5
    one_call_long: int = 3          # when a call takes more than long_ms
    long_ms: float = 20.0
    rounds: int = 5
    rounds_long: int = 3
    b2b_target_ms: float = 50.0
    max_batch: int = 400
    min_batch: int = 2


POLICY = Policy()
QUICK_POLICY = Policy(one_call=3, one_call_long=2, rounds=3, rounds_long=2, b2b_target_ms=20.0,
                      max_batch=200)


def repetitions(est_ms: float, policy: Policy = POLICY) -> tuple[int, int, int]:
    """(isolated calls, rounds, batch) for an entry whose call takes about
    ``est_ms`` (the first untimed call's wall time is a good enough guess)."""
    est_ms = max(float(est_ms), 1e-3)
    long = est_ms > policy.long_ms
    one = policy.one_call_long if long else policy.one_call
    rounds = policy.rounds_long if long else policy.rounds
    batch = int(policy.b2b_target_ms / (rounds * est_ms))
    return one, rounds, max(policy.min_batch, min(policy.max_batch, batch))


def rotation_sets(bytes_per_set: int, l2_bytes: int, batch: int) -> int:
    """How many copies of A and B the calls cycle through, so that a call's
    operands were last touched more than twice the L2 size of traffic ago
    (a large problem is never timed on a warm cache); at most one per call of
    a batch, at least one."""
    if bytes_per_set <= 0:
        return 1
    need = math.ceil(2 * l2_bytes / bytes_per_set) + 1
    return max(1, min(need, max(1, batch)))


# ---------------------------------------------------------------------------
# time model (for choosing the policy; no GPU)
# ---------------------------------------------------------------------------
# What a call of each precision reaches on an H200 when it is large, the copy
# bandwidth, the host cost of a call and of an entry's bookkeeping (checks,
# synchronisations, event reads): rough on purpose, on the slow side.
_RATE = {"bf16": 550e12, "fp16": 550e12, "tf32": 250e12, "fp32": 40e12}
_IN_BYTES = {"bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4}
_BW = 3.0e12
_CALL_S = 60e-6
_ENTRY_S = 0.03
_SHAPE_S = 0.08           # inputs, reference rows, planning
ENTRIES = {"bf16": 5, "fp16": 5, "tf32": 3, "fp32": 2}   # drvgemm x C types + cuBLAS calls


def call_seconds(shape: Shape, precision: str) -> float:
    work = shape.flops / _RATE[precision]
    traffic = shape.min_bytes(_IN_BYTES[precision], 4) / _BW
    return max(work, traffic, _CALL_S)


def estimate_seconds(shapes, precisions=PRECISIONS, policy: Policy = POLICY) -> float:
    """The suite's expected wall time (compiles not counted: the disk cache
    holds them after the first run)."""
    total = 0.0
    for s in shapes:
        for p in precisions:
            t = call_seconds(s, p)
            one, rounds, batch = repetitions(t * 1e3, policy)
            calls = 1 + 1 + one + rounds * batch        # warm-up, check, isolated, batches
            total += _SHAPE_S + ENTRIES[p] * (_ENTRY_S + calls * t + one * 2 * _CALL_S)
    return total
