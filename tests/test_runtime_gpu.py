"""Function attributes, cooperative launches, graphs, stream order with a
busy stream, a GEMM taller than one grid, on the GPU (marked gpu; skipped
with the reason when there is none)."""
import numpy as np
import pytest

import drvgemm
from drvgemm.ladders.gemm.registry import by_name
from drvgemm.ladders.softmax.dispatch import reference
from drvgemm.runtime import driver
from drvgemm.runtime.launch import cooperative_limit

pytestmark = pytest.mark.gpu

SPIN = r'''
extern "C" __global__ void spin(unsigned long long ns) {
    // Holds its stream for ``ns`` nanoseconds of wall time (%globaltimer).
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
extern "C" __global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
'''

# Every block writes its slot, the whole grid syncs, then each block reads its
# neighbour's slot: right only if every block passed the barrier together.
GRID_SYNC_CG = r'''
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void neighbour(int* slots, int* out) {
    cg::grid_group g = cg::this_grid();
    int b = blockIdx.x, n = gridDim.x;
    if (threadIdx.x == 0) slots[b] = b * 3 + 1;
    g.sync();
    if (threadIdx.x == 0) out[b] = slots[(b + 1) % n];
}
'''
GRID_SYNC_ATOMIC = r'''
extern "C" __global__ void neighbour(int* slots, int* out) {
    // A one-shot grid barrier: correct only when every block is resident at
    // once, which a cooperative launch guarantees. slots[gridDim.x] counts.
    int b = blockIdx.x, n = gridDim.x;
    if (threadIdx.x == 0) {
        slots[b] = b * 3 + 1;
        __threadfence();
        atomicAdd(&slots[n], 1);
        while (atomicAdd(&slots[n], 0) < n) { }
        __threadfence();
        out[b] = slots[(b + 1) % n];
    }
}
'''


@pytest.fixture(scope="module")
def kernels(gpu):
    return {n: drvgemm.compile(SPIN, n) for n in ("spin", "add_one")}


@pytest.fixture(scope="module")
def neighbour(gpu):
    try:
        return drvgemm.compile(GRID_SYNC_CG, "neighbour"), "cg"
    except drvgemm.CompileError:      # no cooperative_groups header reachable
        return drvgemm.compile(GRID_SYNC_ATOMIC, "neighbour"), "atomic"


# ---------------------------------------------------------------------------
def test_attributes_read_set_and_occupancy_changes_none(kernels):
    k = drvgemm.compile("saxpy.cu", "saxpy")
    a = k.attributes
    assert {"num_regs", "max_threads_per_block", "max_dynamic_shared_size_bytes",
            "preferred_shared_memory_carveout", "required_cluster_width",
            "non_portable_cluster_size_allowed"} <= set(a)
    assert k.attributes()["num_regs"] == a["num_regs"] > 0
    before = dict(k.attributes)
    drvgemm.occupancy(k, 256, smem=64 * 1024)
    drvgemm.occupancy(k, 128, smem=0, cluster=(2, 1, 1))
    assert dict(k.attributes) == before                    # no side effects
    k.set_attribute("preferred_shared_memory_carveout", 50)
    assert k.attributes["preferred_shared_memory_carveout"] == 50
    k.set_attribute("max_dynamic_shared_size_bytes", 100_000)
    assert k.attributes["max_dynamic_shared_size_bytes"] == 100_000 == k.max_dynamic_smem
    k.set_attribute("max_dynamic_shared_size_bytes", 1000)   # lowering works too
    assert k.attributes["max_dynamic_shared_size_bytes"] == 1000
    with pytest.raises(ValueError, match="read-only"):
        k.set_attribute("num_regs", 8)
    # A launch above the lowered limit opts in again by itself.
    x = drvgemm.to_device(np.ones(64, np.float32))
    drvgemm.launch(k, 1, 64, (2.0, x, x, 64), smem=50_000)
    drvgemm.synchronize()
    assert (x.to_host() == 3).all()


def test_cooperative_launch_with_grid_sync(neighbour, gpu):
    k, kind = neighbour
    limit, _ = cooperative_limit(k, 128, 0)
    assert limit >= gpu.sm_count
    n = limit
    slots = drvgemm.to_device(np.zeros(n + 1, np.int32))
    out = drvgemm.to_device(np.zeros(n, np.int32))
    b = np.arange(n)
    # the first launch is checked in Python; the next ones take the C path's
    # cooperative launcher where it is built
    for _ in range(3):
        slots.fill_bytes(0)
        out.fill_bytes(0)
        drvgemm.launch(k, n, 128, (slots, out), cooperative=True)
        drvgemm.synchronize()
        assert (out.to_host() == ((b + 1) % n) * 3 + 1).all(), kind
    if drvgemm.launch_path() == "C":
        assert (n, 128, 0, None, "cooperative") in k.fast_launchers
    with pytest.raises(ValueError, match=f"{n + 1} blocks, but at most {n}.*grid-wide sync"):
        drvgemm.launch(k, n + 1, 128, (slots, out), cooperative=True)


def test_graph_captures_launches_and_gemm_and_replays(kernels):
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, (96, 64)).astype(np.float32)
    b = rng.integers(-4, 5, (64, 80)).astype(np.float32)
    A, B = drvgemm.to_device(a), drvgemm.to_device(b)
    C = drvgemm.to_device(np.full((96, 80), np.nan, np.float32))
    x = drvgemm.to_device(np.zeros(1000, np.float32))
    drvgemm.gemm(A, B, C)                                # compiled and planned outside
    C.fill_bytes(0xFF)
    drvgemm.synchronize()
    with drvgemm.graph() as g:
        drvgemm.launch(kernels["add_one"], 4, 256, (x, 1000))           # stream=None: captured
        drvgemm.launch(kernels["add_one"], 4, 256, (x, 1000), stream=g.stream)
        drvgemm.gemm(A, B, C)                                            # no stream: captured
        D = drvgemm.gemm(A, B)                           # allocates its C during capture
    drvgemm.synchronize()
    assert (x.to_host() == 0).all()                      # captured, not run
    assert g.nodes >= 4
    for rep in range(1, 4):
        g.replay()
        g.synchronize()
        assert (x.to_host() == 2 * rep).all()
        np.testing.assert_array_equal(C.to_host(), a.astype(np.float64) @ b)
        np.testing.assert_array_equal(D.to_host(), a.astype(np.float64) @ b)
    del D                        # the graph keeps the memory it writes to
    g.replay()
    g.synchronize()
    assert (x.to_host() == 8).all()
    g.close()


def test_graph_refuses_host_operands(gpu):
    with pytest.raises(ValueError, match="graph cannot move host data"):
        with drvgemm.graph():
            drvgemm.gemm(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32))


def _busy(kernels, stream, ms):
    drvgemm.launch(kernels["spin"], 1, 1, (int(ms * 1e6),), stream=stream)


def test_gemm_and_softmax_with_host_operands_on_a_busy_stream(kernels):
    """The caller's stream is busy for 300 ms when the call comes: the uploads,
    the launch and the result copy all queue behind that work, and the
    result is right."""
    rng = np.random.default_rng(2)
    a = rng.integers(-4, 5, (300, 200)).astype(np.float32)
    b = rng.integers(-4, 5, (200, 130)).astype(np.float32)
    c = rng.integers(-4, 5, (300, 130)).astype(np.float32)
    want = a.astype(np.float64) @ b + 0.5 * c
    drvgemm.gemm(a, b)                                   # compile outside the timed part
    s = drvgemm.Stream()
    for _ in range(2):
        _busy(kernels, s, 300)
        out = drvgemm.gemm(a, b, c.copy(), beta=0.5, stream=s)
        np.testing.assert_array_equal(out, want)
        _busy(kernels, s, 300)
        got = drvgemm.gemm(a, b, stream=s)
        np.testing.assert_array_equal(got, a.astype(np.float64) @ b)
    x = rng.standard_normal((64, 3000)).astype(np.float32)
    _busy(kernels, s, 300)
    y = drvgemm.softmax(x, stream=s)
    np.testing.assert_allclose(y, reference(x), rtol=5e-5, atol=1e-8)


@pytest.mark.parametrize("name, k, n", [("01_naive", 5, 3), ("04_reg_tiled", 4, 4)])
def test_gemm_taller_than_one_grid(gpu, name, k, n):
    """M above 65535 tiles of the rung's tile rows: several launches over
    bands of rows, exact with small integers (04: the aligned instantiation,
    whose vector loads need the bands' offsets to keep 16-byte alignment)."""
    r = by_name()[name]
    m = 65535 * r.tile_m + 37
    free, _ = driver.memory_info()
    if free < 4 * m * (k + n) * 4:
        pytest.skip("not enough device memory")
    rng = np.random.default_rng(3)
    a = rng.integers(-3, 4, (m, k)).astype(np.float32)
    b = rng.integers(-3, 4, (k, n)).astype(np.float32)
    got = drvgemm.gemm(drvgemm.to_device(a), drvgemm.to_device(b), kernel=name).to_host()
    np.testing.assert_array_equal(got, a.astype(np.float64) @ b)
