"""``drvgemm roofline``: the seed's roofline and Little's law arithmetic for a
device (drvgemm/analysis/roofline.py), with this GPU's measured ceilings when
it has built-in figures."""
from __future__ import annotations

import sys
from typing import Mapping

from ..analysis.roofline import (DEFAULT_DRAM_LATENCY_CYCLES, PRECISION_BYTES, RooflineSpec,
                                 analysis_report, spec_for_device_name)
from ..runtime import driver
from ..tools import ceilings
from . import _devices


def live_spec(measured: Mapping[str, float] | None = None) -> tuple[RooflineSpec | None, str | None]:
    """(spec, device name) for the GPU in this process, measured figures
    applied; (None, None) when there is no usable GPU, (None, name) when the
    GPU has no built-in figures."""
    try:
        name = driver.device().name
    except Exception:
        return None, None
    spec = spec_for_device_name(name)
    if spec is None:
        return None, name
    return spec.with_measured(measured), name


def add(sub) -> None:
    p = sub.add_parser(
        "roofline", help="roofline and Little's law analysis of square GEMM on a device",
        description="Roofline arithmetic for one device, size and precision: ridge "
                    "point, operational intensities, time bounds, the summary table and the "
                    "bytes in flight Little's law asks for. Without --gpu it uses the GPU in "
                    f"this machine when it has built-in figures, else {_devices.DEFAULT} (the "
                    "same default as drvgemm occupancy). The worked example of the seed "
                    "notes, the design notes this project grew from: --gpu 'RTX 4000 Ada'.")
    p.add_argument("--gpu", metavar="NAME",
                   help=f"device from the catalogue: {_devices.catalogue_help()} "
                        f"(default: this GPU, else {_devices.DEFAULT})")
    p.add_argument("--n", type=int, default=3072, help="square GEMM size (default 3072)")
    p.add_argument("--precision", default="fp32", choices=sorted(PRECISION_BYTES),
                   help="math precision (default fp32)")
    p.add_argument("--latency", type=float, metavar="CYCLES",
                   help="DRAM latency in cycles for Little's law (default: the device's figure, "
                        f"else {DEFAULT_DRAM_LATENCY_CYCLES})")
    p.set_defaults(func=run)


def run(args, measured: Mapping[str, float] | None = None) -> int:
    """`drvgemm roofline`. ``measured`` replaces datasheet ceilings with
    measured ones (see RooflineSpec.with_measured) for the live GPU."""
    if args.n < 1:
        print("drvgemm roofline: --n must be >= 1", file=sys.stderr)
        return 2
    if args.latency is not None and not args.latency > 0:
        print(f"drvgemm roofline: --latency must be a positive number of cycles, not "
              f"{args.latency:g}", file=sys.stderr)
        return 2
    if args.gpu:
        try:
            spec = _devices.lookup(args.gpu, "ceilings").ceilings
        except ValueError as e:
            print(f"drvgemm roofline: {e}", file=sys.stderr)
            return 2
    else:
        if measured is None:
            if driver.has_gpu() and spec_for_device_name(driver.device().name) is not None:
                measured = ceilings.device_ceilings()
        spec, device_name = live_spec(measured)
        if spec is None:
            if device_name is not None:
                print(f"drvgemm roofline: no built-in figures for {device_name}; showing "
                      f"{_devices.DEFAULT} (choose a device with --gpu)", file=sys.stderr)
            spec = _devices.lookup(_devices.DEFAULT, "ceilings").ceilings
    try:
        print(analysis_report(spec, args.n, args.precision, latency_cycles=args.latency))
    except ValueError as e:
        print(f"drvgemm roofline: {e}", file=sys.stderr)
        return 2
    return 0
