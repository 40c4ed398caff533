"""``drvgemm occupancy``: blocks per SM of a registered rung, a .cu/.ptx
kernel or a what-if, which limit binds and what would raise it (the model of
drvgemm/analysis/occupancy.py, and the driver when there is a GPU)."""
from __future__ import annotations

import dataclasses
import re
import sys

from ..analysis.occupancy import (DeviceSpec, block_threads, format_size, kernel_max_threads,
                                  model, parse_size)
from ..ladders.gemm import registry
from ..runtime import driver
from ..runtime.errors import CompileError, CudaError
from ..runtime.kernel import compile
from ..tools.kernel_occupancy import occupancy
from . import _devices


def add(sub) -> None:
    p = sub.add_parser(
        "occupancy", help="blocks per SM, the binding limit and what would raise it",
        description="Occupancy of a registered rung, a .cu/.ptx kernel, or a what-if "
                    "(--regs with no kernel). Sizes take K/KiB (1024) or plain bytes.")
    p.add_argument("kernel", nargs="?", help="a rung name (drvgemm kernels) or a .cu/.ptx file")
    p.add_argument("--entry", help="kernel symbol in a .cu/.ptx file")
    p.add_argument("--block", help="threads per block: 256 or 16x16 (default: the rung's)")
    p.add_argument("--smem", help="dynamic shared memory per block (default: the rung's, else 0)")
    p.add_argument("--regs", type=int,
                   help="registers per thread (what-if; overrides the kernel's)")
    p.add_argument("--static-smem", help="static shared memory per block (what-if)")
    p.add_argument("--barriers", type=int, help="named-barrier ids per block (what-if)")
    p.add_argument("--maxrregcount", type=int, help="compile the kernel with this register cap")
    p.add_argument("--carveout", type=int, help="shared-memory carveout preference, percent")
    p.add_argument("--cluster", help="thread-block cluster shape, e.g. 2x1x1: also report "
                                     "cuOccupancyMaxActiveClusters (GPU only)")
    p.add_argument("--gpu", help=f"device spec from the catalogue: {_devices.catalogue_help()} "
                                 f"(default: this GPU, else {_devices.DEFAULT})")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a field of the device spec, e.g. smem_per_sm=102400")
    p.add_argument("--arch", help="architecture to compile for (default: the spec's)")
    p.set_defaults(func=run)


def _parse_block(text) -> int:
    try:
        dims = tuple(int(x) for x in re.split(r"[x,*]", str(text).strip()) if x)
        return block_threads(dims)
    except ValueError as e:
        raise ValueError(f"--block {text!r}: {e}") from None


def _cli_spec(args):
    gpu = driver.has_gpu()
    if args.gpu:
        spec = _devices.lookup(args.gpu, "resources").resources
    elif gpu:
        spec = DeviceSpec.from_device(driver.device())
    else:
        spec = _devices.lookup(_devices.DEFAULT, "resources").resources
    for item in args.set:
        key, _, value = item.partition("=")
        key = key.strip()
        names = {f.name for f in dataclasses.fields(DeviceSpec)}
        if key == "max_warps_per_sm":
            key, value = "max_threads_per_sm", str(int(value) * spec.warp_size)
        if key not in names or key in ("name", "cc", "smem_carveouts_kib"):
            raise ValueError(f"--set {item!r}: not a settable field; fields: "
                             f"{', '.join(sorted(names - {'name', 'cc', 'smem_carveouts_kib'}))}")
        spec = dataclasses.replace(spec, **{key: parse_size(value)})
    if args.set:
        spec = dataclasses.replace(spec, name=spec.name + " (modified)")
    return spec, gpu


def _compile_for_cli(args, spec):
    rung = registry.by_name().get(args.kernel)
    options = (f"--maxrregcount={args.maxrregcount}",) if args.maxrregcount else ()
    arch = args.arch or spec.arch or "sm_90"
    if rung is not None:
        if rung.arch.endswith("a") and not args.arch:
            arch = rung.arch
        # The instantiation gemm() runs for aligned shapes (none for a .ptx rung).
        k = compile(rung.source, rung.entry, defines=rung.instantiation_defines(True),
                    options=tuple(rung.options) + options, arch=arch)
        return k, rung.name, rung.threads, rung.smem
    if not args.kernel.endswith((".cu", ".ptx")):
        raise ValueError(f"{args.kernel!r} is neither a registered rung "
                         f"({', '.join(registry.by_name()) or 'none registered'}) nor a .cu/.ptx file")
    if not args.entry:
        raise ValueError(f"--entry NAME is needed to pick the kernel in {args.kernel}")
    k = compile(args.kernel, args.entry, options=options, arch=arch)
    return k, args.entry, None, 0


def _parse_cluster(text):
    try:
        dims = tuple(int(x) for x in str(text).lower().split("x"))
    except ValueError:
        dims = ()
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ValueError(f"--cluster {text!r}: give 1-3 positive sizes, e.g. 2x1x1")
    return dims


def _check_runs_on(rung, spec):
    """A rung the spec's device cannot run (sm_90a on an A100) has no
    occupancy there: say so instead of printing numbers."""
    if rung is None or spec.cc is None:
        return
    need = int(rung.arch[3:].rstrip("a"))
    have = spec.cc[0] * 10 + spec.cc[1]
    if (have != need) if rung.arch.endswith("a") else (have < need):
        where = f"exactly sm_{need}" if rung.arch.endswith("a") else f"sm_{need} or newer"
        raise ValueError(f"{rung.name} cannot run on {spec.name} (sm_{have}): it needs "
                         f"{rung.arch} ({where})")


def _cluster_not_asked(cluster, why):
    """--cluster is answered by the driver only (cuOccupancyMaxActiveClusters)."""
    if cluster is not None:
        print(f"note: --cluster {'x'.join(map(str, cluster))} was not answered: only the driver "
              f"(cuOccupancyMaxActiveClusters) counts clusters, and {why}", file=sys.stderr)


def run(args) -> int:
    try:
        spec, gpu = _cli_spec(args)
        cluster = _parse_cluster(args.cluster) if args.cluster else None
        _check_runs_on(registry.by_name().get(args.kernel or ""), spec)
        smem = parse_size(args.smem) if args.smem is not None else None
        threads = _parse_block(args.block) if args.block is not None else None
        what_if = args.regs is not None or args.static_smem is not None or args.barriers is not None
        if args.kernel is None:
            if args.regs is None:
                raise ValueError("give a KERNEL (rung name or .cu/.ptx file) or --regs N "
                                 "for a what-if")
            if threads is None:
                raise ValueError("--block is needed with no kernel")
            point = model(spec, args.regs, threads, smem or 0,
                          parse_size(args.static_smem or 0), barriers=args.barriers or 0,
                          carveout=args.carveout)
            print(f"what if: {args.regs} registers/thread, block of {threads} threads, "
                  f"{format_size(smem or 0)} dynamic shared memory on {spec.name}\n")
            print(point.table())
            print("\nnumbers from the model (no kernel was compiled, the driver was not asked)")
            _cluster_not_asked(cluster, "a what-if is the model's alone")
            return 0
        kernel, name, rung_threads, rung_smem = _compile_for_cli(args, spec)
        threads = threads or rung_threads
        if threads is None:
            raise ValueError("--block is needed for a kernel that is not a registered rung")
        smem = rung_smem if smem is None else smem
        if what_if:
            res = kernel.resources
            regs = res.registers if args.regs is None else args.regs
            static = res.static_smem if args.static_smem is None else parse_size(args.static_smem)
            bars = res.barriers if args.barriers is None else args.barriers
            point = model(spec, regs, threads, smem, static, barriers=bars, carveout=args.carveout,
                          max_threads_per_block=kernel_max_threads(kernel.ptx, kernel.entry))
            print(f"{name} with what-if changes on {spec.name}\n")
            print(point.table())
            print("\nnumbers from the model (what-if values: the driver was not asked)")
            _cluster_not_asked(cluster, "a what-if is the model's alone")
            return 0
        explicit = spec if (args.gpu or args.set or not gpu) else None
        if cluster is not None and not gpu:
            _cluster_not_asked(cluster, "there is no GPU")
        result = occupancy(kernel, threads, smem, spec=explicit, carveout=args.carveout,
                           cluster=cluster)
        result.kernel = name
        print(result)
        return 0 if result.agrees in (None, True) else 1
    except (ValueError, FileNotFoundError) as e:
        print(f"drvgemm occupancy: {e}", file=sys.stderr)
        return 2
    except (CompileError, CudaError) as e:  # they carry their own message
        print(f"drvgemm occupancy: {e}", file=sys.stderr)
        return 2
