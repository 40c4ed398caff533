"""`drvgemm profile KERNEL`: one launch of a GEMM rung under Nsight Compute.

Runs a short Python program under ``ncu`` that launches the rung once through
``drvgemm.gemm`` and reads back the counters that say why a kernel is as fast
as it is: how close it runs to the memory and to the SM throughput peaks,
how many warps stay resident, what its warps wait on, and whether shared
memory accesses collide on banks.

Clocks are left alone (``--clock-control none``): locked base clocks would
make the numbers steadier but slower than the same kernel in ``drvgemm
bench``, and the ratios (percent of peak) are what the table is for.
"""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field

from ..ladders.gemm import registry
from .ncu import NCU_FALLBACK, NcuError, find_ncu, parse_ncu_csv

__all__ = ["METRICS", "STALL_METRICS", "ProfileError", "KernelProfile", "ncu_command",
           "profile_from_record", "format_profile", "profile_rung"]

# label -> metric: duration, the three speed-of-light figures (memory and SM
# throughput as % of their peaks, resident warps as % of the maximum), and
# shared-memory bank conflicts, which serialise a warp's access into as many
# passes as the most-hit bank needs, counted separately for loads and stores.
METRICS = {
    "duration": "gpu__time_duration.sum",
    "memory throughput": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "compute (SM) throughput": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smem bank conflicts (ld)": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smem bank conflicts (st)": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
}
# Every stall reason the device has, as % of cycles with the warp active;
# a regex so that reasons new to an architecture come along.
STALL_METRICS = r"regex:^smsp__warp_issue_stalled_[a-z_]+_per_warp_active\.pct$"
_STALL_RE = re.compile(r"^smsp__warp_issue_stalled_([a-z_]+)_per_warp_active\.pct$")

_TIME_TO_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
               "second": 1e9, "s": 1e9}


ProfileError = NcuError   # why no profile came back, in one line fit to show a user


# --------------------------------------------------------------------------
# finding and running ncu
# --------------------------------------------------------------------------
def _kernel_regex(entry: str) -> str:
    # ncu matches the function's base name: a template expression such as
    # "kern<128, 8>" appears as "kern".
    base = entry.split("<", 1)[0].strip()
    return f"regex:^{re.escape(base)}$"


def _launch_program(kernel: str, size: int) -> str:
    """The program ncu runs: inputs of the rung's precision, one gemm()."""
    return (
        "import numpy as np, drvgemm\n"
        "from drvgemm.ladders.gemm.registry import by_name\n"
        f"rung = by_name()[{kernel!r}]\n"
        f"n = {int(size)}\n"
        "if rung.precision == 'bf16':\n"
        "    import ml_dtypes; dtype = ml_dtypes.bfloat16\n"
        "else:\n"
        "    dtype = {'fp32': np.float32, 'tf32': np.float32, 'fp16': np.float16}[rung.precision]\n"
        "rng = np.random.default_rng(0)\n"
        "a = drvgemm.to_device(rng.standard_normal((n, n), dtype=np.float32).astype(dtype))\n"
        "b = drvgemm.to_device(rng.standard_normal((n, n), dtype=np.float32).astype(dtype))\n"
        f"drvgemm.gemm(a, b, kernel={kernel!r})\n"
        "drvgemm.synchronize()\n"
    )


def ncu_command(ncu: str, entry: str, kernel: str, size: int) -> list[str]:
    metrics = ",".join(list(METRICS.values()) + [STALL_METRICS])
    return [ncu, "--clock-control", "none", "--target-processes", "all",
            "--kernel-name", _kernel_regex(entry), "--launch-count", "1",
            "--csv", "--page", "raw", "--print-units", "base", "--metrics", metrics,
            sys.executable, "-c", _launch_program(kernel, size)]


def _diagnose(output: str, returncode: int) -> str:
    if "ERR_NVGPUCTRPERM" in output:
        return ("ncu has no permission to read the GPU performance counters (ERR_NVGPUCTRPERM); "
                "run as root or allow profiling for all users (NVreg_RestrictProfilingToAdminUsers=0)")
    errors = [ln.strip() for ln in output.splitlines() if ln.startswith("==ERROR==")]
    if errors:
        return f"ncu failed (exit {returncode}): {errors[0][len('==ERROR=='):].strip()}"
    if "No kernels were profiled" in output:
        return "ncu profiled no kernel: the rung's entry did not launch (see the program's error above)"
    tail = [ln.strip() for ln in output.splitlines() if ln.strip()]
    last = tail[-1] if tail else "no output"
    return f"ncu failed (exit {returncode}): {last}"


# --------------------------------------------------------------------------
# parsing ncu's raw CSV page
# --------------------------------------------------------------------------
@dataclass
class KernelProfile:
    kernel: str
    block: str
    grid: str
    duration_ns: float | None
    memory_pct: float | None
    sm_pct: float | None
    occupancy_pct: float | None
    bank_conflicts_ld: float | None
    bank_conflicts_st: float | None
    stalls: dict = field(default_factory=dict)     # reason -> % of active warp cycles

    def top_stalls(self, count: int = 5) -> list[tuple[str, float]]:
        ranked = sorted(((r, v) for r, v in self.stalls.items() if v is not None),
                        key=lambda t: -t[1])
        return ranked[:count]


def _metric(rec: dict, name: str):
    value, _ = rec.get(name, (None, ""))
    return value if isinstance(value, float) else None


def profile_from_record(rec: dict) -> KernelProfile:
    duration = None
    if METRICS["duration"] in rec:
        value, unit = rec[METRICS["duration"]]
        if isinstance(value, float):
            duration = value * _TIME_TO_NS.get(unit or "nsecond", 1.0)
    stalls = {}
    for name, (value, _) in rec.items():
        m = _STALL_RE.match(name)
        if m and isinstance(value, float):
            stalls[m.group(1)] = value
    return KernelProfile(
        kernel=rec.get("Kernel Name", ("?", ""))[0],
        block=rec.get("Block Size", ("?", ""))[0],
        grid=rec.get("Grid Size", ("?", ""))[0],
        duration_ns=duration,
        memory_pct=_metric(rec, METRICS["memory throughput"]),
        sm_pct=_metric(rec, METRICS["compute (SM) throughput"]),
        occupancy_pct=_metric(rec, METRICS["achieved occupancy"]),
        bank_conflicts_ld=_metric(rec, METRICS["smem bank conflicts (ld)"]),
        bank_conflicts_st=_metric(rec, METRICS["smem bank conflicts (st)"]),
        stalls=stalls)


def _fmt(value, spec: str, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{suffix}"


def format_profile(p: KernelProfile, *, title: str = "", top: int = 5) -> str:
    rows = [
        ("duration", "n/a" if p.duration_ns is None else f"{p.duration_ns / 1e3:,.1f} us"),
        ("memory throughput", _fmt(p.memory_pct, ".1f", " % of peak")),
        ("compute (SM) throughput", _fmt(p.sm_pct, ".1f", " % of peak")),
        ("achieved occupancy", _fmt(p.occupancy_pct, ".1f", " % of max warps")),
        ("smem bank conflicts, loads", _fmt(p.bank_conflicts_ld, ",.0f")),
        ("smem bank conflicts, stores", _fmt(p.bank_conflicts_st, ",.0f")),
    ]
    stalls = p.top_stalls(top)
    width = max([len(r[0]) for r in rows] + [len(s) + 2 for s, _ in stalls])
    out = []
    if title:
        out.append(title)
    out.append(f"kernel {p.kernel}  grid {p.grid}  block {p.block}")
    out += [f"  {name:<{width}}  {value}" for name, value in rows]
    if stalls:
        out.append(f"  warp stalls (% of active warp cycles), top {len(stalls)}:")
        out += [f"    {reason:<{width - 2}}  {value:.1f} %" for reason, value in stalls]
    else:
        out.append("  warp stalls: none reported")
    return "\n".join(out)


# --------------------------------------------------------------------------
# the command
# --------------------------------------------------------------------------
def profile_rung(kernel: str, size: int = 2048, *, ncu: str | None = None,
                 timeout: float = 600.0) -> KernelProfile:
    """Profile one launch of the registered rung ``kernel`` at size x size x
    size. Raises ProfileError with a one-line reason on any failure."""
    rungs = registry.by_name()
    if kernel not in rungs:
        known = ", ".join(sorted(rungs)) or "none registered"
        raise ProfileError(f"unknown kernel {kernel!r} (known: {known})")
    if size < 1:
        raise ProfileError("--size must be >= 1")
    exe = find_ncu(ncu)
    if exe is None:
        where = ncu if ncu else f"PATH or {NCU_FALLBACK}"
        raise ProfileError(f"Nsight Compute (ncu) not found in {where}; install Nsight Compute "
                           "or pass --ncu PATH")
    cmd = ncu_command(exe, rungs[kernel].entry, kernel, size)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ProfileError(f"ncu did not finish within {timeout:g} s") from None
    except OSError as e:
        raise ProfileError(f"could not run {exe}: {e}") from None
    output = (done.stdout or "") + "\n" + (done.stderr or "")
    if "ERR_NVGPUCTRPERM" in output or done.returncode != 0:
        raise ProfileError(_diagnose(output, done.returncode))
    try:
        records = parse_ncu_csv(done.stdout)
    except ProfileError:
        raise ProfileError(_diagnose(output, done.returncode)) from None
    if not records:
        raise ProfileError("ncu profiled no kernel: the rung's entry did not launch")
    return profile_from_record(records[0])
