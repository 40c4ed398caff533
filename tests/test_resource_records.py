"""The resource records (tests/resource_records.py) held to the compiler of
today: a sample of them compiled on every run (the seed printed; set
DRVGEMM_RESOURCES_SEED to repeat one), an instantiation the record does not
hold compiled rather than looked up, and the record complete for the tests
that use it (else: python3 tests/resource_records.py)."""
import os
import random
import sys
from pathlib import Path

import pytest

from drvgemm.ladders.softmax import registry as smr
from drvgemm.runtime import compiler

sys.path.insert(0, str(Path(__file__).resolve().parent))
import resource_records as rr  # noqa: E402
import test_small_m_cpu as small_m_tests  # noqa: E402
import test_softmax_cpu as softmax_tests  # noqa: E402
import test_softmax_window_cpu as window_tests  # noqa: E402

SAMPLE = 4


def _same_toolchain():
    if rr.recorded_toolchain() != rr.toolchain():
        pytest.skip(f"the record was written with NVRTC {rr.recorded_toolchain()}, this is "
                    f"{rr.toolchain()}: no digest matches, so every instantiation compiles "
                    "(python3 tests/resource_records.py records this toolchain's)")


def _digest(r):
    return compiler.input_digest(r["source"], [r["entry"]], defines=r["defines"], arch=r["arch"],
                                 options=list(r["options"]))


def test_a_sample_of_the_records_is_what_the_compiler_says_today():
    _same_toolchain()
    current = [d for d, r in rr.records().items() if _digest(r) == d]
    assert current, "no record matches the tree: python3 tests/resource_records.py"
    seed = int(os.environ.get("DRVGEMM_RESOURCES_SEED", random.randrange(1 << 30)))
    print(f"resource records: seed {seed}")
    for d in random.Random(seed).sample(current, min(SAMPLE, len(current))):
        r = rr.records()[d]
        got = rr.compiled(r["source"], r["entry"], defines=r["defines"], arch=r["arch"],
                          options=r["options"])
        assert {f: getattr(got, f) for f in rr.FIELDS} == r["resources"], (seed, r)


def test_an_instantiation_the_record_does_not_hold_is_compiled(monkeypatch):
    cfg = smr.WINDOW_CONFIGS[0]
    defines = {**cfg.defines("fp32"), "RESOURCE_RECORDS_PROBE": 1}   # read by nothing
    monkeypatch.setattr(rr, "_records", {})
    calls = []
    real = rr.compiled
    monkeypatch.setattr(rr, "compiled", lambda *a, **k: calls.append(a) or real(*a, **k))
    got = rr.resources(cfg.source, cfg.entry, defines=defines, arch="sm_90")
    assert len(calls) == 1
    assert got == real(cfg.source, cfg.entry, defines=defines, arch="sm_90")


def test_a_recorded_instantiation_is_not_compiled(monkeypatch):
    d, r = next(iter(rr.records().items()))
    monkeypatch.setattr(compiler, "input_digest", lambda *a, **k: d)
    monkeypatch.setattr(rr, "compiled", lambda *a, **k: pytest.fail("compiled a recorded one"))
    got = rr.resources(r["source"], r["entry"], defines=r["defines"], arch=r["arch"])
    assert {f: getattr(got, f) for f in rr.FIELDS} == r["resources"]


def _recorded_cases():
    """(test case id, compile inputs) of every test that reads the record."""
    for p in window_tests._cases():
        yield p.id, window_tests.compile_inputs(*p.values)
    for p in softmax_tests._tight_cases():
        yield p.id, softmax_tests.tight_compile_inputs(*p.values)
    for inst in small_m_tests.INSTANCES:
        for arch in small_m_tests.ARCHS:
            yield f"{small_m_tests._id(inst)}-{arch}", small_m_tests.compile_inputs(inst, arch)


def test_the_record_holds_every_instantiation_its_tests_check():
    _same_toolchain()
    missing = []
    for case, (source, entry, defines, arch) in _recorded_cases():
        if compiler.input_digest(source, [entry], defines=defines, arch=arch) not in rr.records():
            missing.append(case)
    assert not missing, (f"{len(missing)} instantiations are not in {rr.RECORDS.name} "
                         f"(e.g. {missing[:3]}): python3 tests/resource_records.py")
