"""Dependent launches on the GPU (marked gpu; skipped with the reason when
there is none): a gemm() or softmax() whose kernels are launched with
programmatic stream serialization still sees what the kernel before it in
the stream wrote. The writer below lets the next grid launch at once
(griddepcontrol.launch_dependents) and writes its output only after holding
its stream for a while, so a dependent kernel that read before its
griddepcontrol.wait would read the old values -- in eager launches and in a
captured graph."""
import ml_dtypes
import numpy as np
import pytest

import drvgemm
from drvgemm.ladders.gemm.registry import by_name, rung_kernel

pytestmark = pytest.mark.gpu

LATE_WRITER = r'''
extern "C" __global__ void late_fill(unsigned short* p, long long n, long long period,
                                     unsigned short v, unsigned long long ns) {
    // The next grid may start now; this one writes only after ``ns`` of wall
    // time: v where i % period == 0, zero elsewhere.
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        p[i] = i % period == 0 ? v : 0;
}
'''
ONE_BF16 = 0x3F80       # 1.0 in bfloat16
SPIN_NS = 2_000_000     # 2 ms: far longer than any launch latency


@pytest.fixture(scope="module")
def writer(gpu):
    if gpu.cc < (9, 0):
        pytest.skip(f"dependent launches need sm_90; this GPU is {gpu.arch}")
    return drvgemm.compile(LATE_WRITER, "late_fill")


def _late_ones(writer, x, period=1):
    """Enqueue the writer: x (bf16) = 1.0 at every ``period``-th element, 0
    elsewhere, written 2 ms after the next launch was allowed to start."""
    drvgemm.launch(writer, 132, 256, (x, x.nbytes // 2, period, ONE_BF16, SPIN_NS))


@pytest.mark.parametrize("m, n, k, kernel", [
    (256, 256, 512, "auto"),                         # rung 20, 64 x 128
    (1, 4096, 1024, "20_tma_wgmma_bf16_16x64"),      # the swapped tile
    (128, 128, 8192, "20_tma_wgmma_bf16_128x128"),   # split K, folded or reduced
    (8, 640, 1024, "30_small_m_bf16"),               # rung 30
    (130, 129, 70, "auto"),                          # staged operands (the padding copy)
])
def test_gemm_reads_what_the_kernel_before_wrote(writer, m, n, k, kernel):
    a = np.ones((m, k), ml_dtypes.bfloat16)
    A = drvgemm.to_device(a)
    B = drvgemm.to_device(np.zeros((k, n), ml_dtypes.bfloat16))
    C = drvgemm.to_device(np.full((m, n), np.nan, np.float32))
    drvgemm.gemm(A, B, C, kernel=kernel)      # compiled and planned: B is zero here
    drvgemm.synchronize()
    r = by_name().get(kernel)
    if r is not None:
        assert rung_kernel(r, True, split_k=False).dependent_launch
    for _ in range(2):
        B.fill_bytes(0)
        drvgemm.synchronize()
        _late_ones(writer, B)
        drvgemm.gemm(A, B, C, kernel=kernel)
        assert (C.to_host() == k).all(), "the GEMM read B before the writer finished"


@pytest.mark.parametrize("rows, cols", [
    (4096, 1000),      # rung 07
    (4096, 127),       # rung 10
    (65536, 2),        # rung 04, packed rows
    (64, 50257),       # rung 08, a cluster a row
    (4, 1048576),      # rung 09, split rows: cooperative and dependent
])
def test_softmax_reads_what_the_kernel_before_wrote(writer, rows, cols):
    """x = 1 in column 0 and 0 elsewhere, written late: each row's softmax is
    e / (e + cols - 1) there and 1 / (e + cols - 1) elsewhere; the zeros x
    held before give 1 / cols."""
    x = drvgemm.to_device(np.zeros((rows, cols), ml_dtypes.bfloat16))
    y = drvgemm.to_device(np.zeros((rows, cols), ml_dtypes.bfloat16))
    drvgemm.softmax(x, out=y)             # compiled and planned
    drvgemm.synchronize()
    denom = np.e + cols - 1
    for _ in range(2):
        x.fill_bytes(0)
        y.fill_bytes(0)
        drvgemm.synchronize()
        _late_ones(writer, x, period=cols)
        drvgemm.softmax(x, out=y)
        got = y.to_host().astype(np.float32)
        np.testing.assert_allclose(got[:, 0], np.e / denom, rtol=2e-2)
        np.testing.assert_allclose(got[:, 1:], 1.0 / denom, rtol=2e-2)


def test_split_rows_back_to_back_share_their_counters_in_order(gpu):
    """Rung 09's launches on one stream share the workspace's counters, which
    the last block of a launch resets: eight split-row softmaxes back to back
    (each may start its blocks while the one before finishes) each give
    their own rows' softmax."""
    from drvgemm.ladders.softmax.dispatch import reference
    rng = np.random.default_rng(9)
    rows, cols = 3, 777_777
    xs = [rng.standard_normal((rows, cols), np.float32) * (i + 1) for i in range(8)]
    dx = [drvgemm.to_device(x) for x in xs]
    dy = [drvgemm.to_device(np.full((rows, cols), np.nan, np.float32)) for _ in xs]
    from drvgemm.ladders.softmax.plan import plan
    assert plan(rows, cols).split > 1, "the shape must take rung 09's split rows"
    for _ in range(2):
        for x, y in zip(dx, dy):
            drvgemm.softmax(x, out=y)
        for x, y in zip(xs, dy):
            np.testing.assert_allclose(y.to_host(), reference(x), rtol=1e-5, atol=1e-12)


def test_a_captured_graph_keeps_the_order(writer):
    m, n, k = 64, 256, 512
    A = drvgemm.to_device(np.ones((m, k), ml_dtypes.bfloat16))
    B = drvgemm.to_device(np.zeros((k, n), ml_dtypes.bfloat16))
    C = drvgemm.to_device(np.full((m, n), np.nan, np.float32))
    drvgemm.gemm(A, B, C)
    drvgemm.synchronize()
    with drvgemm.graph() as g:
        _late_ones(writer, B)
        drvgemm.gemm(A, B, C)
    for _ in range(2):
        B.fill_bytes(0)
        C.fill_bytes(0xFF)
        drvgemm.synchronize()
        g.replay()
        g.synchronize()
        assert (C.to_host() == k).all()
    g.close()
