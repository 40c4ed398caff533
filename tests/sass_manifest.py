"""The SASS manifest: a digest of the disassembled machine code of every
registered instantiation (GEMM rungs x aligned/unaligned x output type,
softmax configs, memory kernels, helpers), so that any change to a kernel's
machine code is deliberate and visible.

    python3 tests/sass_manifest.py          # rewrite tests/data/sass_manifest.json
    python3 -m pytest tests/test_sass_manifest.py

Keys name what an instantiation *is* (rung, alignment class, C type, arch),
never where its source lives, so files can move under an unchanged manifest.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

MANIFEST = Path(__file__).resolve().parent / "data" / "sass_manifest.json"

# An instruction line of nvdisasm: "/*0040*/   IADD3 R0, R2, 0x7f, RZ ;" -- the
# address and the section/symbol lines (which carry the entry's name) are left out.
_INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;")


_SECTION = re.compile(r"^//-+ (\S+)\s+-+$")


def sass_digest(sass: str, entry: str | None = None) -> str:
    """Digest of the instructions of one entry's .text section (all of them
    when ``entry`` is None): a cubin of a multi-kernel file holds every kernel."""
    body, section = [], None
    for line in sass.splitlines():
        s = _SECTION.match(line)
        if s:
            section = s.group(1)
            continue
        m = _INSTR.match(line)
        if m and (entry is None or section == f".text.{entry}"):
            body.append(m.group(1))
    if not body:
        raise ValueError(f"no instructions for entry {entry!r}")
    return hashlib.sha256("\n".join(body).encode()).hexdigest()[:16]


def instantiations():
    """(key, source, entry, defines, arch) of every registered instantiation."""
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
    return out


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
    table = compute(progress=True)
    MANIFEST.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"{len(table)} instantiations -> {MANIFEST}")
