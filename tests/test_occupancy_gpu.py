"""The occupancy model against the driver: for drawn block sizes, register
caps, static and dynamic shared memory, named barriers and launch bounds,
the model's blocks per SM must equal cuOccupancyMaxActiveBlocksPerMultiprocessor
exactly, and so must its shared-memory edge and its best block size. Any
mismatch is fixed in the model's rules, never by a special case."""
import dataclasses
import functools

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import drvgemm
from drvgemm.runtime import driver
from drvgemm.runtime.compiler import arch_number
from drvgemm.analysis.occupancy import (SPECS, DeviceSpec, available_dynamic_smem, kernel_max_threads,
                               max_potential_block_size, model)
from drvgemm.ladders.gemm.registry import RUNGS

pytestmark = pytest.mark.gpu

# LIVE values are loaded before any is used, so they stay live in registers;
# STATIC_SMEM adds static shared memory, BAR_ID a named barrier (ptxas counts
# BAR_ID + 1 barriers), MAX_THREADS a __launch_bounds__.
PROBE = r"""
#if MAX_THREADS > 0
#define BOUNDS __launch_bounds__(MAX_THREADS)
#else
#define BOUNDS
#endif
extern "C" __global__ void BOUNDS occ_probe(const float* __restrict__ x, float* __restrict__ y,
                                            int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc[LIVE];
#pragma unroll
    for (int j = 0; j < LIVE; ++j) acc[j] = x[(i + j * 613) % n];
    float s = 0.0f;
#pragma unroll
    for (int r = 0; r < 3; ++r)
#pragma unroll
        for (int j = 0; j < LIVE; ++j) s = fmaf(s, acc[j], acc[(j * 5 + r) % LIVE]);
#if STATIC_SMEM > 0
    __shared__ float pad[STATIC_SMEM / 4];
    pad[threadIdx.x % (STATIC_SMEM / 4)] = s;
    __syncthreads();
    s += pad[(threadIdx.x + 1) % (STATIC_SMEM / 4)];
#endif
#if BAR_ID > 0
    asm volatile("bar.sync %0, %1;" :: "n"(BAR_ID), "r"(blockDim.x) : "memory");
#endif
    y[i] = s;
}
"""

# (LIVE, --maxrregcount, STATIC_SMEM, BAR_ID, MAX_THREADS); registers as
# ptxas 13 gives them for sm_90 in the comments.
VARIANTS = [
    (4, None, 0, 0, 0),          # 20 registers
    (24, None, 0, 0, 0),         # 40
    (64, None, 0, 0, 0),         # 80
    (130, None, 0, 0, 0),        # 167: not a multiple of 8
    (160, None, 0, 0, 0),        # 254
    (160, 37, 0, 0, 0),          # capped: 37
    (160, 100, 0, 0, 0),         # 100
    (160, 168, 0, 0, 0),         # 168
    (160, 200, 0, 0, 0),         # 199
    (16, None, 12340, 0, 0),     # static shared memory, not a multiple of 128
    (16, None, 0, 15, 0),        # 16 named barriers
    (16, None, 0, 3, 0),         # 4 named barriers
    (100, None, 0, 0, 256),      # __launch_bounds__(256)
    (16, None, 40000, 0, 384),   # static shared memory and launch bounds
]
SWEPT = [VARIANTS[i] for i in (0, 3, 5, 8, 9, 10)]


@functools.lru_cache(maxsize=None)
def probe(variant):
    live, cap, static, bar, bound = variant
    k = drvgemm.compile(PROBE, "occ_probe",
                        defines=dict(LIVE=live, STATIC_SMEM=static, BAR_ID=bar,
                                     MAX_THREADS=bound),
                        options=(f"--maxrregcount={cap}",) if cap else ())
    # Let the kernel take every byte a block may have, as drvgemm.launch does
    # on demand: the driver answers for the kernel's current limit, the model
    # for the launch that would happen.
    k.set_max_dynamic_smem(drvgemm.device().smem_per_block_optin - k.static_smem)
    return k


@functools.lru_cache(maxsize=None)
def device_spec():
    return DeviceSpec.from_device(drvgemm.device())


def model_of(k, threads, smem):
    r = k.resources
    return model(device_spec(), r.registers, threads, smem, r.static_smem, barriers=r.barriers,
                 max_threads_per_block=kernel_max_threads(k.ptx, k.entry))


def driver_blocks(k, threads, smem):
    return driver.occupancy_max_active_blocks(k.function, threads, smem)


def block_limit(k):
    return min(device_spec().max_threads_per_block,
               kernel_max_threads(k.ptx, k.entry) or 1 << 30)


def smem_edges(k, threads):
    """Dynamic sizes on both sides of every step of the shared-memory limit."""
    r, spec = k.resources, device_spec()
    most = spec.smem_per_block_optin - r.static_smem
    out = {0, most, max(0, spec.smem_per_block - r.static_smem)}
    for n in range(1, spec.max_blocks_per_sm + 1):
        d = available_dynamic_smem(spec, r.registers, threads, n, r.static_smem,
                                   barriers=r.barriers)
        if d is not None:
            out |= {d, min(d + 1, most)}
    return sorted(out)


def test_model_inputs_are_the_drivers(gpu):
    """The model reads ptxas's report; the driver its own attributes."""
    for v in VARIANTS:
        k = probe(v)
        attrs = k.attributes()
        assert k.resources.registers == attrs["num_regs"], v
        assert k.resources.static_smem == attrs["shared_size_bytes"], v


def test_largest_block_is_the_drivers_limit(gpu):
    """The largest block the model admits is the driver's per-kernel limit
    (registers spread over the partitions, or __launch_bounds__)."""
    for v in VARIANTS:
        k = probe(v)
        fits = max(t for t in range(1, 1025) if model_of(k, t, 0).blocks_per_sm)
        assert fits == k.attributes()["max_threads_per_block"], (v, str(k.resources))


def test_builtin_spec_matches_this_device(gpu):
    spec = device_spec()
    known = {(9, 0): "H200", (8, 0): "A100"}.get(tuple(gpu.cc))
    if known is None:
        pytest.skip(f"no built-in spec for sm_{gpu.cc[0]}{gpu.cc[1]}")
    assert dataclasses.replace(spec, name="", sm_count=None) == \
        dataclasses.replace(SPECS[known], name="", sm_count=None)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(variant=st.sampled_from(VARIANTS), data=st.data())
def test_model_equals_driver(gpu, variant, data):
    k = probe(variant)
    limit = block_limit(k)
    threads = data.draw(st.one_of(
        st.integers(1, limit),
        st.sampled_from([t for t in (32, 64, 96, 128, 160, 192, 256, 384, 512, 640, 768, 1024)
                         if t <= limit])), label="threads")
    most = device_spec().smem_per_block_optin - k.resources.static_smem
    smem = data.draw(st.one_of(st.integers(0, most), st.sampled_from(smem_edges(k, threads))),
                     label="smem")
    m = model_of(k, threads, smem)
    d = driver_blocks(k, threads, smem)
    assert d == m.blocks_per_sm, (f"{variant} ({k.resources}, {k.resources.barriers} "
                                  f"barriers), {threads} threads, {smem} B dynamic: driver {d}, "
                                  f"model {m.blocks_per_sm}\n{m.table()}")


@pytest.mark.parametrize("variant", SWEPT, ids=str)
def test_every_block_size(gpu, variant):
    k = probe(variant)
    static = k.resources.static_smem
    wrong = []
    for smem in (0, 20000, device_spec().smem_per_block - static):
        for t in range(1, block_limit(k) + 1):
            m, d = model_of(k, t, smem).blocks_per_sm, driver_blocks(k, t, smem)
            if m != d:
                wrong.append(f"{t} threads, {smem} B: driver {d}, model {m}")
    assert not wrong, f"{variant} ({k.resources}): {len(wrong)} mismatches, e.g.\n" + \
        "\n".join(wrong[:10])


@pytest.mark.parametrize("variant", [VARIANTS[i] for i in (0, 2, 9, 13)], ids=str)
@pytest.mark.parametrize("threads", [64, 256])
def test_available_dynamic_smem_is_the_drivers_edge(gpu, variant, threads):
    """The model's figure is the exact edge in the driver's own count: at it,
    n blocks fit; one byte more, they do not."""
    k = probe(variant)
    r, spec = k.resources, device_spec()
    if threads > block_limit(k):
        pytest.skip("block larger than the kernel allows")
    most = spec.smem_per_block_optin - r.static_smem
    top = model_of(k, threads, 0).blocks_per_sm
    assert top > 0
    for n in range(1, top + 1):
        d = available_dynamic_smem(spec, r.registers, threads, n, r.static_smem,
                                   barriers=r.barriers)
        assert driver_blocks(k, threads, d) >= n, (n, d)
        if d + 1 <= most:
            assert driver_blocks(k, threads, d + 1) < n, (n, d)
    # One block may have everything the opt-in allows, in both answers.
    assert driver.occupancy_available_dynamic_smem(k.function, 1, threads) == \
        available_dynamic_smem(spec, r.registers, threads, 1, r.static_smem,
                               barriers=r.barriers) == most


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_potential_block_size_equals_driver(gpu, variant):
    k = probe(variant)
    r = k.resources
    for smem in (0, 20000):
        want = tuple(driver.occupancy_max_potential_block_size(k.function, smem))
        got = max_potential_block_size(device_spec(), r.registers, smem, r.static_smem,
                                       barriers=r.barriers,
                                       max_threads_per_block=kernel_max_threads(k.ptx, k.entry))
        assert got == want, (variant, smem)


def test_occupancy_reports_the_driver(gpu):
    k = probe(VARIANTS[3])
    res = drvgemm.occupancy(k, 256, 30000)
    assert res.source == "driver" and res.driver_error is None
    assert res.agrees is True
    assert res.driver_blocks_per_sm == res.blocks_per_sm == res.model.blocks_per_sm
    assert "agrees" in str(res)


@pytest.mark.parametrize("rung", RUNGS, ids=lambda r: r.name)
def test_every_rung_agrees(gpu, rung):
    arch = gpu.arch
    if arch_number(rung.arch) > arch_number(arch):
        pytest.skip(f"{rung.name} needs {rung.arch}; the device is {arch}")
    if rung.arch.endswith("a"):
        arch = rung.arch
    from drvgemm.ladders.gemm.registry import rung_kernel
    k = rung_kernel(rung, True, arch=arch)
    res = drvgemm.occupancy(k, rung.block, rung.smem)
    assert res.driver_error is None, res.driver_error
    assert res.agrees, str(res)
    assert res.blocks_per_sm > 0, f"{rung.name} cannot run its own block:\n{res}"


def test_cluster_occupancy_from_the_driver(gpu):
    """cuOccupancyMaxActiveClusters for the Hopper rung's 2-block clusters: one
    384-thread block per SM, so at most sm_count / 2 clusters (fewer when the
    GPCs' SM counts are odd)."""
    import drvgemm
    from drvgemm.ladders.gemm.dispatch import rung
    from drvgemm.ladders.gemm.registry import rung_kernel
    if gpu.cc != (9, 0):
        pytest.skip("needs sm_90a")
    r = rung("20_tma_wgmma_bf16")
    k = rung_kernel(r, True)
    res = drvgemm.occupancy(k, r.block, r.smem, cluster=(2, 1, 1))
    assert res.cluster == (2, 1, 1)
    assert res.driver_active_clusters is not None
    assert gpu.sm_count // 4 <= res.driver_active_clusters <= gpu.sm_count // 2
    assert "clusters of 2x1x1 blocks" in str(res)


def test_occupancy_leaves_the_kernel_smem_limit_alone(gpu):
    """Asking the driver raises the opt-in limit only for the query."""
    k = drvgemm.compile("copy_occupancy.cu", "copy_occupancy")
    before = k.max_dynamic_smem
    r = drvgemm.occupancy(k, 256, 100 * 1024)
    assert r.driver_blocks_per_sm is not None
    assert k.max_dynamic_smem == before
    assert driver.function_attribute(k.function, "MAX_DYNAMIC_SHARED_SIZE_BYTES") == before
