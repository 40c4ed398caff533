"""The occupancy model with no GPU: the seed's worked table, hand-derived
H200/A100 answers, properties that must hold for any input, the CLI and
``drvgemm.occupancy`` on the no-GPU path."""
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

import drvgemm
from drvgemm.runtime import driver
from drvgemm.analysis.occupancy import (SPECS, DeviceSpec, available_dynamic_smem, get_spec,
                                        kernel_max_threads, max_potential_block_size, model,
                                        parse_size)
from drvgemm.analysis.roofline import bytes_in_flight

H200, A100, SEED = SPECS["H200"], SPECS["A100"], SPECS["seed"]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_gpu(monkeypatch):
    """Force the no-GPU path, also on a machine that has one."""
    monkeypatch.setattr(driver, "has_gpu", lambda: False)
    monkeypatch.setattr(driver, "no_gpu_reason", lambda: "forced by the test")


# ---------------------------------------------------------------------------
# the seed's table: 48 warps/SM, 100 KB shared memory, 64-thread blocks
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("smem, smem_limit, blocks, warps, percent, limiter", [
    (1000, 102, 24, 48, 100.0, "warps"),
    (10000, 10, 10, 20, 41.7, "shared memory"),
    (30000, 3, 3, 6, 12.5, "shared memory"),
])
def test_seed_table(smem, smem_limit, blocks, warps, percent, limiter):
    o = model(SEED, 0, 64, smem)   # registers not counted, as in the seed
    assert o.limits["shared memory"] == smem_limit == 102400 // smem
    assert o.limits["warps"] == 24
    assert o.blocks_per_sm == blocks
    assert o.active_warps == warps
    assert o.max_warps == 48
    assert round(o.occupancy * 100, 1) == percent
    assert o.limiter == limiter


def test_seed_littles_law_example():
    # 800 cycles at 2175 MHz, 360 GB/s: 132,414 bytes in flight.
    assert round(bytes_in_flight(800 / 2.175e9, 360e9)) == 132414


# ---------------------------------------------------------------------------
# hand-derived answers for the H200 (sm_90) and A100 (sm_80)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("regs, threads, dyn, static, blocks, limiter", [
    # 128 regs x 32 lanes = 4096 per warp; a 16384-register partition holds
    # 4 such warps, 16 per SM = 2 blocks of 8 warps.
    (128, 256, 0, 0, 2, "registers"),
    (64, 256, 0, 0, 4, "registers"),
    (32, 256, 0, 0, 8, "warps"),                 # 64 warp slots / 8 = 100%
    (100, 256, 0, 0, 2, "registers"),            # rounds up to 104 -> 3328/warp: 4 per partition
    (64, 1024, 0, 0, 1, "registers"),
    (72, 1024, 0, 0, 0, "block size"),           # 2304 x 32 warps = 73728 > 65536
    # 6144 per warp: 2 fit a partition (not 2.67), 8 warps per SM = 4 blocks,
    # where dividing the whole file (65536 / 6144 = 10 warps) would say 5.
    (192, 64, 0, 0, 4, "registers"),
    (16, 32, 0, 0, 32, "blocks"),                # 32 block slots x 1 warp = 50%
    (32, 128, 48 * 1024, 0, 4, "shared memory"),  # 49 KiB each into 228 KiB
    (32, 128, 100 * 1024, 0, 2, "shared memory"),
    (32, 128, 232448, 0, 1, "shared memory"),    # the opt-in maximum: exactly the SM
    (32, 128, 232449, 0, 0, "block size"),
    (32, 128, 1000, 0, 16, "warps"),             # 2024 B -> 2048 allocated: 114 fit
    (32, 128, 100_000, 12_000, 2, "shared memory"),  # 113,024 B each
    (32, 100, 0, 0, 16, "warps"),                # 100 threads take 4 warps, like 128
    (32, 2048, 0, 0, 0, "block size"),
])
def test_h200_known_answers(regs, threads, dyn, static, blocks, limiter):
    o = model(H200, regs, threads, dyn, static)
    assert (o.blocks_per_sm, o.limiter) == (blocks, limiter)


def test_h200_smem_allocation_arithmetic():
    o = model(H200, 32, 128, 1000)
    assert o.smem_per_block == 2048                # 1000 + 1024 reserved, in 128 B units
    assert o.limits["shared memory"] == 233472 // 2048 == 114
    assert model(H200, 32, 128, 0).limits["shared memory"] == 228   # the reservation alone


def test_a100_and_spec_differences():
    assert model(A100, 32, 256, 48 * 1024).blocks_per_sm == 3      # 164 KiB / 49 KiB
    assert model(H200, 32, 256, 48 * 1024).blocks_per_sm == 4
    # Barrier slots count from sm_90 on only.
    assert model(H200, 32, 64, 0, barriers=16).limits["barriers"] == 4
    assert model(H200, 32, 64, 0, barriers=16).limiter == "barriers"
    assert model(A100, 32, 64, 0, barriers=16).limits["barriers"] is None


def test_opt_in_and_carveout():
    assert model(H200, 32, 128, 48 * 1024 + 1, opt_in=False).limiter == "block size"
    assert model(H200, 32, 128, 48 * 1024, opt_in=False).blocks_per_sm == 4
    # 25% of 228 KiB = 57 KiB, rounded up to the 64 KiB configuration.
    o = model(H200, 32, 256, 16 * 1024, carveout=25)
    assert (o.smem_per_sm, o.blocks_per_sm) == (64 * 1024, 3)
    # A preference too small for one block is overridden by the smallest
    # configuration that holds one.
    o = model(H200, 32, 256, 16 * 1024, carveout=0)
    assert (o.smem_per_sm, o.blocks_per_sm) == (32 * 1024, 1)


def test_carveout_used_is_the_smallest_that_holds_the_blocks():
    o = model(H200, 128, 256, 0)             # 2 blocks x 1 KiB
    assert o.carveout_used == 8 * 1024
    o = model(H200, 32, 128, 48 * 1024)      # 4 x 49 KiB = 196 KiB
    assert o.carveout_used == 196 * 1024


def test_advice_names_the_fix():
    o = model(H200, 128, 256, 48 * 1024)
    text = "\n".join(o.advice())
    assert "registers bind: 2 blocks; <= 80 registers/thread would give 3, " \
           "<= 64 would give 4" in text
    # Each figure is the largest register count reaching that step.
    for r, n in ((80, 3), (64, 4)):
        assert model(H200, r, 256, 48 * 1024).blocks_per_sm == n
        assert model(H200, r + 1, 256, 48 * 1024).blocks_per_sm < n
    o = model(H200, 32, 128, 100 * 1024)
    (line,) = o.advice()
    m = re.search(r"<= ([\d,]+ (?:KiB|B)) dynamic/block would give (\d+)", line)
    assert m, line
    d, n = parse_size(m.group(1).replace(",", "")), int(m.group(2))
    assert model(H200, 32, 128, d).blocks_per_sm == n > o.blocks_per_sm
    assert model(H200, 32, 128, d + 1).blocks_per_sm < n
    full = model(H200, 32, 256, 0)
    assert "100%" in full.advice()[0]
    assert "blocks of <= 256 threads" in model(H200, 255, 512, 0).advice()[0]


def test_table_marks_the_limiter():
    text = model(H200, 128, 256, 48 * 1024).table()
    (row,) = [ln for ln in text.splitlines() if ln.startswith("registers")]
    assert row.endswith("<- binds") and " 2 " in row
    assert "occupancy 25.0%" in text


# ---------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------
specs = st.sampled_from([H200, A100, SEED])
regs = st.integers(0, 255)
threads = st.integers(1, 1024)
smem = st.integers(0, 240_000)
static = st.integers(0, 48 * 1024)
carve = st.one_of(st.none(), st.integers(0, 100))


@settings(max_examples=300)
@given(specs, regs, regs, threads, smem, static, carve)
def test_monotone_in_registers(spec, r1, r2, t, d, s, c):
    lo, hi = sorted((r1, r2))
    if lo == 0:
        lo = 1
        hi = max(hi, 1)
    assert model(spec, lo, t, d, s, carveout=c).blocks_per_sm >= \
        model(spec, hi, t, d, s, carveout=c).blocks_per_sm


@settings(max_examples=300)
@given(specs, regs, threads, smem, smem, static, carve)
def test_monotone_in_shared_memory(spec, r, t, d1, d2, s, c):
    # A carveout preference only means something on a device with discrete
    # carveout sizes; the seed's example device has none (its 100 KB is all
    # there is), and there a preference below one block jumps to the whole.
    if spec is SEED:
        c = None
    lo, hi = sorted((d1, d2))
    assert model(spec, r, t, lo, s, carveout=c).blocks_per_sm >= \
        model(spec, r, t, hi, s, carveout=c).blocks_per_sm
    # Static and dynamic shared memory cost the same.
    assert model(spec, r, t, lo, hi - lo, carveout=c).blocks_per_sm == \
        model(spec, r, t, hi, 0, carveout=c).blocks_per_sm


@settings(max_examples=300)
@given(specs, regs, threads, smem, static, carve, st.integers(0, 16))
def test_never_above_hardware_limits(spec, r, t, d, s, c, bars):
    o = model(spec, r, t, d, s, carveout=c, barriers=bars)
    assert 0 <= o.blocks_per_sm <= spec.max_blocks_per_sm
    assert o.active_warps <= spec.max_warps_per_sm
    assert o.blocks_per_sm * o.warps_per_block * spec.warp_size <= spec.max_threads_per_sm
    assert o.blocks_per_sm * o.regs_per_block <= spec.regs_per_sm
    assert o.blocks_per_sm * o.smem_per_block <= o.smem_per_sm <= spec.smem_per_sm
    assert 0.0 <= o.occupancy <= 1.0
    if o.blocks_per_sm:
        assert t <= spec.max_threads_per_block
        assert s + d <= spec.smem_per_block_optin
        assert r <= spec.max_regs_per_thread


@settings(max_examples=300)
@given(specs, regs, threads, smem, static, carve, st.integers(0, 16))
def test_limiter_is_the_minimum(spec, r, t, d, s, c, bars):
    o = model(spec, r, t, d, s, carveout=c, barriers=bars)
    counted = {k: v for k, v in o.limits.items() if v is not None}
    assert o.blocks_per_sm == min(counted.values())
    assert o.limits[o.limiter] == o.blocks_per_sm
    assert set(o.limiters) == {k for k, v in counted.items() if v == o.blocks_per_sm}
    assert (o.limiter == "block size") == (o.blocks_per_sm == 0)
    assert bool(o.reason) == (o.blocks_per_sm == 0)
    assert o.advice()          # every answer explains itself


@settings(max_examples=100)
@given(st.sampled_from([H200, A100]), st.integers(1, 255), st.integers(1, 1024),
       st.integers(0, 20_000), st.integers(1, 32))
def test_available_dynamic_smem_is_the_exact_edge(spec, r, t, s, n):
    d = available_dynamic_smem(spec, r, t, n, s)
    if d is None:
        assert model(spec, r, t, 0, s).blocks_per_sm < n
        return
    assert model(spec, r, t, d, s).blocks_per_sm >= n
    assert model(spec, r, t, d + 1, s).blocks_per_sm < n


@settings(max_examples=25)
@given(st.sampled_from([H200, A100]), st.integers(1, 255), st.integers(0, 60_000),
       st.one_of(st.none(), st.integers(1, 1024)))
def test_potential_block_size_is_best(spec, r, d, bound):
    grid, block = max_potential_block_size(spec, r, d, max_threads_per_block=bound)
    resident = {t: t * model(spec, r, t, d, max_threads_per_block=bound).blocks_per_sm
                for t in range(1, 1025)}
    best = max(resident.values())
    if best == 0:
        assert (grid, block) == (0, 0)
        return
    assert resident[block] == best
    assert grid == spec.sm_count * model(spec, r, block, d).blocks_per_sm


def test_device_spec_from_device_properties():
    props = dict(name="NVIDIA H200", cc=(9, 0), sm_count=132, smem_per_sm=233472,
                 smem_per_block=49152, smem_per_block_optin=232448, smem_reserved_per_block=1024,
                 regs_per_sm=65536, regs_per_block=65536, max_threads_per_sm=2048,
                 max_threads_per_block=1024, max_blocks_per_sm=32, warp_size=32)
    props_obj = type("Props", (), props)()
    spec = DeviceSpec.from_device(props_obj)
    assert dataclasses.replace(spec, name="H200") == H200
    a = DeviceSpec.from_device(type("Props", (), {**props, "cc": (8, 0), "smem_per_sm": 167936,
                                                  "smem_per_block_optin": 166912,
                                                  "sm_count": 108})())
    assert dataclasses.replace(a, name="A100") == A100


def test_spec_validation_and_lookup():
    assert get_spec("h200") is H200
    with pytest.raises(ValueError, match="no built-in device spec"):
        get_spec("V100")
    with pytest.raises(ValueError, match="multiple of the warp size"):
        dataclasses.replace(H200, max_threads_per_sm=2000)
    with pytest.raises(ValueError, match="block_threads"):
        model(H200, 32, 0)
    with pytest.raises(ValueError, match="regs_per_thread"):
        model(H200, -1, 32)


@pytest.mark.parametrize("text, value", [("48K", 49152), ("48KiB", 49152), ("48 KB", 49152),
                                         ("1000", 1000), (1000, 1000), ("1.5k", 1536),
                                         ("2M", 2 << 20), ("0", 0)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("bad", ["", "K", "-3", "1.1", "48 GB", "lots"])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_kernel_max_threads_from_ptx():
    ptx = (".visible .entry a(\n\t.param .u64 a_param_0\n)\n.maxntid 256, 1, 1\n"
           ".minnctapersm 2\n{\n ret;\n}\n"
           ".visible .entry ab(\n)\n.reqntid 16, 8, 1\n{\n ret;\n}\n"
           ".visible .entry c\n{\n ret;\n}\n")
    assert kernel_max_threads(ptx, "a") == 256
    assert kernel_max_threads(ptx, "ab") == 128
    assert kernel_max_threads(ptx, "c") is None


# ---------------------------------------------------------------------------
# a compiled kernel with no GPU
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def copy_kernel():
    return drvgemm.compile("copy_occupancy.cu", "copy_occupancy", defines={"UNROLL": 4},
                           arch="sm_90")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("entry", ["copy_occupancy", "chase_latency"])
def test_copy_kernels_compile_without_spills(arch, entry):
    k = drvgemm.compile("copy_occupancy.cu", entry, arch=arch)
    assert k.resources.spill_stores == k.resources.spill_loads == 0
    assert k.resources.registers <= 64


def test_occupancy_of_a_kernel_without_gpu(no_gpu, copy_kernel):
    r = drvgemm.occupancy(copy_kernel, 256, "100K")
    regs = copy_kernel.resources.registers
    assert r.model == model(H200, regs, 256, 100 * 1024)
    assert r.blocks_per_sm == 2 and r.limiter == "shared memory"
    assert r.driver_blocks_per_sm is None and r.agrees is None
    assert "no GPU: the numbers are the model's" in str(r)
    assert r.model_available_dynamic_smem == available_dynamic_smem(H200, regs, 256, 2)
    with pytest.raises(ValueError, match="block.z"):
        drvgemm.occupancy(copy_kernel, (1, 1, 128))


def test_drvgemm_occupancy_stays_a_function_after_module_imports(no_gpu, copy_kernel):
    # No module is named drvgemm.occupancy: importing the model and the
    # command leaves the public function in place.
    import importlib
    import types
    for name in ("drvgemm.analysis.occupancy", "drvgemm.tools.kernel_occupancy",
                 "drvgemm.cli.occupancy"):
        importlib.import_module(name)
    assert "drvgemm.occupancy" not in sys.modules
    assert not isinstance(drvgemm.occupancy, types.ModuleType)
    assert not isinstance(drvgemm.softmax, types.ModuleType)
    assert not isinstance(drvgemm.gemm, types.ModuleType)
    assert drvgemm.occupancy(copy_kernel, 64).blocks_per_sm == 32


# ---------------------------------------------------------------------------
# the command line, with no GPU
# ---------------------------------------------------------------------------
def _cli(argv, capsys):
    from drvgemm.cli import main
    rc = main(["occupancy"] + argv)
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return rc, out.out, out.err


def test_cli_what_if(no_gpu, capsys):
    rc, out, _ = _cli(["--regs", "128", "--block", "256", "--smem", "48K"], capsys)
    assert rc == 0
    assert "registers bind: 2 blocks; <= 80 registers/thread would give 3, " \
           "<= 64 would give 4" in out
    assert "numbers from the model" in out


def test_cli_seed_spec(no_gpu, capsys):
    rc, out, _ = _cli(["--gpu", "seed", "--regs", "0", "--block", "64", "--smem", "10000"],
                      capsys)
    assert rc == 0 and "occupancy 41.7%" in out and "20 of 48 warps" in out


def test_cli_custom_spec(no_gpu, capsys):
    rc, out, _ = _cli(["--regs", "32", "--block", "64", "--smem", "10000",
                       "--set", "max_warps_per_sm=48", "--set", "smem_per_sm=100K"], capsys)
    assert rc == 0 and "H200 (modified)" in out and "of 48 warps" in out


def test_cli_kernel_file(no_gpu, capsys):
    path = str(ROOT / "cu" / "memory" / "copy_occupancy.cu")
    rc, out, _ = _cli([path, "--entry", "copy_occupancy", "--block", "64", "--smem", "7K"],
                      capsys)
    assert rc == 0
    assert "no GPU: the numbers are the model's" in out
    assert "copy_occupancy on H200" in out


def test_cli_rung(no_gpu, capsys):
    from drvgemm.ladders.gemm.registry import RUNGS
    if not RUNGS:
        pytest.skip("no rung is registered yet")
    rung = RUNGS[0]
    rc, out, _ = _cli([rung.name], capsys)
    assert rc == 0 and rung.name in out and "blocks/SM" in out


@pytest.mark.parametrize("argv, message", [
    ([], "--regs N"),
    (["--regs", "32"], "--block is needed"),
    (["no_such_rung"], "neither a registered rung"),
    (["x.cu", "--block", "64"], "--entry"),
    (["--regs", "32", "--block", "64", "--smem", "lots"], "not a size"),
    (["--regs", "32", "--block", "64", "--gpu", "V100"], "not in the device catalogue"),
    (["--regs", "32", "--block", "64", "--set", "colour=3"], "not a settable field"),
])
def test_cli_errors_are_messages(no_gpu, capsys, argv, message):
    rc, _, err = _cli(argv, capsys)
    assert rc == 2 and message in err


def test_sweep_script_without_gpu():
    """The benchmark runs standalone; with no GPU it prints its plan."""
    env_probe = subprocess.run([sys.executable, "-c", "import drvgemm; "
                                "print(drvgemm.no_gpu_reason() is None)"],
                               capture_output=True, text=True, timeout=60)
    if env_probe.stdout.strip() == "True":
        pytest.skip("a GPU is present: the sweep itself is run as a benchmark")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "occupancy_sweep.py"),
                        "--unroll", "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "no GPU found" in r.stdout
    assert "32 blocks/SM" in r.stdout and "100.0%" in r.stdout


def test_kernel_occupancy_takes_a_device_by_name_and_refuses_what_is_not_a_block():
    """drvgemm.occupancy(k, 256, spec="A100") ended in an AttributeError (a
    str has no warp_size), a float block in "'float' object is not
    iterable": the name means the catalogue's spec, and the errors say what
    is wrong."""
    k = drvgemm.compile('extern "C" __global__ void occ_probe(float* x) { x[threadIdx.x] = 1.0f; }',
                        "occ_probe", arch="sm_80")
    for name in ("A100", "h200"):
        by_name = drvgemm.occupancy(k, 256, spec=name).model
        by_spec = drvgemm.occupancy(k, 256, spec=get_spec(name)).model
        assert by_name == by_spec and by_name.spec.name == get_spec(name).name
    with pytest.raises(ValueError, match="A100"):
        drvgemm.occupancy(k, 256, spec="nosuch")
    for block in (256.0, None, "256"):
        with pytest.raises(ValueError, match="block must be"):
            drvgemm.occupancy(k, block, spec="H200")
