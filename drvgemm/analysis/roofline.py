"""Roofline and Little's law for GEMM: pure arithmetic, no GPU.

A kernel's speed is capped by two roofs: the arithmetic peak of the units it
uses, and the bandwidth of the memory level it streams from times its
operational intensity (FLOP per byte moved). For C = A @ B the flops are
fixed (2mnk) but the bytes depend entirely on reuse, so the same GEMM can sit
far below the ridge (no reuse) or far above it (every element read once).

Units are decimal throughout (1 GB = 1e9 B, 1 TFLOP/s = 1e12 FLOP/s), the
way datasheets quote bandwidth and peaks.

Little's law sizes the parallelism a memory system needs: to keep DRAM busy
the device must have latency x bandwidth bytes in flight at every moment, or
the pipe drains while requests wait.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping, Sequence

from .devices import CATALOGUE, RooflineSpec, find, for_device_name

__all__ = [
    "RooflineSpec", "SPECS", "get_spec", "spec_for_device_name",
    "PRECISION_BYTES", "OUTPUT_BYTES", "DEFAULT_DRAM_LATENCY_CYCLES",
    "gemm_flops", "naive_bytes", "ideal_bytes", "tiled_bytes",
    "naive_oi", "ideal_oi", "tile_oi", "tile_traffic_reduction", "min_tile_for_ridge",
    "ridge_point", "min_compute_bound_n", "attainable", "roofline_fraction",
    "TimeBounds", "time_bounds", "SummaryRow", "summary_rows",
    "bytes_per_cycle", "bytes_in_flight",
    "format_bytes", "format_time", "format_ratio", "format_rate", "analysis_report",
    "record_intensity",
]

# Bytes per input element for each math precision. TF32 reads ordinary fp32
# words; the tensor core drops the low mantissa bits internally.
PRECISION_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}
# C as float32, what every rung writes by default (the Hopper bf16 / fp16 rungs
# can also write a 16-bit C: pass out_bytes=2 where that is the point).
OUTPUT_BYTES = 4
# Global-memory latency of the worked example (700-800 cycles is typical of
# recent GPUs); used for Little's law when a device's own figure is unknown,
# since datasheets do not publish one.
DEFAULT_DRAM_LATENCY_CYCLES = 800


# --------------------------------------------------------------------------
# device figures
# --------------------------------------------------------------------------
def _spec_table() -> dict[str, RooflineSpec]:
    return {d.key: d.ceilings for d in CATALOGUE if d.ceilings}


# The devices with roofline figures (drvgemm/analysis/devices.py), by name key.
SPECS: dict[str, RooflineSpec] = _spec_table()


def get_spec(name: str) -> RooflineSpec:
    """A built-in spec by name, forgiving about case, spaces and dashes
    ("RTX 4000 Ada", "rtx4000-ada", "h200")."""
    d = find(name)
    if d is None or d.ceilings is None:
        raise ValueError(f"no built-in roofline figures for {name!r}; known: "
                         f"{', '.join(s.name for s in SPECS.values())}")
    return d.ceilings


def spec_for_device_name(device_name: str) -> RooflineSpec | None:
    """Map the name the driver reports to a built-in spec, or None. Variants
    with other clocks or memory (PCIe, NVL, SFF, 40 GB A100) are not matched:
    their ceilings differ from the SXM datasheet figures."""
    d = for_device_name(device_name)
    return None if d is None else d.ceilings


# --------------------------------------------------------------------------
# flops, bytes, operational intensity
# --------------------------------------------------------------------------
def _mnk(m, n, k):
    n = m if n is None else n
    k = m if k is None else k
    return m, n, k


def gemm_flops(m: int, n: int | None = None, k: int | None = None) -> int:
    """One multiply and one add per (i, j, l) triple: 2mnk."""
    m, n, k = _mnk(m, n, k)
    return 2 * m * n * k


def naive_bytes(m: int, n: int | None = None, k: int | None = None, *, in_bytes: int = 4) -> int:
    """DRAM traffic with no reuse at all: every multiply-add fetches its A and
    its B element afresh (the single write of C is negligible beside it and,
    as in the worked example, not counted)."""
    m, n, k = _mnk(m, n, k)
    return 2 * m * n * k * in_bytes


def ideal_bytes(m: int, n: int | None = None, k: int | None = None, *,
                in_bytes: int = 4, out_bytes: int | None = None) -> int:
    """Traffic with perfect reuse: A and B read once, C written once."""
    m, n, k = _mnk(m, n, k)
    out_bytes = in_bytes if out_bytes is None else out_bytes
    return (m * k + k * n) * in_bytes + m * n * out_bytes


def tiled_bytes(m: int, n: int, k: int, tile_m: int, tile_n: int | None = None, *,
                in_bytes: int = 4, out_bytes: int = OUTPUT_BYTES, read_c: bool = False) -> int:
    """Global-memory traffic of a kernel that gives each block a tile_m x tile_n
    piece of C and streams the matching A rows and B columns through shared
    memory: A is fetched once per column of blocks, B once per row of blocks,
    C written once (and read once more when beta != 0). Edge tiles are counted
    at their clipped size, so this is the minimum such a kernel moves."""
    tile_n = tile_m if tile_n is None else tile_n
    blocks_m = -(-m // tile_m)
    blocks_n = -(-n // tile_n)
    a = m * k * blocks_n
    b = k * n * blocks_m
    c = m * n * (2 if read_c else 1)
    return (a + b) * in_bytes + c * out_bytes


def naive_oi(in_bytes: int = 4) -> float:
    """Two loads per multiply-add: 2 FLOP per 2*in_bytes bytes (0.25 for fp32)."""
    return 1.0 / in_bytes


def ideal_oi(m: int, n: int | None = None, k: int | None = None, *,
             in_bytes: int = 4, out_bytes: int | None = None) -> float:
    """FLOP per byte with perfect reuse; n/6 for square fp32."""
    return gemm_flops(m, n, k) / ideal_bytes(m, n, k, in_bytes=in_bytes, out_bytes=out_bytes)


def tile_oi(tile_m: int, tile_n: int | None = None, *, in_bytes: int = 4) -> float:
    """Intensity of the shared-memory tile's main loop. For each step of K a
    block loads tile_m + tile_n elements (a column of its A slab, a row of its
    B slab) and does 2*tile_m*tile_n flops with them; for a T x T tile that is
    2T^2 flops per 2T elements, T/in_bytes FLOP/B (T/4 for fp32)."""
    tile_n = tile_m if tile_n is None else tile_n
    return 2 * tile_m * tile_n / ((tile_m + tile_n) * in_bytes)


def tile_traffic_reduction(tile: int) -> float:
    """Fraction of the no-reuse A/B traffic a T x T tile saves: each element
    fetched serves T multiply-adds instead of one, so 1 - 1/T."""
    return 1.0 - 1.0 / tile


# --------------------------------------------------------------------------
# ridge point and thresholds
# --------------------------------------------------------------------------
def _exact(x: float) -> Fraction:
    # repr() is the shortest decimal that round-trips, i.e. the figure as it
    # was written (26.7e12, 360e9), so thresholds come out exact.
    return Fraction(repr(float(x)))


def ridge_point(spec: RooflineSpec, precision: str = "fp32", *, level: str = "dram") -> float:
    """FLOP/B where the bandwidth slope meets the compute roof."""
    return spec.peak(precision) / _bandwidth(spec, level)


def _bandwidth(spec: RooflineSpec, level: str) -> float:
    if level == "dram":
        return spec.dram_bw
    if level == "l2":
        if spec.l2_bw is None:
            raise ValueError(f"{spec.name} has no L2 bandwidth figure")
        return spec.l2_bw
    raise ValueError(f"level must be 'dram' or 'l2', got {level!r}")


def min_compute_bound_n(spec: RooflineSpec, precision: str = "fp32", *,
                        in_bytes: int | None = None, out_bytes: int | None = None) -> int:
    """Smallest square n whose ideal-reuse intensity reaches the ridge.
    Square ideal intensity is 2n / (2*in_bytes + out_bytes), so
    n >= ridge * (2*in_bytes + out_bytes) / 2 (ridge * 6 for fp32)."""
    in_bytes = PRECISION_BYTES[precision] if in_bytes is None else in_bytes
    out_bytes = in_bytes if out_bytes is None else out_bytes
    ridge = _exact(spec.peak(precision)) / _exact(spec.dram_bw)
    return max(1, math.ceil(ridge * (2 * in_bytes + out_bytes) / 2))


def min_tile_for_ridge(spec: RooflineSpec, precision: str = "fp32", *,
                       in_bytes: int | None = None) -> int:
    """Smallest square tile T whose main loop would be compute-bound even if
    every tile load went to DRAM (T / in_bytes >= ridge)."""
    in_bytes = PRECISION_BYTES[precision] if in_bytes is None else in_bytes
    ridge = _exact(spec.peak(precision)) / _exact(spec.dram_bw)
    return math.ceil(ridge * in_bytes)


def attainable(oi: float, peak: float, bw: float) -> float:
    """The roofline: min(peak, oi * bandwidth), FLOP/s."""
    return min(peak, oi * bw)


def roofline_fraction(measured_flops: float, oi: float, spec: RooflineSpec,
                      precision: str = "fp32") -> float:
    """Measured FLOP/s over the DRAM roofline bound at this intensity."""
    return measured_flops / attainable(oi, spec.peak(precision), spec.dram_bw)


# --------------------------------------------------------------------------
# time bounds and the summary table
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class TimeBounds:
    """Lower bounds on run time, seconds; naive_l2 is None with no L2 figure."""
    flops: int
    ideal_bytes: int
    naive_bytes: int
    compute: float
    ideal_dram: float
    naive_dram: float
    naive_l2: float | None


def time_bounds(spec: RooflineSpec, m: int, n: int | None = None, k: int | None = None, *,
                precision: str = "fp32", in_bytes: int | None = None,
                out_bytes: int | None = None) -> TimeBounds:
    in_bytes = PRECISION_BYTES[precision] if in_bytes is None else in_bytes
    flops = gemm_flops(m, n, k)
    ideal = ideal_bytes(m, n, k, in_bytes=in_bytes, out_bytes=out_bytes)
    naive = naive_bytes(m, n, k, in_bytes=in_bytes)
    return TimeBounds(
        flops=flops, ideal_bytes=ideal, naive_bytes=naive,
        compute=flops / spec.peak(precision),
        ideal_dram=ideal / spec.dram_bw,
        naive_dram=naive / spec.dram_bw,
        naive_l2=None if spec.l2_bw is None else naive / spec.l2_bw)


@dataclass(frozen=True)
class SummaryRow:
    scenario: str
    limiter: str
    time: float          # seconds
    ratio: float         # time / compute bound


def summary_rows(spec: RooflineSpec, m: int, n: int | None = None, k: int | None = None, *,
                 precision: str = "fp32", in_bytes: int | None = None,
                 out_bytes: int | None = None) -> list[SummaryRow]:
    """The summary table: for each scenario the slower of its compute
    and memory bounds, what sets it, and how far it is from the compute bound."""
    tb = time_bounds(spec, m, n, k, precision=precision, in_bytes=in_bytes, out_bytes=out_bytes)

    def row(scenario, mem_time, mem_name):
        if tb.compute >= mem_time:
            return SummaryRow(scenario, "compute", tb.compute, 1.0)
        return SummaryRow(scenario, mem_name, mem_time, mem_time / tb.compute)

    rows = [row("ideal tiling", tb.ideal_dram, "DRAM bandwidth"),
            row("no reuse (naive)", tb.naive_dram, "DRAM bandwidth")]
    if tb.naive_l2 is not None:
        rows.append(row("no reuse, all L2 hits", tb.naive_l2, "L2 bandwidth"))
    return rows


# --------------------------------------------------------------------------
# Little's law
# --------------------------------------------------------------------------
def bytes_per_cycle(bandwidth: float, clock_hz: float) -> float:
    """Bytes the memory system must deliver every clock to run at bandwidth."""
    return bandwidth / clock_hz


def bytes_in_flight(latency: float, bandwidth: float, clock_hz: float | None = None) -> float:
    """Little's law: concurrency = latency x throughput. Fewer outstanding
    bytes than this and the bandwidth cannot be reached however fast the
    memory is, because each request waits a full latency. ``latency`` in
    cycles of ``clock_hz``, or in seconds when no clock is given."""
    if clock_hz is None:
        return latency * bandwidth
    return latency * bytes_per_cycle(bandwidth, clock_hz)


# --------------------------------------------------------------------------
# formatting and the text report
# --------------------------------------------------------------------------
def format_bytes(n: float) -> str:
    """Decimal units, two decimals: '113.25 MB', '231.93 GB'."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


def format_time(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-4:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.2f} us"


def format_ratio(ratio: float) -> str:
    """'1.0x' near the bound; whole multiples rounded down further away
    ('~296x'), so the figure never overstates the gap."""
    if ratio < 10:
        return f"{ratio:.1f}x"
    return f"~{math.floor(ratio)}x"


def format_rate(x: float, unit: str) -> str:
    """4 significant digits at most: measured figures are not exact."""
    if x >= 1e12:
        return f"{float(f'{x / 1e12:.4g}'):g} T{unit}"
    return f"{float(f'{x / 1e9:.4g}'):g} G{unit}"


def analysis_report(spec: RooflineSpec, n: int = 3072, precision: str = "fp32", *,
                    latency_cycles: float | None = None, tiles: Sequence[int] = (16, 32, 128)) -> str:
    """The full analysis for one device, size and precision, as text."""
    in_b = PRECISION_BYTES[precision]
    out_b = OUTPUT_BYTES
    peak = spec.peak(precision)
    ridge = ridge_point(spec, precision)
    tb = time_bounds(spec, n, precision=precision, out_bytes=out_b)
    lines = []
    add = lines.append
    measured = f" (measured: {', '.join(spec.measured)})" if spec.measured else ""
    add(f"Roofline of {spec.name}, {precision}, n = {n}{measured}")
    add(f"  peak {precision:<18} {format_rate(peak, 'FLOP/s')}")
    add(f"  DRAM bandwidth          {format_rate(spec.dram_bw, 'B/s')}")
    if spec.l2_bw is not None:
        add(f"  L2 bandwidth            {format_rate(spec.l2_bw, 'B/s')}")
    add(f"  ridge point             {ridge:.2f} FLOP/B")
    add("")
    add(f"Operational intensity ({in_b}-byte inputs, {out_b}-byte C)")
    add(f"  no reuse (naive)        {naive_oi(in_b):.2f} FLOP/B")
    slope = Fraction(2, 2 * in_b + out_b)
    square = f"n/{slope.denominator}" if slope.numerator == 1 else f"{slope.numerator}n/{slope.denominator}"
    add(f"  {'ideal reuse (' + square + ')':<24}{ideal_oi(n, in_bytes=in_b, out_bytes=out_b):.2f} FLOP/B")
    tile_text = ", ".join(f"T={t}: {tile_oi(t, in_bytes=in_b):.2f}" for t in tiles)
    add(f"  {'T x T tile (T/' + str(in_b) + ')':<24}{tile_text} FLOP/B")
    add(f"  compute-bound (ideal reuse) from n >= {min_compute_bound_n(spec, precision, out_bytes=out_b)}")
    add(f"  a tile reaches the ridge from DRAM alone at T >= {min_tile_for_ridge(spec, precision)}")
    add("")
    add(f"Work and traffic at n = {n}")
    add(f"  flops                   {tb.flops:.3e} FLOP ({tb.flops / 1e9:.2f} GFLOP)")
    add(f"  ideal traffic           {format_bytes(tb.ideal_bytes)} = {tb.ideal_bytes / 1e9:.5f} GB")
    add(f"  no-reuse traffic        {format_bytes(tb.naive_bytes)}")
    add("")
    add("Time bounds")
    add(f"  compute                 {format_time(tb.compute)}")
    add(f"  ideal reuse, DRAM       {format_time(tb.ideal_dram)}")
    add(f"  no reuse, DRAM          {format_time(tb.naive_dram)}")
    if tb.naive_l2 is not None:
        add(f"  no reuse, L2            {format_time(tb.naive_l2)}")
    add("")
    rows = summary_rows(spec, n, precision=precision, out_bytes=out_b)
    head = ("scenario", "limiting factor", "fastest time", "vs compute bound")
    table = [head] + [(r.scenario, r.limiter, format_time(r.time),
                       format_ratio(r.ratio) + ("" if r.ratio < 1.05 else " slower"))
                      for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    add("Summary")
    for row in table:
        add("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    if spec.l2_bw is None:
        add("  (no L2 bandwidth figure for this device: the all-L2-hits row needs a measured one)")
    add("")
    add("Little's law (DRAM)")
    if spec.clock_hz is None:
        add("  no clock figure for this device")
    else:
        assumed = ""
        latency = latency_cycles if latency_cycles is not None else spec.dram_latency_cycles
        if latency is None:
            latency, assumed = DEFAULT_DRAM_LATENCY_CYCLES, " (assumed)"
        bpc = bytes_per_cycle(spec.dram_bw, spec.clock_hz)
        add(f"  bytes per cycle         {bpc:.2f} B/cycle "
            f"({format_rate(spec.dram_bw, 'B/s')} / {spec.clock_hz / 1e6:g} MHz)")
        add(f"  bytes in flight         {bytes_in_flight(latency, spec.dram_bw, spec.clock_hz):,.0f} B "
            f"({latency:g} cycles{assumed} x {bpc:.2f} B/cycle)")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# bench records
# --------------------------------------------------------------------------
def record_intensity(record: Mapping, rung=None) -> float:
    """FLOP per global-memory byte of one bench record. For a rung, the bytes
    its tiling moves (tiled_bytes with its tile_m x tile_n and input width);
    for anything else (cuBLAS) the ideal-reuse bytes, the least any tiling
    can move, since a library's own tiling is not known here."""
    m, n, k = int(record["m"]), int(record["n"]), int(record["k"])
    in_bytes = PRECISION_BYTES[record["precision"]]
    if rung is not None:
        moved = tiled_bytes(m, n, k, rung.tile_m, rung.tile_n, in_bytes=in_bytes)
    else:
        moved = ideal_bytes(m, n, k, in_bytes=in_bytes, out_bytes=OUTPUT_BYTES)
    return gemm_flops(m, n, k) / moved
