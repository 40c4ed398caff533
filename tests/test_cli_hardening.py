"""The command line refuses what it cannot honour: bad options are checked
before anything runs and end with a message and a non-zero exit, a kernel
that cannot run on the chosen device is not given numbers, and the two
commands that take --gpu share one catalogue and one default."""
from __future__ import annotations

import pytest

import drvgemm
from drvgemm import cli
from drvgemm.runtime import driver


@pytest.fixture
def no_gpu(monkeypatch):
    """The no-GPU path, also on a machine that has one."""
    monkeypatch.setattr(driver, "has_gpu", lambda: False)
    monkeypatch.setattr(driver, "no_gpu_reason", lambda: "forced by the test")


def _main(argv, capsys):
    try:
        rc = cli.main(argv)
    except SystemExit as e:     # argparse's own refusals
        rc = e.code
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return rc, out.out, out.err


def test_version(capsys):
    rc, out, _ = _main(["--version"], capsys)
    assert rc == 0 and out.strip() == f"drvgemm {drvgemm.__version__}"


def test_help_explains_the_seed(capsys):
    text = cli.build_parser().format_help()
    assert "The seed" in text and "this project grew from" in text
    rc, out, _ = _main(["bench", "--help"], capsys)
    assert rc == 0 and "the single-file benchmark this project grew from" in out


# -- bench ------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--sizes", "-5"], "sizes must be positive"),
    (["--sizes", "0,256"], "sizes must be positive"),
    (["--kernels", "nosuch"], "unknown rung(s) nosuch"),
    (["--kernels", "01_naive,nosuch", "--sizes", "64"], "unknown rung(s) nosuch"),
    (["--reps", "0"], "--reps must be >= 1"),
])
def test_bench_refuses_bad_options(no_gpu, capsys, tmp_path, argv, message):
    out_json = tmp_path / "x.json"
    rc, _, err = _main(["bench", "--json", str(out_json)] + argv, capsys)
    assert rc == 2 and message in err
    assert not out_json.exists()


def test_bench_options_without_a_gpu_are_an_error(no_gpu, capsys, tmp_path):
    out_json = tmp_path / "x.json"
    rc, out, err = _main(["bench", "--json", str(out_json), "--kernels", "01_naive",
                          "--sizes", "64"], capsys)
    assert rc == 2
    assert "no GPU found (forced by the test)" in err
    assert "--sizes, --kernels, --json" in err
    assert not out_json.exists() and out == ""


# -- occupancy ----------------------------------------------------------------
def test_occupancy_of_the_ptx_rung(no_gpu, capsys):
    rc, out, err = _main(["occupancy", "10_mma_tf32_ptx"], capsys)
    assert rc == 0, err
    assert "10_mma_tf32_ptx" in out and "blocks/SM" in out


@pytest.mark.parametrize("rung, gpu", [("20_tma_wgmma_bf16", "A100"),
                                       ("20_tma_wgmma_tf32", "A100")])
def test_occupancy_refuses_a_kernel_the_device_cannot_run(no_gpu, capsys, rung, gpu):
    rc, out, err = _main(["occupancy", rung, "--gpu", gpu], capsys)
    assert rc == 2 and out == ""
    assert f"{rung} cannot run on {gpu} (sm_80): it needs sm_90a" in err


def test_occupancy_of_a_sm80_rung_on_a100_still_works(no_gpu, capsys):
    rc, out, _ = _main(["occupancy", "04_reg_tiled", "--gpu", "A100"], capsys)
    assert rc == 0 and "blocks/SM" in out


@pytest.mark.parametrize("argv", [
    ["--regs", "64", "--block", "256", "--cluster", "2x1x1"],
    ["04_reg_tiled", "--regs", "64", "--cluster", "2x1x1"],
    ["04_reg_tiled", "--cluster", "2x1x1"],
])
def test_cluster_without_the_driver_is_said(no_gpu, capsys, argv):
    rc, out, err = _main(["occupancy"] + argv, capsys)
    assert rc == 0
    assert "--cluster 2x1x1 was not answered" in err


@pytest.mark.parametrize("text", ["2xq", "0x1", "2x1x1x1", "x"])
def test_bad_cluster_shape(no_gpu, capsys, text):
    rc, _, err = _main(["occupancy", "--regs", "64", "--block", "256", "--cluster", text],
                       capsys)
    assert rc == 2 and "give 1-3 positive sizes" in err


# -- one catalogue, one default -------------------------------------------------
def test_occupancy_and_roofline_share_the_catalogue_and_the_default(no_gpu, capsys,
                                                                     monkeypatch):
    from drvgemm.analysis.devices import CATALOGUE
    from drvgemm.cli import roofline
    monkeypatch.setattr(roofline, "live_spec", lambda measured=None: (None, None))
    for d in CATALOGUE:
        rc_o, out_o, err_o = _main(["occupancy", "--regs", "32", "--block", "128",
                                    "--gpu", d.name], capsys)
        rc_r, out_r, err_r = _main(["roofline", "--gpu", d.name], capsys)
        # each command accepts every entry that has its figures, and names the
        # catalogue's own word for one that lacks them
        assert (rc_o == 0) == (d.resources is not None), (d.name, err_o)
        assert (rc_r == 0) == (d.ceilings is not None), (d.name, err_r)
        for rc, err in ((rc_o, err_o), (rc_r, err_r)):
            if rc:
                assert f"{d.name} has no" in err and "figures in the device catalogue" in err
    # the same default without a GPU
    _, out_o, _ = _main(["occupancy", "--regs", "32", "--block", "128"], capsys)
    _, out_r, _ = _main(["roofline"], capsys)
    assert "on H200" in out_o and "Roofline of H200" in out_r
    # and the same help text
    for cmd in ("occupancy", "roofline"):
        _, out, _ = _main([cmd, "--help"], capsys)
        assert "RTX 4000 Ada (roofline only)" in " ".join(out.split())
        assert "seed (occupancy only)" in " ".join(out.split())


# -- the Python surface ---------------------------------------------------------
def test_kernels_of_an_unknown_precision_is_an_error():
    with pytest.raises(ValueError, match="unknown precision 'fp64'; the precisions are "
                                         "fp32, tf32, fp16, bf16"):
        drvgemm.kernels("fp64")
    bf16 = drvgemm.kernels("bf16")
    assert "12_mma_bf16" in bf16 and "13_mma_fp16" not in bf16 and "04_reg_tiled" not in bf16


USER_SOURCE = """
template <int N>
__global__ void fill(float* x) { x[threadIdx.x] = N; }
template __global__ void fill<4>(float*);
extern "C" __global__ void twice(float* x, int n) {
    int i = threadIdx.x;
    if (i < n) x[i] *= SCALE;
}
"""


def test_compile_reports_a_source_of_ones_own(capsys, tmp_path):
    """``drvgemm compile FILE [NAME ...] [-D ...] [--arch]``: the ptxas table
    for the kernels of a user's file (the command knew only drvgemm's own
    kernel set); its errors are the compiler's, one line each for misuse."""
    src = tmp_path / "mine.cu"
    src.write_text(USER_SOURCE)
    assert cli.main(["compile", str(src), "twice", "fill<4>", "-D", "SCALE=2.0f",
                     "--arch", "sm_80"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:] if line.strip()}
    assert rows["twice"][0] == "sm_80" and rows["fill<4>"][0] == "sm_80"
    assert int(rows["twice"][1]) > 0 and rows["twice"][2:4] == ["0", "0"]   # regs, no spills
    assert cli.main(["compile", str(src), "-D", "SCALE=2.0f"]) == 0          # every kernel
    every = capsys.readouterr().out
    # the instantiation by its source name, not its symbol (_Z4fillILi4EEvPf)
    assert "twice" in every and "fill<4> " in every and "_Z" not in every, every
    assert cli.main(["compile", str(src), "twice"]) == 1       # SCALE undefined: NVRTC's log
    err = capsys.readouterr().err
    assert "CompileError" in err and "SCALE" in err
    assert cli.main(["compile", str(src), "--kernels", "twice"]) == 2
    assert "with a SOURCE" in capsys.readouterr().err
    assert cli.main(["compile", "-D", "X=1"]) == 2
    assert "go with a SOURCE" in capsys.readouterr().err
    assert cli.main(["compile", "-I", str(tmp_path)]) == 2
    assert "-I and --option go with a SOURCE" in capsys.readouterr().err


def test_compile_takes_include_folders_and_options(capsys, tmp_path):
    """``drvgemm compile FILE -I DIR --option=OPT``: a kernel in a header tree
    with the options it is built with (here C++20's consteval, which C++17
    refuses), and nvcc's options refused with the hint."""
    (tmp_path / "inc" / "lib").mkdir(parents=True)
    (tmp_path / "inc" / "lib" / "scale.cuh").write_text(
        "consteval float scale() { return 3.0f; }\n")
    src = tmp_path / "k.cu"
    src.write_text('#include <lib/scale.cuh>\n'
                   'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= scale(); }\n')
    inc = str(tmp_path / "inc")
    assert cli.main(["compile", str(src), "-I", inc, "--option=-std=c++20"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[0] == "k"
    assert cli.main(["compile", str(src), "-I", inc]) == 1            # C++17: no consteval
    assert "consteval" in capsys.readouterr().err
    assert cli.main(["compile", str(src), "-I", inc, "--option=-std=c++20", "--option=-O3"]) == 1
    assert "-O3: the host compiler's optimisation level" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--softmax-rows"], "--softmax-rows goes with --memory"),
    (["--quick"], "--quick goes with --shapes"),
    (["--precisions", "bf16", "--budget", "10"], "--precisions, --budget go with --shapes"),
    (["--shapes", "--sizes", "256"], "--sizes goes with the rung bench"),
    (["--shapes", "--no-baseline"], "--no-baseline goes with the rung bench"),
    (["--memory", "--kernels", "01_naive"], "--kernels goes with the rung bench"),
    (["--memory", "--plot", "x.png"], "--memory has no plot"),
    (["--shapes", "--memory"], "run one at a time"),
    (["--memory", "--precisions", "bf16"], "--precisions goes with --shapes"),
    (["--memory", "--softmax-rows", "--precisions", "tf32"], "not tf32"),
    (["--memory", "--softmax-rows", "8x"], "ROWSxCOLS"),
    (["--memory", "--softmax-rows", "0x5"], ">= 1"),
])
def test_bench_refuses_an_option_of_another_suite(no_gpu, capsys, argv, message):
    """``bench --softmax-rows`` without --memory, ``--quick`` without --shapes
    and the like ran another suite (or, with no GPU, the compile report)
    with the option ignored; each is now an error that names its suite."""
    rc, _, err = _main(["bench", *argv], capsys)
    assert rc == 2 and message in err, err


def test_bench_softmax_rows_measures_the_shapes_and_types_given(monkeypatch, capsys):
    """``bench --memory --softmax-rows 8x50257,4x1048576 --precisions bf16``
    runs the suite's measurement on those shapes and element types only
    (a stand-in device and suite: what reaches the suite is the point)."""
    from drvgemm.tools import memory_bench
    seen = []

    def suite(**kw):
        seen.append(kw)
        return {"records": [], "summary": {}}
    monkeypatch.setattr(driver, "no_gpu_reason", lambda: None)
    monkeypatch.setattr(driver, "device", lambda: "stand-in H200")
    monkeypatch.setattr(memory_bench, "run_softmax_rows", suite)
    monkeypatch.setattr(memory_bench, "print_softmax_rows_report", lambda *a, **k: None)
    monkeypatch.setattr(cli.bench.records, "device_json", lambda d: {"name": d})
    rc, _, err = _main(["bench", "--memory", "--softmax-rows", "8x50257,4X1048576",
                        "--precisions", "bf16", "--reps", "3"], capsys)
    assert rc == 0, err
    rc, _, err = _main(["bench", "--memory", "--softmax-rows"], capsys)
    assert rc == 0, err
    assert seen == [{"reps": 3, "shapes": ((8, 50257), (4, 1048576)), "precisions": ("bf16",)},
                    {"reps": 20, "shapes": None, "precisions": ("fp32", "bf16")}]


def test_occupancy_with_more_shared_memory_than_a_block_may_have(no_gpu, capsys):
    """The report ended "block size with the most resident threads: 0 (grid
    of 0 fills the GPU)" when no block size fits the dynamic shared memory."""
    rc, out, _ = _main(["occupancy", "30_small_m_bf16", "--block", "128", "--smem", "999K"],
                       capsys)
    assert rc == 0 and "grid of 0" not in out
    assert "no block size fits with 999 KiB of dynamic shared memory" in out
