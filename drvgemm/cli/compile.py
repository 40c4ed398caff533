"""``drvgemm compile``: the ptxas report of every kernel (no GPU needed), or
of the kernels of one source of your own (``drvgemm compile my.cu [NAME ...]
[-D N=4] [-I DIR] [--option=-std=c++20] [--arch sm_90a]``: every kernel it
defines, or the ones named, template instantiations included).

A line goes to stderr only for a kernel that is actually compiled (never for
a cache hit), so a warm run prints the table alone."""
from __future__ import annotations

import sys

from ..ladders.gemm.registry import RUNGS, rung_kernel
from ..runtime import compiler
from ..runtime.kernel import compile, compile_module
from ..tools.bench import extra_kernels

HEADER = ("kernel", "arch", "regs", "spill st B", "spill ld B", "stack B", "smem B", "dyn smem B")


def add(sub) -> None:
    c = sub.add_parser("compile", help="compile every kernel (or those of a source of yours) "
                                       "and print the ptxas report")
    c.add_argument("source", nargs="?", default=None,
                   help="a .cu or .ptx file of your own (default: drvgemm's kernel set)")
    c.add_argument("names", nargs="*",
                   help="with SOURCE: the kernels to report, e.g. 'kern' 'gemm<128>' "
                        "(default: every kernel SOURCE defines; a template's instantiation "
                        "must be named)")
    c.add_argument("--arch", default="sm_90", help="target architecture (default sm_90)")
    c.add_argument("-D", "--define", action="append", default=[], metavar="NAME[=VALUE]",
                   help="with SOURCE: a preprocessor define (repeatable)")
    c.add_argument("-I", "--include", action="append", default=[], metavar="DIR",
                   help="with SOURCE: a folder of headers, searched before the source's own "
                        "(repeatable)")
    c.add_argument("--option", action="append", default=[], metavar="OPT",
                   help="with SOURCE: an NVRTC option, written --option=OPT "
                        "(--option=-std=c++20, --option=--use_fast_math; repeatable)")
    c.add_argument("--kernels", default=None,
                   help="comma-separated labels to report (default: all), e.g. 01_naive,saxpy")
    c.set_defaults(func=run)


def _items(arch):
    """(label, arch, build, dynamic smem) of every kernel of the report."""
    for r in RUNGS:
        for aligned in (True, False):
            if aligned or r.host_side.unaligned:
                a = r.arch if r.arch.endswith("a") else arch
                yield (r.name + ("" if aligned else " (unaligned)"), a,
                       lambda r=r, al=aligned, a=a: rung_kernel(r, al, arch=a), r.smem)
    for label, src, entry, defines, karch in extra_kernels():
        a = karch or arch
        yield label, a, lambda s=src, e=entry, d=defines, a=a: compile(s, e, defines=d, arch=a), 0


def report(arch="sm_90", kernels=None, progress=None) -> tuple[str, int]:
    """(the table, the number of kernels that failed)."""
    arch = compiler.normalize_arch(arch)
    wanted = None if kernels is None else {k.strip() for k in kernels if k.strip()}
    items = [it for it in _items(arch) if wanted is None or it[0].split(" ")[0] in wanted
             or it[0] in wanted]
    if wanted is not None and not items:
        raise ValueError(f"no kernel named {', '.join(sorted(wanted))} in the report")
    return _table(items, progress)


def source_report(source, names=(), arch="sm_90", defines=(), progress=None, *,
                  include_paths=(), options=()) -> tuple[str, int]:
    """The same table for the kernels of one source: those named, or every
    kernel it defines. The source compiles once; a compile error is raised
    (CompileError, with NVRTC's log), not a row."""
    arch = compiler.normalize_arch(arch)
    with compiler.compile_listener(_listener(progress)):
        module = compile_module(source, list(names) or None, defines=list(defines) or None,
                                arch=arch, include_paths=list(include_paths),
                                options=list(options))
    labels = list(names) or module.names
    if not labels:
        raise ValueError(f"{source} defines no kernel (a template kernel needs its "
                         "instantiation named, e.g. 'kern<128>')")
    return _table([(n, module.arch, lambda n=n: module.kernel(n), 0) for n in labels], progress)


def _listener(progress):
    """What the compiler tells of each compile, as a progress line."""
    return (lambda what: progress(f"compiling {what}")) if progress else (lambda what: None)


def _table(items, progress=None) -> tuple[str, int]:
    """Build each (label, arch, build, dynamic smem) and lay out their ptxas
    figures: (the table, the number of builds that failed)."""
    rows, notes, failed = [], [], 0
    with compiler.compile_listener(_listener(progress)):
        for label, a, build, smem in items:
            try:
                res = build().resources
            except Exception as e:  # one kernel's failure is a row, not the end of the report
                failed += 1
                rows.append((label, a, f"FAILED: {type(e).__name__}: {str(e).splitlines()[0]}"))
                continue
            if res is None:
                rows.append((label, a, "no ptxas report"))
                continue
            rows.append((label, a, res.registers, res.spill_stores, res.spill_loads, res.stack,
                         res.static_smem, smem))
            notes += [f"{label}: {n}" for n in res.notes]
    w = max([len(HEADER[0])] + [len(r[0]) for r in rows])
    widths = [len(h) for h in HEADER[2:]]
    out = [f"{HEADER[0]:<{w}}  {HEADER[1]:<7}" + "".join(f" {h:>{n}}" for h, n in
                                                       zip(HEADER[2:], widths))]
    for r in rows:
        line = f"{r[0]:<{w}}  {r[1]:<7}"
        if len(r) == 3:
            line += f" {r[2]}"
        else:
            line += "".join(f" {v:>{n}}" for v, n in zip(r[2:], widths))
        out.append(line)
    out += [""] + notes if notes else []
    out.append("(B = bytes per thread for spills and stack, per block for shared memory)")
    return "\n".join(out), failed


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(args) -> int:
    if args.source is not None:
        if args.kernels:
            raise ValueError("--kernels picks from drvgemm's kernel set; with a SOURCE, name "
                             "its kernels after it")
        text, failed = source_report(args.source, args.names, args.arch, args.define, _progress,
                                     include_paths=args.include, options=args.option)
        print(text)
        return 1 if failed else 0
    if args.names or args.define or args.include or args.option:
        raise ValueError("kernel names, -D, -I and --option go with a SOURCE of your own")
    kernels = args.kernels.split(",") if args.kernels else None
    text, failed = report(args.arch, kernels, progress=_progress)
    print(text)
    return 1 if failed else 0
