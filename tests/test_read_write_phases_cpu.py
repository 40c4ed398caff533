"""The probe kernels of benchmarks/read_write_phases.py (cu/tools/read_write_phases.cu)
compile on the CPU as the benchmark builds them, and their machine code does what
the probe is about: a thread's loads all issue before its first store."""
import re

import pytest

import drvgemm
from drvgemm.runtime.sass import entry_instructions

THREADS = 512


def _build(entry, vecs, **extra):
    defines = dict(VECS=vecs, THREADS=THREADS, MIN_BLOCKS=2 if vecs <= 7 else 1, **extra)
    return drvgemm.compile("read_write_phases.cu", entry, defines=defines, arch="sm_90")


@pytest.mark.parametrize("entry", ["phases_local", "phases_global"])
@pytest.mark.parametrize("vecs", [4, 7, 14])
@pytest.mark.parametrize("extra", [{}, {"STREAMING": 0}, {"COMPUTE": 1}, {"COMPUTE": 2}],
                         ids=["default", "plain", "expf", "fast"])
def test_phase_probe_reads_all_before_it_writes(entry, vecs, extra):
    k = _build(entry, vecs, **extra)
    assert k.resources.spill_stores == 0 and k.resources.spill_loads == 0
    sass = entry_instructions(k.sass(), k.name)   # the module holds every entry
    loads = [i for i, line in enumerate(sass) if re.search(r"\bLDG\.E\S*\.128\b", line)]
    stores = [i for i, line in enumerate(sass) if re.search(r"\bSTG\.E\S*\.128\b", line)]
    assert len(loads) >= vecs and len(stores) >= vecs, (len(loads), len(stores))
    # the first pass's loads (the first vecs of them) come before its first store
    assert loads[vecs - 1] < stores[0]


@pytest.mark.parametrize("entry", ["stream_read", "stream_write", "stream_copy"])
def test_stream_probes_compile_without_spills(entry):
    k = drvgemm.compile("read_write_phases.cu", entry,
                        defines=dict(VECS=4, THREADS=THREADS, MIN_BLOCKS=1), arch="sm_90")
    assert k.resources.spill_stores == 0 and k.resources.spill_loads == 0


@pytest.mark.parametrize("vecs", [4, 8])
def test_group_load_probes_load_by_ldg_and_by_bulk_copies(vecs):
    """--groups' two ways of loading a chunk: LDG.128 into registers, or
    BULK_PIECES bulk copies (UBLKCP) into shared memory read back by LDS and
    no LDG; two 512-thread blocks an SM, no spills."""
    regs, bulk = (drvgemm.compile("read_write_phases.cu", e, arch="sm_90",
                                  defines=dict(VECS=vecs, THREADS=THREADS, MIN_BLOCKS=2))
                  for e in ("group_load_regs", "group_load_bulk"))
    for k in (regs, bulk):
        assert k.resources.spill_stores == 0 and k.resources.spill_loads == 0 and k.resources.stack == 0
    r = entry_instructions(regs.sass(), regs.name)
    b = entry_instructions(bulk.sass(), bulk.name)
    assert sum(bool(re.search(r"\bLDG\.E\S*\.128\b", i)) for i in r) == vecs
    assert sum("UBLKCP" in i for i in b) == 4 and not any("LDG" in i for i in b)
    assert sum(bool(re.search(r"\bLDS\.128\b", i)) for i in b) == vecs
