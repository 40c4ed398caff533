"""Nsight Compute (ncu), in one place: finding the executable, running it
over a Python program, and reading its CSV output, both the raw page (one
row per launch, a column per metric: ``parse_ncu_csv``) and the details page
(one row per launch and metric: ``metric_rows``). ``drvgemm profile``, the
memory bench's bank-conflict counts and benchmarks/ncu_compare.py use it."""
from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys

__all__ = ["NCU_FALLBACK", "NcuError", "find_ncu", "run", "profile_child", "table_rows",
           "parse_ncu_csv", "metric_rows", "calls"]

NCU_FALLBACK = "/usr/local/cuda/bin/ncu"
_IDENTITY_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
                     "Stream", "Block Size", "Grid Size", "Device", "CC")


class NcuError(RuntimeError):
    """Why ncu gave nothing usable, in one line fit to show a user."""


def find_ncu(explicit: str | None = None) -> str | None:
    """The ncu executable: ``explicit`` if given, else ncu on PATH, else the
    CUDA toolkit's default location; None when there is none."""
    if explicit:
        return explicit if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else None
    found = shutil.which("ncu")
    if found:
        return found
    if os.path.isfile(NCU_FALLBACK) and os.access(NCU_FALLBACK, os.X_OK):
        return NCU_FALLBACK
    return None


def run(cmd: list[str], *, timeout: float) -> subprocess.CompletedProcess:
    """Run an ncu command line, capturing its output as text."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def profile_child(script: str, ncu_args: list[str], child_args: list[str], raw: str | None = None):
    """Run ``script --child CHILD_ARGS`` (this Python) under ``ncu
    --clock-control none --csv NCU_ARGS``: the pattern of the benchmarks that
    profile themselves. The CompletedProcess, its output also written to
    ``raw`` when given; None when there is no ncu."""
    exe = find_ncu()
    if exe is None:
        return None
    cmd = [exe, "--clock-control", "none", "--csv", *ncu_args, sys.executable,
           os.path.abspath(script), "--child", *child_args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if raw:
        with open(raw, "w") as f:
            f.write(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    return proc


def calls(text: str) -> list[str]:
    """The labels a profiled child printed as ``CALL label`` lines, in order."""
    return [ln[5:] for ln in text.splitlines() if ln.startswith("CALL ")]


def table_rows(text: str) -> list[list[str]]:
    """The CSV table in ncu's output, header first: the lines from the
    '"ID",' header on that are quoted CSV (==PROF== notes and the program's
    own output are left out); [] when there is no table."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",')), None)
    if start is None:
        return []
    table = [ln for ln in lines[start:] if ln.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(table))))


def metric_rows(text: str) -> list[dict]:
    """The details page (``ncu --csv`` without ``--page raw``): one dict per
    launch and metric, keyed by column ("Kernel Name", "Metric Name",
    "Metric Unit", "Metric Value", ...). ncu 2025 writes a metric's row only
    up to its value (the rule columns, empty, left off): such rows are read
    with those columns empty."""
    rows = table_rows(text)
    if not rows:
        return []
    header = rows[0]
    need = header.index("Metric Value") + 1 if "Metric Value" in header else len(header)
    return [dict(zip(header, r + [""] * (len(header) - len(r)))) for r in rows[1:]
            if need <= len(r) <= len(header)]


def _number(text: str):
    t = text.strip().replace(",", "")
    if t in ("", "n/a", "N/A"):
        return None
    try:
        return float(t)
    except ValueError:
        return text.strip()


def parse_ncu_csv(text: str) -> list[dict]:
    """Records from ``ncu --csv --page raw``: one per profiled launch, each a
    dict of column -> (value, unit); identity columns (Kernel Name, Block
    Size, ...) keep their text, metrics become floats where they are numbers.
    Lines that are not part of the table (==PROF== notes, program output)
    are skipped. Raises NcuError when there is no table."""
    rows = table_rows(text)
    if not rows:
        raise NcuError("no ncu CSV table in the output")
    header = rows[0]
    body = rows[1:]
    units = [""] * len(header)
    # The row under the header gives units and has an empty ID.
    if body and body[0] and body[0][0] == "":
        units = body[0] + [""] * (len(header) - len(body[0]))
        body = body[1:]
    records = []
    for row in body:
        if len(row) != len(header):
            continue
        rec = {}
        for name, unit, value in zip(header, units, row):
            rec[name] = (value, unit) if name in _IDENTITY_COLUMNS else (_number(value), unit)
        records.append(rec)
    return records
