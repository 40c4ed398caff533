"""The SASS manifest: a digest of the disassembled machine code of every
registered instantiation (GEMM rungs x aligned/unaligned x output type,
softmax configs, memory kernels, helpers), so that any change to a kernel's
machine code is deliberate and visible.

    python3 tests/sass_manifest.py          # rewrite tests/data/sass_manifest.json
                                            # (with the code digests and the
                                            # opcode profiles below)
    python3 tests/sass_manifest.py --only TEXT      # rewrite only the entries whose
                                                    # key contains TEXT (the rest kept)
    python3 tests/sass_manifest.py --inputs         # after a change to the compiler's
                                                    # own code: record the input digests
                                                    # anew where the SASS is unchanged
    python3 tests/sass_manifest.py --sample KEY N   # compile KEY N times afresh:
                                                    # digests and profile distances
    python3 -m pytest tests/test_sass_manifest.py
    DRVGEMM_SASS_RECOMPILE=1 python3 -m pytest tests/test_sass_manifest.py
                                            # compile every one, even unchanged

The test compiles only instantiations whose inputs differ from the recorded
compile's (tests/data/sass_manifest_inputs.json: source, the bytes of every
included file, defines, options, arch, toolchain and the compiler module's own
code, wherever the files lie), so a clean clone checks the manifest without
running NVRTC; any edit that reaches a kernel is compiled and compared.

A few instantiations are not reproducible: NVRTC's PTX for them depends on
where the process's heap happens to lie (with address-space randomisation
off, every compile agrees), so a fresh process can give another SASS from
the same source: the same instructions, a shared load or two placed
differently. tests/data/sass_manifest_nondeterministic.json names them by
rung, and for each instantiation keeps an opcode profile (how many of each
instruction form: opcode, modifiers and immediates). For those the test asks for the manifest's
digest *or* a profile within PROFILE_TOLERANCE of the recorded one.

Keys name what an instantiation *is* (rung, alignment class, C type, arch),
never where its source lives, so files can move under an unchanged manifest.
"""
from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

# The drvgemm of this tree, whatever else is installed (an editable install of
# another checkout would describe that checkout's kernels).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from drvgemm.runtime import sass
from drvgemm.runtime.sass import sass_digest   # the one digest, shared with the bench records

MANIFEST = Path(__file__).resolve().parent / "data" / "sass_manifest.json"
NONDETERMINISTIC = MANIFEST.with_name("sass_manifest_nondeterministic.json")
# The machine-code bytes (digest of each entry's .text section) that gave the
# manifest's digests, written with it: the test's shortcut past nvdisasm.
CODES = MANIFEST.with_name("sass_manifest_code.json")
# What each of those compiles read (drvgemm.runtime.compiler.input_digest:
# source, included files' bytes, defines, options, arch, toolchain, the
# compiler module's own code), written with it: the test's shortcut past
# NVRTC. An instantiation whose inputs are those of the recorded compile is
# that compile; any other is compiled and held against the digests.
INPUTS = MANIFEST.with_name("sass_manifest_inputs.json")
# The compilers the manifest's SASS came from, written with it. Another release
# builds other SASS for many instantiations (NVRTC 13.0 against 13.5: the
# window rungs, among others), so the manifest is checked only under these;
# the test extra pins them (pyproject.toml), and a move to a new release is a
# rewrite of the manifest under it.
TOOLCHAIN = MANIFEST.with_name("sass_manifest_toolchain.json")
COMPILERS = ("nvidia-cuda-nvrtc", "nvidia-nvjitlink")


def toolchain() -> dict:
    """The installed compilers' wheel versions ('' where not from a wheel)."""
    from drvgemm.runtime.compiler import _dist_version
    return {dist: _dist_version(dist) for dist in COMPILERS}


def other_toolchain() -> str | None:
    """Why the manifest cannot be checked here (its compilers are not the
    installed ones), or None."""
    recorded = json.loads(TOOLCHAIN.read_text()) if TOOLCHAIN.exists() else {}
    now = toolchain()
    if recorded == now:
        return None
    said = lambda t: ", ".join(f"{d} {t.get(d) or '?'}" for d in COMPILERS)  # noqa: E731
    return (f"the SASS manifest was recorded with {said(recorded)}; this is {said(now)}, whose "
            f"SASS differs by release: pip install the recorded ones (the test extra pins "
            f"them) to check it, or rewrite it (python3 tests/sass_manifest.py)")

# Instruction forms by which a nondeterministic instantiation's opcode profile
# may differ from the recorded one (sum of |count differences|). Rung 08's
# variants from fresh processes lie 0 or 1 apart (reordered, renamed, an LDS
# in place of a NOP); the smallest real change tried, APAD 4 -> 12 (only the
# shared-memory offsets move), lies 348 apart, KT_UNROLL 2 -> 1 3291.
PROFILE_TOLERANCE = 8


def instantiations():
    """(key, source, entry, defines, arch) of every registered instantiation."""
    from drvgemm.ladders.gemm import split_k, staging
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
                d = r.instantiation_defines(al, o != "fp32")
                out.append((f"gemm/{r.name}/aligned={al}/c={o}/{arch}", r.source, r.entry, d,
                             arch))
                if "SPLIT_K" in r.defines:   # rung 20's split-K build, launched for split > 1
                    out.append((f"gemm/{r.name}/aligned={al}/c={o}/splitk/{arch}", r.source,
                                r.entry, r.instantiation_defines(al, o != "fp32", split_k=True),
                                arch))
    for r in softmax.SOFTMAX_RUNGS:
        for c in r.configs:
            arch = "sm_90"
            for precision, itemsize in (("fp32", 4), ("bf16", 2), ("fp16", 2)):
                for vec in sorted({c.vec(itemsize), 1}):
                    out.append((f"softmax/{c.describe(vec)}/{precision}/{arch}", r.source,
                                c.entry, c.defines(precision, vec), arch))
    for c in softmax.PACKED_CONFIGS:      # rung 04's packed rows: 16-byte vectors only
        for precision, itemsize in (("fp32", 4), ("bf16", 2), ("fp16", 2)):
            if c.packed_cols < 16 // itemsize:
                vec = c.vec(itemsize)
                out.append((f"softmax/{c.describe(vec)}/{precision}/sm_90", "softmax_04_vectorized.cu",
                            c.entry, c.defines(precision, vec), "sm_90"))
    for c in softmax.ROW_TILE_CONFIGS:    # rung 10's CROWDED builds (rows whose slots crowd the banks)
        for precision in ("bf16", "fp16") + (("fp32",) if c.row_threads > 1 else ()):
            out.append((f"softmax/{c.describe(1)} crowded/{precision}/sm_90", "softmax_10_row_tile.cu",
                        c.entry, {**c.defines(precision, 1), "CROWDED": 1}, "sm_90"))
    for c in softmax.WINDOW_CONFIGS:
        for precision in softmax.window_precisions(c):
            out.append((f"softmax/{c.describe()}/{precision}/sm_90", c.source, c.entry,
                        c.defines(precision), "sm_90"))
    for mk in memory.MEM_KERNELS:
        out.append((f"memory/{mk.name}/sm_90", mk.source, mk.entry, mk.defines or None, "sm_90"))
    for e in ("scale_c", "scale_c_bf16", "scale_c_fp16"):
        out.append((f"helper/{e}/sm_90", "scale.cu", e, None, "sm_90"))
    for e in (*split_k.REDUCE_ENTRIES.values(),   # the split-K reduction (rungs 08, 20)
              *split_k.DEEP_REDUCE_ENTRIES.values()):
        out.append((f"helper/{e}/sm_90", "split_reduce.cu", e, None, "sm_90"))
    for e in staging.PAD_ENTRIES.values():      # rung 20's staging copy
        out.append((f"helper/{e}/sm_90", "pad_rows.cu", e, None, "sm_90"))
    return out


def nondeterministic_rungs() -> list[str]:
    return json.loads(NONDETERMINISTIC.read_text())["rungs"]


def nondeterministic(key: str) -> bool:
    """Whether ``key`` is an instantiation of a rung NVRTC does not reproduce."""
    return key.split("/")[:2] in (["gemm", r] for r in nondeterministic_rungs())


_PREDICATE = re.compile(r"^@!?U?P\w+\s+")
_IMMEDIATE = re.compile(r"(?<![\w.])-?0x[0-9a-f]+|(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def opcode_profile(sass_text: str, entry: str) -> dict:
    """How often each instruction form occurs in ``entry``: its opcode with
    modifiers and its immediate operands (offsets, constants), registers and
    predicates left out, NOPs too (ptxas pads with them where the schedule
    moves). NVRTC's variants reorder and rename; a changed kernel changes forms."""
    out = Counter()
    for ins in sass.entry_instructions(sass_text, entry):
        op, _, operands = _PREDICATE.sub("", ins).partition(" ")
        if op != "NOP":
            out[" ".join([op] + sorted(_IMMEDIATE.findall(operands)))] += 1
    return dict(sorted(out.items()))


def profile_distance(a: dict, b: dict) -> int:
    return sum(abs(a.get(op, 0) - b.get(op, 0)) for op in set(a) | set(b))


def sample(key: str) -> tuple[str, dict]:
    """(digest, opcode profile) of one fresh compile of ``key`` (compile cache
    bypassed)."""
    import os
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
    text = sass.disassemble(b.cubin)
    return sass_digest(text, b.entry), opcode_profile(text, b.entry)


def _shard(shard, only=None):
    todo = [i for i in instantiations() if only is None or only in i[0]]
    return todo if shard is None else todo[shard[0]::shard[1]]


def compute(progress=False, shard=None, only=None) -> tuple[dict, dict, dict, dict]:
    """({key: digest} of every instantiation, {key: opcode profile} of the
    nondeterministic ones, {key: machine-code digest}: CODES, {key: input
    digest}: INPUTS). ``shard`` =
    (i, n): only every n-th instantiation from the i-th; ``only``: the keys
    that contain it."""
    import drvgemm
    from drvgemm.runtime.compiler import input_digest
    table, profiles, codes, inputs = {}, {}, {}, {}
    for key, source, entry, defines, arch in _shard(shard, only):
        k = drvgemm.compile(source, entry, defines=defines, arch=arch)
        text = sass.disassemble(k.cubin)
        table[key] = sass_digest(text, k.entry)
        codes[key] = sass.code_digest(k.cubin, k.entry)
        inputs[key] = input_digest(source, [entry], defines=defines, arch=arch)
        if nondeterministic(key):
            profiles[key] = opcode_profile(text, k.entry)
        if progress:
            print(f"{table[key]}  {key}", file=sys.stderr)
    return table, profiles, codes, inputs


def changes(shard=None, *, recompile=False) -> dict:
    """{key: (recorded digest, digest now)} of the instantiations whose SASS
    changed. An instantiation whose inputs (INPUTS) are the recorded ones is
    the recorded compile and is not compiled again (``recompile``: compile
    every one anyway). Machine code with the bytes recorded in CODES is
    unchanged without disassembling it (nvdisasm costs ~0.4 s a cubin, more
    than most compiles); other bytes are disassembled and held against the
    manifest's digest, and for a nondeterministic rung against its opcode
    profile."""
    import drvgemm
    from drvgemm.runtime.compiler import input_digest
    recorded = json.loads(MANIFEST.read_text())
    codes = json.loads(CODES.read_text())
    inputs = json.loads(INPUTS.read_text()) if INPUTS.exists() else {}
    profiles = json.loads(NONDETERMINISTIC.read_text())["profiles"]
    out = {}
    for key, source, entry, defines, arch in _shard(shard):
        if not recompile and key in inputs and key in recorded and inputs[key] is not None \
                and input_digest(source, [entry], defines=defines, arch=arch) == inputs[key]:
            continue
        k = drvgemm.compile(source, entry, defines=defines, arch=arch)
        if key in codes and sass.code_digest(k.cubin, k.entry) == codes[key]:
            continue
        text = sass.disassemble(k.cubin)
        now = sass_digest(text, k.entry)
        if now == recorded.get(key):
            continue
        if key in profiles and profile_distance(opcode_profile(text, k.entry),
                                                profiles[key]) <= PROFILE_TOLERANCE:
            continue     # NVRTC's variation: the same instruction forms, reordered
        out[key] = (recorded.get(key), now)
    return out


def refresh_inputs() -> dict:
    """Record every instantiation's input digest anew where its machine code
    is still the manifest's (a change to the compiler's code that reaches no
    kernel moves every input digest): compiles each one and holds it against
    the manifest first. Returns ``changes`` of those whose SASS changed; their
    recorded inputs stay as they were, so the test compiles and reports them."""
    from drvgemm.runtime.compiler import input_digest
    changed = changes(recompile=True)
    inputs = json.loads(INPUTS.read_text()) if INPUTS.exists() else {}
    for key, source, entry, defines, arch in instantiations():
        if key not in changed:
            inputs[key] = input_digest(source, [entry], defines=defines, arch=arch)
    INPUTS.write_text(json.dumps(inputs, indent=1, sort_keys=True) + "\n")
    return changed


def _usage_ok(args) -> bool:
    """The forms the docstring lists; anything else (a --help, a typo) is
    refused rather than taken for a rewrite of every record."""
    return (args in ([], ["--inputs"]) or (args[:1] == ["--only"] and len(args) == 2)
            or (args[:1] == ["--sample"] and len(args) == 3 and args[2].isdigit()))


if __name__ == "__main__":
    if not _usage_ok(sys.argv[1:]):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2 if sys.argv[1:] not in (["--help"], ["-h"]) else 0)
    if sys.argv[1:2] in (["--inputs"], ["--only"]) and other_toolchain():
        sys.exit(f"{other_toolchain()}; --inputs and --only keep the other records, which "
                 "would mix two releases")
    if sys.argv[1:2] == ["--inputs"]:
        changed = refresh_inputs()
        for key, (was, now) in sorted(changed.items()):
            print(f"SASS changed, input digest not recorded: {key} ({was} -> {now})")
        print(f"input digests -> {INPUTS}")
        sys.exit(1 if changed else 0)
    if sys.argv[1:2] == ["--sample"]:
        key, times = sys.argv[2], int(sys.argv[3])
        recorded = json.loads(MANIFEST.read_text()).get(key)
        profile = json.loads(NONDETERMINISTIC.read_text())["profiles"].get(key)
        for _ in range(times):
            d, p = sample(key)
            far = "" if profile is None else f"  {profile_distance(p, profile)} from the profile"
            print(d + ("  (the manifest's)" if d == recorded else "") + far)
        sys.exit(0)
    only = sys.argv[2] if sys.argv[1:2] == ["--only"] else None
    table, profiles, codes, inputs = compute(progress=True, only=only)
    nd = json.loads(NONDETERMINISTIC.read_text())
    if only is not None:    # the other entries as recorded
        keep = {k for k, *_ in instantiations() if only not in k}
        for new, path in ((table, MANIFEST), (codes, CODES), (inputs, INPUTS)):
            old = json.loads(path.read_text()) if path.exists() else {}
            new.update({k: v for k, v in old.items() if k in keep})
        profiles.update({k: v for k, v in nd["profiles"].items() if k in keep})
    MANIFEST.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    CODES.write_text(json.dumps(codes, indent=1, sort_keys=True) + "\n")
    INPUTS.write_text(json.dumps(inputs, indent=1, sort_keys=True) + "\n")
    nd["profiles"] = profiles
    NONDETERMINISTIC.write_text(json.dumps(nd, indent=1) + "\n")
    TOOLCHAIN.write_text(json.dumps(toolchain(), indent=1, sort_keys=True) + "\n")
    print(f"{len(table)} instantiations -> {MANIFEST}")
