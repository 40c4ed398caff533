"""`drvgemm profile`: the ncu command line, the raw-CSV parser on a canned
ncu output, and every path that must end in one clear line and a non-zero
exit code (no ncu, no counter permission, ncu failing)."""
from __future__ import annotations

import argparse
import stat
import sys

import pytest

from drvgemm.cli import profile as profile_cli
from drvgemm.tools import ncu
from drvgemm.tools import profile as pf
from drvgemm.ladders.gemm import registry as rungs
from drvgemm.ladders.gemm.registry import Rung

_ID = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC"'
_METRIC_NAMES = [
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__time_duration.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__warp_issue_stalled_barrier_per_warp_active.pct",
    "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
    "smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct",
    "smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct",
    "smsp__warp_issue_stalled_not_selected_per_warp_active.pct",
    "smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct",
    "smsp__warp_issue_stalled_wait_per_warp_active.pct",
]
_UNITS = ["%", "nsecond", "", "", "%", "%", "%", "%", "%", "%", "%", "%", "%"]
_VALUES = ["61.48", "1,843,232", "1,048,576", "0", "83.95", "32.71",
           "18.34", "7.02", "4.15", "22.87", "9.61", "3.30", "12.44"]


def _q(cells):
    return ",".join(f'"{c}"' for c in cells)


# What `ncu --csv --page raw --print-units base --metrics ...` prints: ncu's
# own notes, the header row, the units row (empty identity columns), then one
# row per profiled launch.
CANNED = "\n".join([
    "==PROF== Connected to process 48213 (/usr/bin/python3.12)",
    "==PROF== Profiling \"sgemm_reg_tiled\" - 0: 0%....50%....100% - 9 passes",
    "==PROF== Disconnected from process 48213",
    _ID + "," + _q(_METRIC_NAMES),
    _q([""] * 11 + _UNITS),
    _q(["0", "48213", "python3.12", "127.0.0.1", "sgemm_reg_tiled", "1", "7", "(256, 1, 1)",
        "(16, 16, 1)", "0", "9.0"] + _VALUES),
]) + "\n"


def test_parse_canned_output():
    records = ncu.parse_ncu_csv(CANNED)
    assert len(records) == 1
    rec = records[0]
    assert rec["Kernel Name"] == ("sgemm_reg_tiled", "")
    assert rec["gpu__time_duration.sum"] == (1843232.0, "nsecond")       # thousands separators
    assert rec["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == (83.95, "%")

    p = pf.profile_from_record(rec)
    assert p.kernel == "sgemm_reg_tiled" and p.grid == "(16, 16, 1)" and p.block == "(256, 1, 1)"
    assert p.duration_ns == 1843232.0
    assert (p.memory_pct, p.sm_pct, p.occupancy_pct) == (61.48, 83.95, 32.71)
    assert (p.bank_conflicts_ld, p.bank_conflicts_st) == (1048576.0, 0.0)
    assert len(p.stalls) == 7
    assert p.top_stalls(3) == [("mio_throttle", 22.87), ("barrier", 18.34), ("wait", 12.44)]


def test_format_profile_table():
    p = pf.profile_from_record(ncu.parse_ncu_csv(CANNED)[0])
    text = pf.format_profile(p, title="04_reg_tiled at 2048x2048x2048", top=3)
    assert text.splitlines()[0] == "04_reg_tiled at 2048x2048x2048"
    for s in ("1,843.2 us", "61.5 % of peak", "84.0 % of peak", "32.7 % of max warps",
              "1,048,576", "mio_throttle", "22.9 %"):
        assert s in text, s
    assert "long_scoreboard" not in text           # only the top 3 stalls
    assert text.index("mio_throttle") < text.index("barrier") < text.index("wait")


def test_duration_units_are_converted_and_missing_values_are_na():
    text = "\n".join([
        '"ID","Kernel Name","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed"',
        '"","","usecond","%"',
        '"0","k","12.5","n/a"',
        '"1","k","13.0","50"',
    ])
    recs = ncu.parse_ncu_csv(text)
    assert len(recs) == 2
    p = pf.profile_from_record(recs[0])
    assert p.duration_ns == 12500.0 and p.sm_pct is None
    assert "n/a" in pf.format_profile(p)


def test_parse_without_table_raises():
    with pytest.raises(pf.ProfileError, match="no ncu CSV table"):
        ncu.parse_ncu_csv("==ERROR== something went wrong\n")


def test_ncu_command():
    cmd = pf.ncu_command("/opt/ncu", "gemm_tiled<128, 8>", "05_x", 512)
    assert cmd[0] == "/opt/ncu"
    joined = " ".join(cmd)
    for flag in ("--clock-control none", "--target-processes all", "--launch-count 1", "--csv",
                 "--page raw", "--print-units base"):
        assert flag in joined, flag
    assert cmd[cmd.index("--kernel-name") + 1] == "regex:^gemm_tiled$"
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert set(pf.METRICS.values()) <= set(metrics) and pf.STALL_METRICS in metrics
    program = cmd[-1]
    compile(program, "<profile program>", "exec")       # valid Python
    assert "kernel='05_x'" in program and "n = 512" in program


# --------------------------------------------------------------------------
# the command's failure paths, and its success path with a stand-in ncu
# --------------------------------------------------------------------------
FAKE_RUNG = Rung(name="04_reg_tiled", source="04_reg_tiled.cu", entry="sgemm_reg_tiled",
                 precision="fp32", block=(256, 1, 1), tile_m=128, tile_n=128)


@pytest.fixture
def one_rung(monkeypatch):
    monkeypatch.setattr(rungs, "by_name", lambda: {FAKE_RUNG.name: FAKE_RUNG})


def _run(argv):
    parser = argparse.ArgumentParser(prog="drvgemm")
    profile_cli.add(parser.add_subparsers())
    args = parser.parse_args(["profile"] + argv)
    return args.func(args)


def _fake_ncu(tmp_path, body):
    exe = tmp_path / "ncu"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


def _assert_one_line(err, *needles):
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("drvgemm profile: ")
    for n in needles:
        assert n in err, (n, err)


def test_find_ncu_none_when_absent(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ncu, "NCU_FALLBACK", str(tmp_path / "nope" / "ncu"))
    assert ncu.find_ncu() is None
    assert ncu.find_ncu(str(tmp_path / "missing")) is None
    exe = _fake_ncu(tmp_path, "exit 0\n")
    assert ncu.find_ncu() == exe                      # now on PATH


def test_no_ncu(one_rung, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ncu, "NCU_FALLBACK", str(tmp_path / "nope" / "ncu"))
    assert _run(["04_reg_tiled"]) == 1
    _assert_one_line(capsys.readouterr().err, "ncu", "not found")


def test_unknown_kernel(one_rung, capsys):
    assert _run(["99_nonexistent"]) == 1
    _assert_one_line(capsys.readouterr().err, "unknown kernel '99_nonexistent'", "04_reg_tiled")


def test_counter_permission_denied(one_rung, tmp_path, capsys):
    exe = _fake_ncu(tmp_path, (
        'echo "==PROF== Connected to process 1"\n'
        'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU '
        'Performance Counters on the target device 0."\n'
        'exit 0\n'))
    assert _run(["04_reg_tiled", "--ncu", exe]) == 1
    _assert_one_line(capsys.readouterr().err, "permission", "ERR_NVGPUCTRPERM")


def test_ncu_failure_names_its_error(one_rung, tmp_path, capsys):
    exe = _fake_ncu(tmp_path, 'echo "==ERROR== Failed to find metric regex:foo" >&2\nexit 1\n')
    assert _run(["04_reg_tiled", "--ncu", exe]) == 1
    _assert_one_line(capsys.readouterr().err, "exit 1", "Failed to find metric")


def test_nothing_profiled(one_rung, tmp_path, capsys):
    exe = _fake_ncu(tmp_path, 'echo "==WARNING== No kernels were profiled."\nexit 0\n')
    assert _run(["04_reg_tiled", "--ncu", exe]) == 1
    _assert_one_line(capsys.readouterr().err, "no kernel")


def test_success_with_stand_in_ncu(one_rung, tmp_path, capsys):
    canned = tmp_path / "out.csv"
    canned.write_text(CANNED)
    args_file = tmp_path / "args"
    exe = _fake_ncu(tmp_path, f'printf "%s\\n" "$@" > {args_file}\ncat {canned}\n')
    assert _run(["04_reg_tiled", "--ncu", exe, "--size", "1024", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("04_reg_tiled at 1024x1024x1024")
    assert "83.95" not in out and "84.0 % of peak" in out
    assert "mio_throttle" in out and "barrier" in out and "wait " not in out
    passed = args_file.read_text()
    assert "regex:^sgemm_reg_tiled$" in passed and "n = 1024" in passed
    # ncu's options first, then the program it runs: this Python, -c, the launch.
    lines = passed.splitlines()
    assert lines.index(sys.executable) > lines.index("--metrics")
    assert lines[lines.index(sys.executable) + 1] == "-c"


def test_profile_child_runs_the_script_s_child_under_ncu(tmp_path, monkeypatch):
    """The benchmarks that profile themselves: ncu's own flags, then this
    Python running the script with --child and its arguments; the output also
    written to raw; CALL lines read back in order; None without ncu."""
    fake = tmp_path / "ncu"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do echo "ARG $a"; done\necho "CALL first 1"\necho "CALL second"\n')
    fake.chmod(0o755)
    monkeypatch.setattr(ncu, "find_ncu", lambda explicit=None: str(fake))
    raw = tmp_path / "raw.csv"
    proc = ncu.profile_child("bench.py", ["--page", "raw"], ["--shapes", "bf16:2x3"], str(raw))
    args = [ln[4:] for ln in proc.stdout.splitlines() if ln.startswith("ARG ")]
    assert args[:4] == ["--clock-control", "none", "--csv", "--page"]
    assert args[5].endswith("python3") or "python" in args[5]
    assert args[6].endswith("bench.py") and args[7:] == ["--child", "--shapes", "bf16:2x3"]
    assert raw.read_text().startswith(proc.stdout)
    assert ncu.calls(proc.stdout) == ["first 1", "second"]
    monkeypatch.setattr(ncu, "find_ncu", lambda explicit=None: None)
    assert ncu.profile_child("bench.py", [], []) is None


def test_metric_rows_read_rows_that_end_at_their_value():
    """ncu 2025's details page writes a metric's row only up to its value
    (plus a trailing comma); a rule's row has every column. Both are read, a
    row cut before its value is not (the H200's ncu_compare run printed an
    empty table while every metric row was of the short kind)."""
    header = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
              '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
              '"Metric Value","Rule Name","Rule Type","Rule Description","Estimated Speedup Type",'
              '"Estimated Speedup"')
    head = '"0","652","python3.12","127.0.0.1","k","1","7","(384, 1, 1)","(128, 1, 1)","0","9.0","SOL",'
    text = "\n".join([
        "==WARNING== Note: Running with unmodified GPU clocks.",
        "CALL one",
        header,
        head + '"Duration","ns","28,800",',
        head + '"","","","Rule","OPT","text","local","3.5"',
        head + '"Cut",',
    ])
    rows = ncu.metric_rows(text)
    assert [r["Metric Name"] for r in rows] == ["Duration", ""]
    assert rows[0]["Metric Value"] == "28,800" and rows[0]["Rule Name"] == ""
    assert rows[1]["Rule Name"] == "Rule" and rows[1]["Estimated Speedup"] == "3.5"
