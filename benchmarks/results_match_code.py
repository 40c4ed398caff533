"""Do the committed H200 results belong to the code as it stands? No GPU needed.

Every record that carries a ``sass_hash`` names the kernel it timed: a GEMM
record its instantiation (the SASS manifest's key), a softmax row-suite record
the plan ``kernel="auto"`` makes for its shape. This builds each of those from
today's sources with the installed compilers and compares the digests: equal,
the record's figures are this code's; different, the record is older than
the code (or was built by another compiler).

The H200 machine builds with NVRTC 13.0, and another release builds other
SASS for many kernels, so run this with those compilers (README, "Developer
notes": a CPU venv of the GPU machine's releases):

    python3 benchmarks/results_match_code.py [RESULTS.json ...]

Default: the newest full results (h200.json, h200-shapes.json,
h200-softmax-shapes.json). Exit status 1 when a record differs."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]   # this tree's drvgemm; the manifest's builds

import sass_manifest  # noqa: E402  (the one map from manifest key to build)

import drvgemm  # noqa: E402
from drvgemm.runtime import compiler, sass  # noqa: E402

DEFAULT = ["h200.json", "h200-shapes.json", "h200-softmax-shapes.json"]


def digest_of(record, builds, memo) -> str | None:
    """Today's SASS digest of the kernel ``record`` timed, or None where the
    record names no kernel this can build."""
    key = record.get("instantiation")
    if key in builds:
        if key not in memo:
            source, entry, defines, arch = builds[key]
            memo[key] = sass.kernel_sass_hash(drvgemm.compile(source, entry, defines=defines,
                                                               arch=arch))
        return memo[key]
    if record.get("auto") and str(record.get("kernel", "")).startswith("softmax_"):
        from drvgemm.ladders.softmax import plan as softmax_plan
        from drvgemm.tools import memory_bench
        p = softmax_plan.plan(record["m"], record["n"], record["precision"])
        return memory_bench._sass_hash(p).get("sass_hash")
    return None


def check(records, builds) -> dict:
    """{"equal", "differ": [(record, today's digest)], "varies", "not_rebuilt"}
    over the records that carry a hash; "varies": a differing digest of a
    rung whose NVRTC output varies from process to process
    (tests/data/sass_manifest_nondeterministic.json), not a change."""
    out = {"equal": 0, "differ": [], "varies": 0, "not_rebuilt": 0}
    memo = {}
    for r in records:
        if not isinstance(r, dict) or not r.get("sass_hash"):
            continue
        today = digest_of(r, builds, memo)
        if today is None:
            out["not_rebuilt"] += 1
        elif today == r["sass_hash"]:
            out["equal"] += 1
        elif r.get("instantiation") and sass_manifest.nondeterministic(r["instantiation"]):
            out["varies"] += 1
        else:
            out["differ"].append((r, today))
    return out


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", metavar="RESULTS.json",
                    help="results files (default: " + ", ".join(DEFAULT) + ")")
    args = ap.parse_args(argv)
    files = [Path(a) for a in args.files] or [ROOT / "benchmarks" / "results" / f for f in DEFAULT]
    version = ".".join(map(str, compiler.nvrtc_version()))
    print(f"compilers: NVRTC {version} ({sass_manifest.toolchain()})")
    if compiler.nvrtc_version() != (13, 0):
        print("  the H200 machine builds with NVRTC 13.0: other releases give other SASS for "
              "many kernels (README, Developer notes)")
    builds = {key: (source, entry, defines, arch)
              for key, source, entry, defines, arch in sass_manifest.instantiations()}
    differ = 0
    for f in files:
        data = json.loads(f.read_text())
        records = data["records"] if isinstance(data, dict) else data
        res = check(records, builds)
        differ += len(res["differ"])
        print(f"{f.name}: {res['equal']} equal, {len(res['differ'])} differ, {res['varies']} of "
              f"rungs NVRTC builds differently from run to run, {res['not_rebuilt']} not rebuilt "
              "(of the records with a sass_hash)")
        for r, today in res["differ"][:10]:
            what = r.get("instantiation") or f"{r.get('kernel')} {r.get('m')}x{r.get('n')}"
            print(f"  {what} {r.get('precision', '')}: recorded {r['sass_hash']}, today {today}")
        if len(res["differ"]) > 10:
            print(f"  ... and {len(res['differ']) - 10} more")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
