"""Measured winners of ``drvgemm tune``: per device, a JSON file in the cache
directory that maps a product's signature to the rung and split that ran it
fastest on that GPU. kernel="auto" prefers such a winner when the file holds
the exact signature (plan.choose(..., tuned=...): the Plan's reason says
"tuned"); everything else is the model's choice, as without the file.

The file, ``tuned-<device>-sm<cc>.json`` (one per device name and compute
capability, so one cache directory serves several GPUs):

    {"format": 1, "device": "NVIDIA H200", "entries": {
        "bf16 fp32 beta0 4096x4096x128": {"kernel": "20_tma_wgmma_bf16", "split": 1,
                                         "ms": 0.0175, "candidates": {...}}}}

A signature is the math precision, C's type, whether beta reads C, and M x N x
K. Pointer alignment is not part of it: tune measures fresh (aligned)
allocations, and the planner still picks the aligned or unaligned
instantiation of the winning rung from the call's own pointers."""
from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

from ...runtime.compiler import cache_dir

__all__ = ["signature", "tuned_path", "load", "lookup", "record", "clear", "FORMAT"]

FORMAT = 1
_lock = threading.Lock()
_loaded: dict = {}      # path -> (mtime_ns, entries)


def signature(m: int, n: int, k: int, precision: str, out: str, beta_reads_c: bool) -> str:
    return f"{precision} {out} beta{int(bool(beta_reads_c))} {int(m)}x{int(n)}x{int(k)}"


def tuned_path(device_name: str, cc) -> Path | None:
    """The winners file of a device in the cache directory (None: caching is off)."""
    d = cache_dir()
    if d is None:
        return None
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device_name).strip("-").lower() or "device"
    return d / f"tuned-{slug}-sm{cc[0]}{cc[1]}.json"


def load(path: Path | None) -> dict:
    """The file's entries ({} when there is none, or it is unreadable: a bad
    file never breaks gemm(), it is only not used). Re-read when it changes."""
    if path is None:
        return {}
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return {}
    with _lock:
        hit = _loaded.get(path)
        if hit is not None and hit[0] == mtime:
            return hit[1]
    try:
        data = json.loads(path.read_text())
        entries = data.get("entries", {}) if data.get("format") == FORMAT else {}
        if not isinstance(entries, dict):
            entries = {}
    except (OSError, ValueError, AttributeError):
        entries = {}
    with _lock:
        _loaded[path] = (mtime, entries)
    return entries


def lookup(path: Path | None, sig: str) -> dict | None:
    """{rung name: split} of the winner for ``sig`` (plan.choose's ``tuned``), or None."""
    e = load(path).get(sig)
    if not isinstance(e, dict) or "kernel" not in e:
        return None
    try:
        return {str(e["kernel"]): int(e.get("split", 1))}
    except (TypeError, ValueError):
        return None


def record(path: Path, device_name: str, sig: str, entry: dict) -> None:
    """Add or replace one signature's winner; written atomically (a reader
    sees the old file or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock:
        try:
            data = json.loads(path.read_text())
            if data.get("format") != FORMAT or not isinstance(data.get("entries"), dict):
                data = None
        except (OSError, ValueError, AttributeError):
            data = None
        data = data or {"format": FORMAT, "device": device_name, "entries": {}}
        data["entries"][sig] = entry
        tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
        try:
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        _loaded.pop(path, None)


def clear(path: Path | None) -> bool:
    """Remove the winners file; True when there was one."""
    if path is None or not path.exists():
        return False
    path.unlink()
    with _lock:
        _loaded.pop(path, None)
    return True
