"""Dependent launches (Kernel.dependent_launch, cu/include/grid_dependency.cuh),
on the CPU: which kernels gemm() launches that way, and that their machine
code waits for the grid before them (ACQBULK, griddepcontrol.wait) before its
first global-memory instruction -- what makes the overlap with that grid safe."""
import pytest

from drvgemm.ladders.gemm import registry, split_k, staging
from drvgemm.runtime import sass
from drvgemm.runtime.kernel import dependent_launch_arch

# SASS opcodes that read or write global memory (loads, stores, atomics and
# reductions, cp.async, the copy engine's tensor and bulk copies)
GLOBAL_OPS = ("LDG", "STG", "LDGSTS", "ATOMG", "RED", "REDG", "UTMALDG", "UTMASTG", "UBLKCP",
              "UTMAREDG", "LD", "ST", "ATOM")


def _wait_comes_first(kernel):
    ops = [op.split(".")[0] for op in sass.opcodes(sass.disassemble(kernel.cubin))]
    assert "ACQBULK" in ops, f"{kernel.name}: no wait"
    first_global = next((i for i, op in enumerate(ops) if op in GLOBAL_OPS), len(ops))
    return ops.index("ACQBULK") < first_global


def test_dependent_launch_needs_sm_90():
    assert dependent_launch_arch("sm_90a") and dependent_launch_arch("sm_100")
    assert not dependent_launch_arch("sm_89") and not dependent_launch_arch("sm_80")


def test_the_hosts_that_launch_dependent_kernels():
    """Rung 20's and rung 30's host sides; the plain signature's rungs are
    launched as before."""
    for r in registry.RUNGS:
        assert r.host_side.dependent_launch is (r.host in ("tma", "small_m")), r.name


@pytest.mark.parametrize("name, split_k", [
    ("20_tma_wgmma_bf16", False), ("20_tma_wgmma_bf16", True),
    ("20_tma_wgmma_bf16_16x64", True), ("20_tma_wgmma_tf32", False),
    ("30_small_m_bf16", False), ("30_small_m_fp32", False)])
def test_gemm_kernels_wait_before_touching_global_memory(name, split_k):
    r = registry.by_name()[name]
    k = registry.rung_kernel(r, True, narrow_output=r.narrow_output, split_k=split_k)
    assert k.dependent_launch is True
    assert _wait_comes_first(k)


def test_helper_kernels_wait_before_touching_global_memory():
    for k in (staging.pad_kernel(2), staging.pad_kernel(4), split_k.reduce_kernel("fp32"),
              split_k.reduce_kernel("bf16", deep=True)):
        assert k.dependent_launch is True
        assert _wait_comes_first(k), k.name


def test_plain_rungs_are_not_dependent_launches():
    r = registry.by_name()["08_warp_tiled"]
    k = registry.rung_kernel(r, True)
    assert k.dependent_launch is False
    assert "ACQBULK" not in {op.split(".")[0] for op in sass.opcodes(sass.disassemble(k.cubin))}


def _softmax_entries():
    """One catalogue config per softmax entry (label, source, entry, defines, arch)."""
    from drvgemm.ladders.softmax import registry as sreg
    seen = {}
    for label, source, entry, defines, arch in sreg.catalogue():
        seen.setdefault(entry, (label, source, entry, defines, arch))
    return list(seen.values())


@pytest.mark.parametrize("label, source, entry, defines, arch", _softmax_entries(),
                         ids=lambda v: v if isinstance(v, str) and v.startswith("softmax_") else "")
def test_softmax_kernels_wait_where_the_registry_says(label, source, entry, defines, arch):
    """Kernels of DEPENDENT_LAUNCH_SOURCES are dependent launches and wait
    before their first global-memory instruction (rung 09's split rows too,
    a cooperative launch); the others (the teaching rungs) have no wait."""
    from drvgemm.ladders.softmax import dispatch as sdisp
    from drvgemm.ladders.softmax.registry import DEPENDENT_LAUNCH_SOURCES
    k = sdisp.compiled(source, entry, tuple(sorted(defines.items())), arch or "sm_90")
    ops = {op.split(".")[0] for op in sass.opcodes(sass.disassemble(k.cubin))}
    if source in DEPENDENT_LAUNCH_SOURCES:
        assert k.dependent_launch is True
        assert _wait_comes_first(k), label
    else:
        assert k.dependent_launch is False and "ACQBULK" not in ops, label
