"""The SASS manifest: a digest of the disassembled machine code of every
registered instantiation (GEMM rungs x aligned/unaligned x output type,
softmax configs, memory kernels, helpers), so that any change to a kernel's
machine code is deliberate and visible.

    python3 tests/sass_manifest.py          # rewrite tests/data/sass_manifest.json
    python3 tests/sass_manifest.py --sample KEY N   # compile KEY N times afresh and
                                                    # record any new digest as a variant
    python3 -m pytest tests/test_sass_manifest.py

A few instantiations are not reproducible: NVRTC's PTX for them varies from
compile to compile, and so does the SASS (tests/data/sass_manifest_variants.json
says which, with the evidence). For those the test accepts any digest seen
from the unchanged source under the same NVRTC, and before calling a new one a
change it compiles the source afresh a few times: a change is a digest the
current source never gives back among the known ones.

Keys name what an instantiation *is* (rung, alignment class, C type, arch),
never where its source lives, so files can move under an unchanged manifest.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from drvgemm.runtime.sass import sass_digest   # the one digest, shared with the bench records

MANIFEST = Path(__file__).resolve().parent / "data" / "sass_manifest.json"
VARIANTS = MANIFEST.with_name("sass_manifest_variants.json")


def instantiations():
    """(key, source, entry, defines, arch) of every registered instantiation."""
    from drvgemm.ladders.gemm import hopper
    from drvgemm.ladders.gemm.registry import RUNGS
    from drvgemm.ladders.memory import registry as memory
    from drvgemm.ladders.softmax import registry as softmax
    out = []
    for r in RUNGS:
        arch = r.arch if r.arch.endswith("a") else "sm_90"
        if r.source.endswith(".ptx"):
            out.append((f"gemm/{r.name}/{arch}", r.source, r.entry, None, arch))
            continue
        aligned_classes = (1,) if r.host == "tma" else (0, 1)
        outs = ("fp32", r.precision) if r.narrow_output else ("fp32",)
        for al in aligned_classes:
            for o in outs:
                d = dict(r.defines, ALIGNED=al)
                if o != "fp32":
                    d["OUT_16"] = 1
                out.append((f"gemm/{r.name}/aligned={al}/c={o}/{arch}", r.source, r.entry, d,
                             arch))
                if "SPLIT_K" in r.defines:   # rung 20's split-K build, launched for split > 1
                    out.append((f"gemm/{r.name}/aligned={al}/c={o}/splitk/{arch}", r.source,
                                r.entry, dict(d, SPLIT_K=1), arch))
    for r in softmax.SOFTMAX_RUNGS:
        for c in r.configs:
            arch = "sm_90"
            for precision, itemsize in (("fp32", 4), ("bf16", 2), ("fp16", 2)):
                for vec in sorted({c.vec(itemsize), 1}):
                    out.append((f"softmax/{c.describe(vec)}/{precision}/{arch}", r.source,
                                c.entry, c.defines(precision, vec), arch))
    for c in softmax.WINDOW_CONFIGS:
        for precision in softmax.window_precisions(c):
            out.append((f"softmax/{c.describe()}/{precision}/sm_90", c.source, c.entry,
                        c.defines(precision), "sm_90"))
    for mk in memory.MEM_KERNELS:
        out.append((f"memory/{mk.name}/sm_90", mk.source, mk.entry, mk.defines or None, "sm_90"))
    for e in ("scale_c", "scale_c_bf16", "scale_c_fp16"):
        out.append((f"helper/{e}/sm_90", "scale.cu", e, None, "sm_90"))
    for e in hopper.REDUCE_ENTRIES.values():   # rung 20's split-K reduction
        out.append((f"helper/{e}/{hopper.REDUCE_ARCH}", "split_reduce.cu", e, None,
                    hopper.REDUCE_ARCH))
    return out


def _nvrtc() -> str:
    from drvgemm.runtime.compiler import nvrtc_version
    return "%d.%d" % nvrtc_version()


def known_digests(key: str, recorded: dict) -> set:
    """Every digest the unchanged source is known to give for ``key``: the
    manifest's, plus the recorded variants when they were seen with this NVRTC."""
    out = {recorded[key]} if key in recorded else set()
    v = json.loads(VARIANTS.read_text())
    if v.get("nvrtc") == _nvrtc():
        out |= set(v["keys"].get(key, {}).get("digests", ()))
    return out


def nondeterministic(key: str) -> bool:
    return key in json.loads(VARIANTS.read_text())["keys"]


def sample(key: str) -> str:
    """The digest of one fresh compile of ``key`` (compile cache bypassed)."""
    import os
    from drvgemm.runtime import sass
    from drvgemm.runtime.compiler import compile_binary
    (_, source, entry, defines, arch), = [i for i in instantiations() if i[0] == key]
    old = os.environ.get("DRVGEMM_NO_CACHE")
    os.environ["DRVGEMM_NO_CACHE"] = "1"
    try:
        b = compile_binary(source, entry, defines=defines, arch=arch)
    finally:
        if old is None:
            del os.environ["DRVGEMM_NO_CACHE"]
        else:
            os.environ["DRVGEMM_NO_CACHE"] = old
    return sass_digest(sass.disassemble(b.cubin), b.entry)


def compute(progress=False) -> dict:
    import drvgemm
    from drvgemm.runtime import sass
    table = {}
    for key, source, entry, defines, arch in instantiations():
        k = drvgemm.compile(source, entry, defines=defines, arch=arch)
        table[key] = sass_digest(sass.disassemble(k.cubin), k.entry)
        if progress:
            print(f"{table[key]}  {key}", file=sys.stderr)
    return table


if __name__ == "__main__":
    if sys.argv[1:2] == ["--sample"]:
        key, times = sys.argv[2], int(sys.argv[3])
        v = json.loads(VARIANTS.read_text())
        if v.get("nvrtc") != _nvrtc():
            sys.exit(f"the variants were recorded with NVRTC {v.get('nvrtc')}, this is {_nvrtc()}: "
                     "start the file afresh")
        entry = v["keys"].setdefault(key, {"digests": [json.loads(MANIFEST.read_text())[key]]})
        for _ in range(times):
            d = sample(key)
            print(d, file=sys.stderr)
            if d not in entry["digests"]:
                entry["digests"].append(d)
        VARIANTS.write_text(json.dumps(v, indent=1) + "\n")
        sys.exit(0)
    table = compute(progress=True)
    MANIFEST.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"{len(table)} instantiations -> {MANIFEST}")
