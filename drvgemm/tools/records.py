"""The results records of DESIGN.md's "Benchmarks" contract, built in one
place: every GEMM and memory-bound record, from ``drvgemm bench``, the
memory bench, the softmax sweep and the benchmark scripts."""
from __future__ import annotations

import dataclasses
import json

from ..runtime import compiler

__all__ = ["record", "gemm_record", "memory_record", "device_json", "write_json"]


def _sig3(x):
    """Three significant digits; NaN (an output left unwritten) is not JSON, and
    an entry that was never checked has no error: both None."""
    return float(f"{x:.3g}") if x is not None and x == x else None


def record(kernel, precision, m, n, ms, *, k=None, flops=None, nbytes=None, baseline=False,
           tflops_digits=3, **extra) -> dict:
    """One record: ``kernel``, ``precision``, the shape (``m``, ``n`` and,
    for a GEMM, ``k``), ``median_ms``, ``tflops`` (from ``flops``) or
    ``gbps`` and ``bytes`` (from ``nbytes``, the minimum bytes moved),
    ``baseline``, then ``extra``. ``rel_rmse`` and ``max_rel_err`` are kept
    to three significant digits, NaN as None."""
    r = {"kernel": kernel, "precision": precision, "m": int(m), "n": int(n)}
    if k is not None:
        r["k"] = int(k)
    r["median_ms"] = round(ms, 5)
    if flops is not None:
        r["tflops"] = round(flops / (ms * 1e-3) / 1e12, tflops_digits)
    if "rel_rmse" in extra:
        r["rel_rmse"] = _sig3(extra.pop("rel_rmse"))
    if nbytes is not None:
        # four significant digits: a few bytes in a few microseconds is well
        # below 0.1 GB/s and must not round to zero
        r["gbps"] = float(f"{nbytes / (ms * 1e-3) / 1e9:.4g}")
        r["bytes"] = int(nbytes)
    r["baseline"] = baseline
    if "max_rel_err" in extra:
        extra["max_rel_err"] = _sig3(extra["max_rel_err"])
    r.update(extra)
    return r


def gemm_record(kernel, precision, m, n, k, ms, err, baseline, **extra) -> dict:
    """A GEMM record: 2mnk FLOP over ``ms``, relative RMSE ``err``."""
    return record(kernel, precision, m, n, ms, k=k, flops=2.0 * m * n * k, rel_rmse=err,
                  baseline=baseline, **extra)


def memory_record(kernel, precision, m, n, ms, nbytes, *, baseline=False, **extra) -> dict:
    """A memory-bound record: ``nbytes`` (the minimum moved) over ``ms``."""
    return record(kernel, precision, m, n, ms, nbytes=nbytes, baseline=baseline, **extra)


def device_json(dev) -> dict:
    """drvgemm.device()'s properties as the results' "device" object, with
    the toolchain that compiled the measured kernels: a record's
    ``sass_hash`` is the digest of that compiler's machine code, so it
    matches tests/data/sass_manifest.json only where the manifest was written
    with the same NVRTC (the H200 machine's is its own)."""
    d = dataclasses.asdict(dev)
    d["cc"] = f"{dev.cc[0]}.{dev.cc[1]}"
    for key in ("max_block_dims", "max_grid_dims"):
        d[key] = list(d[key])
    d["toolchain"] = {"nvrtc": "%d.%d" % compiler.nvrtc_version(),
                      "nvjitlink": "%d.%d" % compiler.nvjitlink_version()[:2]}
    return d


def results_json(dev, records) -> dict:
    """The results format: the device, then the records."""
    return {"device": device_json(dev), "records": records}


def write_json(results: dict, path):
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
