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
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Iterable, Mapping, Sequence

__all__ = [
    "RooflineSpec", "SPECS", "get_spec", "spec_for_device_name", "live_spec",
    "PRECISION_BYTES", "OUTPUT_BYTES", "DEFAULT_DRAM_LATENCY_CYCLES",
    "gemm_flops", "naive_bytes", "ideal_bytes", "tiled_bytes",
    "naive_oi", "ideal_oi", "tile_oi", "tile_traffic_reduction", "min_tile_for_ridge",
    "ridge_point", "min_compute_bound_n", "attainable", "roofline_fraction",
    "TimeBounds", "time_bounds", "SummaryRow", "summary_rows",
    "bytes_per_cycle", "bytes_in_flight",
    "format_bytes", "format_time", "format_ratio", "analysis_report",
    "PlotLayout", "plot_roofline", "record_intensity", "bench_points", "plot_bench",
    "add_cli",
]

# Bytes per input element for each math precision. TF32 reads ordinary fp32
# words; the tensor core drops the low mantissa bits internally.
PRECISION_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}
# Every GEMM rung in this project writes C as float32 whatever its inputs.
OUTPUT_BYTES = 4
# Global-memory latency of the worked example (700-800 cycles is typical of
# recent GPUs); used for Little's law when a device's own figure is unknown,
# since datasheets do not publish one.
DEFAULT_DRAM_LATENCY_CYCLES = 800


# --------------------------------------------------------------------------
# device figures
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class RooflineSpec:
    """The ceilings of one device. Peaks in FLOP/s per precision, bandwidths
    in B/s. ``l2_bw``, ``clock_hz`` and ``dram_latency_cycles`` may be None
    where no trustworthy figure exists; ``measured`` names the figures that
    came from a measurement on the device rather than from a datasheet."""
    name: str
    peak_flops: Mapping[str, float] = field(hash=False)
    dram_bw: float
    l2_bw: float | None = None
    clock_hz: float | None = None
    dram_latency_cycles: float | None = None
    source: str = ""
    measured: tuple = ()

    def peak(self, precision: str = "fp32") -> float:
        try:
            return self.peak_flops[precision]
        except KeyError:
            raise ValueError(
                f"{self.name} has no {precision} peak; it knows "
                f"{', '.join(self.peak_flops) or 'none'}") from None

    def with_measured(self, measured: Mapping[str, float] | None) -> "RooflineSpec":
        """A copy with measured ceilings in place of datasheet ones. Keys:
        a precision name ("fp32", "tf32", "bf16", "fp16") for a peak in
        FLOP/s, or "dram_bw", "l2_bw" (B/s), "clock_hz", "dram_latency_cycles"."""
        if not measured:
            return self
        peaks = dict(self.peak_flops)
        attrs = {}
        for key, value in measured.items():
            if value is None:
                continue
            if not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"measured {key} must be a positive number, got {value!r}")
            if key in PRECISION_BYTES:
                peaks[key] = float(value)
            elif key in ("dram_bw", "l2_bw", "clock_hz", "dram_latency_cycles"):
                attrs[key] = float(value)
            else:
                raise ValueError(
                    f"unknown measured figure {key!r}; expected one of "
                    f"{', '.join(list(PRECISION_BYTES) + ['dram_bw', 'l2_bw', 'clock_hz', 'dram_latency_cycles'])}")
        done = tuple(sorted(set(self.measured) | {k for k, v in measured.items() if v is not None}))
        return replace(self, peak_flops=peaks, measured=done, **attrs)


_T = 1e12
_G = 1e9

SPECS: dict[str, RooflineSpec] = {
    # The worked example of the design notes (FP32 CUDA cores only, tensor
    # cores left out), so the default report reproduces its figures.
    "rtx4000ada": RooflineSpec(
        "RTX 4000 Ada", {"fp32": 26.7 * _T}, dram_bw=360 * _G, l2_bw=2500 * _G,
        clock_hz=2175e6, dram_latency_cycles=800,
        source="worked example: 26.7 TFLOP/s fp32, 360 GB/s, L2 ~2.5 TB/s, 2175 MHz, 800-cycle DRAM latency"),
    # Hopper/Ampere SXM datasheets; tensor figures are dense (no 2:4 sparsity).
    "h200": RooflineSpec(
        "H200", {"fp32": 67 * _T, "tf32": 494.7 * _T, "bf16": 989.4 * _T, "fp16": 989.4 * _T},
        dram_bw=4.8e12, clock_hz=1980e6, source="H200 SXM datasheet, dense"),
    "h100": RooflineSpec(
        "H100", {"fp32": 67 * _T, "tf32": 494.7 * _T, "bf16": 989.4 * _T, "fp16": 989.4 * _T},
        dram_bw=3.35e12, clock_hz=1980e6, source="H100 SXM datasheet, dense"),
    "a100": RooflineSpec(
        "A100", {"fp32": 19.5 * _T, "tf32": 156 * _T, "bf16": 312 * _T, "fp16": 312 * _T},
        dram_bw=2.039e12, clock_hz=1410e6, source="A100 SXM 80GB datasheet, dense"),
}


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def get_spec(name: str) -> RooflineSpec:
    """A built-in spec by name, forgiving about case, spaces and dashes
    ("RTX 4000 Ada", "rtx4000-ada", "h200")."""
    key = _key(name)
    if key.startswith("nvidia"):
        key = key[len("nvidia"):]
    if key in SPECS:
        return SPECS[key]
    for spec_key, spec in SPECS.items():
        if _key(spec.name) == key:
            return spec
    raise ValueError(f"no built-in roofline figures for {name!r}; known: "
                     f"{', '.join(s.name for s in SPECS.values())}")


def spec_for_device_name(device_name: str) -> RooflineSpec | None:
    """Map the name the driver reports to a built-in spec, or None. Variants
    with other clocks or memory (PCIe, NVL, SFF, 40 GB A100) are not matched:
    their ceilings differ from the SXM datasheet figures."""
    n = device_name.lower()
    if "rtx 4000 ada" in n:
        return SPECS["rtx4000ada"]
    if any(v in n for v in ("pcie", "nvl")):
        return None
    if "h200" in n:
        return SPECS["h200"]
    if "h100" in n:
        return SPECS["h100"]
    if "a100" in n and "80gb" in n.replace(" ", ""):
        return SPECS["a100"]
    return None


def live_spec(measured: Mapping[str, float] | None = None) -> tuple[RooflineSpec | None, str | None]:
    """(spec, device name) for the GPU in this process, measured figures
    applied; (None, None) when there is no usable GPU, (None, name) when the
    GPU has no built-in figures."""
    try:
        import drvgemm
        name = drvgemm.device().name
    except Exception:
        return None, None
    spec = spec_for_device_name(name)
    if spec is None:
        return None, name
    return spec.with_measured(measured), name


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


def bytes_in_flight(latency_cycles: float, bandwidth: float, clock_hz: float) -> float:
    """Little's law: concurrency = latency x throughput. Fewer outstanding
    bytes than this and the bandwidth cannot be reached however fast the
    memory is, because each request waits a full latency."""
    return latency_cycles * bytes_per_cycle(bandwidth, clock_hz)


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


def _rate(x: float, unit: str) -> str:
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
    add(f"  peak {precision:<18} {_rate(peak, 'FLOP/s')}")
    add(f"  DRAM bandwidth          {_rate(spec.dram_bw, 'B/s')}")
    if spec.l2_bw is not None:
        add(f"  L2 bandwidth            {_rate(spec.l2_bw, 'B/s')}")
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
            f"({_rate(spec.dram_bw, 'B/s')} / {spec.clock_hz / 1e6:g} MHz)")
        add(f"  bytes in flight         {bytes_in_flight(latency, spec.dram_bw, spec.clock_hz):,.0f} B "
            f"({latency:g} cycles{assumed} x {bpc:.2f} B/cycle)")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# plot
# --------------------------------------------------------------------------
@dataclass
class PlotLayout:
    """Where plot_roofline put things, in figure pixels (origin bottom-left):
    each point's marker centre and each label's bounding box."""
    points: list = field(default_factory=list)      # (label, x_px, y_px)
    labels: list = field(default_factory=list)      # (label, (x0, y0, x1, y1))
    width: int = 0
    height: int = 0


def _import_matplotlib():
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.text import Text
    except ImportError:
        raise ImportError("plotting the roofline needs matplotlib: "
                          "pip install 'drvgemm[plot]' (or pip install matplotlib)") from None
    return Figure, FigureCanvasAgg, Text


def _overlap(a, b) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def _box_distance(box, x, y) -> float:
    dx = max(box[0] - x, 0.0, x - box[2])
    dy = max(box[1] - y, 0.0, y - box[3])
    return math.hypot(dx, dy)


# Label search: 16 directions around the point at growing distances (points).
_DIRECTIONS = [math.radians(a) for a in (30, -30, 150, -150, 0, 180, 60, -60, 120, -120,
                                         90, -90, 15, -15, 165, -165)]
_RADII = (10, 16, 24, 34, 46, 60, 78)
_LABEL_FONT = 7.5


def _label_box(anchor_x, anchor_y, width, height, angle, pad):
    """Box of a label whose anchor sits at (anchor_x, anchor_y), aligned so
    the text extends away from its point in direction ``angle``."""
    c, s = math.cos(angle), math.sin(angle)
    x0 = anchor_x if c > 0.3 else anchor_x - width if c < -0.3 else anchor_x - width / 2
    y0 = anchor_y if s > 0.3 else anchor_y - height if s < -0.3 else anchor_y - height / 2
    return (x0 - pad, y0 - pad, x0 + width + pad, y0 + height + pad)


def _alignment(angle):
    c, s = math.cos(angle), math.sin(angle)
    ha = "left" if c > 0.3 else "right" if c < -0.3 else "center"
    va = "bottom" if s > 0.3 else "top" if s < -0.3 else "center"
    return ha, va


def plot_roofline(spec: RooflineSpec, points: Iterable, path, *,
                  precisions: Sequence[str] | None = None, title: str | None = None,
                  dpi: int = 150) -> PlotLayout:
    """Log-log roofline of ``spec`` with ``points`` = (label, oi FLOP/B,
    achieved FLOP/s) drawn on it, saved to ``path`` (format from the suffix).
    One roof per precision peak (all the spec has unless ``precisions``), the
    DRAM slope, and the L2 slope when the spec has one. Each label is placed
    where it covers no other label, marker or roof line, nearer its own point
    than any other, and joined to its point by a thin leader line."""
    Figure, FigureCanvasAgg, Text = _import_matplotlib()
    points = [(str(label), float(oi), float(flops)) for label, oi, flops in points]
    precisions = list(spec.peak_flops) if precisions is None else list(precisions)
    peaks = sorted(((p, spec.peak(p)) for p in precisions), key=lambda t: t[1])
    # Precisions with the same peak share one roof and one label ("bf16/fp16").
    merged = []
    for prec, pk in peaks:
        if merged and abs(merged[-1][1] - pk) <= 1e-9 * pk:
            merged[-1] = (merged[-1][0] + "/" + prec, pk)
        else:
            merged.append((prec, pk))
    peaks = merged
    if not peaks:
        raise ValueError("plot_roofline needs at least one precision peak")
    top_peak = peaks[-1][1]
    for label, oi, flops in points:
        if not (oi > 0 and flops > 0):
            raise ValueError(f"point {label!r} needs a positive intensity and throughput")

    oi_values = [p[1] for p in points] + [pk / spec.dram_bw for _, pk in peaks]
    x_lo = min(min(oi_values) / 4, 0.1)
    x_hi = max(oi_values) * 10
    y_values = [p[2] for p in points] + [pk for _, pk in peaks]
    y_lo = max(min(min(y_values) / 4, x_lo * spec.dram_bw * 2), 1e8)
    y_hi = top_peak * 3

    fig = Figure(figsize=(9, 6), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo / 1e12, y_hi / 1e12)
    ax.set_xlabel("operational intensity (FLOP/byte)")
    ax.set_ylabel("throughput (TFLOP/s)")
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.1)
    ax.set_title(title or f"Roofline: {spec.name}")

    # Memory slopes run up to the highest roof; each precision's flat roof
    # starts at its own ridge point.
    lines = [((x_lo, top_peak / spec.dram_bw), spec.dram_bw, "DRAM")]
    ax.plot([x_lo, top_peak / spec.dram_bw], [x_lo * spec.dram_bw / 1e12, top_peak / 1e12],
            color="black", lw=1.6)
    if spec.l2_bw is not None:
        lines.append(((x_lo, top_peak / spec.l2_bw), spec.l2_bw, "L2"))
        ax.plot([x_lo, top_peak / spec.l2_bw], [x_lo * spec.l2_bw / 1e12, top_peak / 1e12],
                color="gray", lw=1.0, ls="--")
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    roofs = []
    for i, (prec, pk) in enumerate(peaks):
        ridge = pk / spec.dram_bw
        colour = colours[i % len(colours)]
        ax.plot([ridge, x_hi], [pk / 1e12, pk / 1e12], color=colour, lw=1.6)
        roofs.append((ridge, pk, prec, colour))
    if points:
        ax.scatter([p[1] for p in points], [p[2] / 1e12 for p in points], s=22, zorder=3,
                   color="crimson", edgecolor="black", linewidth=0.5)
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    to_px = ax.transData.transform
    ax_box = ax.get_window_extent(renderer).extents

    # Fixed texts: roof names at the right end, slope names along the slopes.
    fixed = []
    for ridge, pk, prec, colour in roofs:
        fixed.append(ax.text(x_hi / 1.15, pk / 1e12 * 1.06, f"{prec} peak {pk / 1e12:.3g} TFLOP/s",
                             ha="right", va="bottom", fontsize=8, color=colour))
    for (x0, _), bw, name in lines:
        a, b = to_px((x0, x0 * bw / 1e12)), to_px((x0 * 10, x0 * 10 * bw / 1e12))
        angle = math.degrees(math.atan2(b[1] - a[1], b[0] - a[0]))
        at = max(x0 * 1.6, y_lo * 4 / bw)      # where the slope is well inside the axes
        fixed.append(ax.text(at, at * bw / 1e12 * 1.25, f"{name} {_rate(bw, 'B/s')}", fontsize=8,
                             rotation=angle, rotation_mode="anchor", ha="left", va="bottom",
                             color="black" if name == "DRAM" else "dimgray"))
    placed = [tuple(t.get_window_extent(renderer).extents) for t in fixed]

    # Sample every roof line in pixels so labels can keep off them.
    line_px = []
    for (x0, x1), bw, _ in lines:
        for t in range(121):
            x = x0 * (x1 / x0) ** (t / 120)
            line_px.append(tuple(to_px((x, x * bw / 1e12))))
    for ridge, pk, _, _ in roofs:
        for t in range(121):
            x = ridge * (x_hi / ridge) ** (t / 120)
            line_px.append(tuple(to_px((x, pk / 1e12))))

    layout = PlotLayout()
    layout.width, layout.height = fig.canvas.get_width_height()
    marker_r = 4.5
    px_points = []
    for label, oi, fl in points:
        px, py = (float(v) for v in to_px((oi, fl / 1e12)))
        px_points.append((px, py))
        layout.points.append((label, px, py))
    markers = [(x - marker_r, y - marker_r, x + marker_r, y + marker_r) for x, y in px_points]
    px_per_pt = dpi / 72.0
    pad = 0.15 * _LABEL_FONT * px_per_pt + 1   # the white backing box around each label

    # Crowded points first: they have the fewest free places.
    def crowding(i):
        x, y = px_points[i]
        return -sum(1 for qx, qy in px_points if abs(qx - x) < 120 and abs(qy - y) < 60)

    texts = []
    for i in sorted(range(len(points)), key=crowding):
        label, oi, fl = points[i]
        x, y = px_points[i]
        probe = ax.text(0, 0, label, fontsize=_LABEL_FONT)
        ext = probe.get_window_extent(renderer)
        probe.remove()
        width, height = ext.width, ext.height
        best = None
        for radius in _RADII:
            for angle in _DIRECTIONS:
                anchor_x = x + radius * px_per_pt * math.cos(angle)
                anchor_y = y + radius * px_per_pt * math.sin(angle)
                box = _label_box(anchor_x, anchor_y, width, height, angle, pad)
                cost = 10 * sum(_overlap(box, b) for b in placed)
                cost += 10 * sum(_overlap(box, m) for m in markers)
                # Roof lines are drawn ~3 px wide: keep a margin off them.
                cost += 25 * sum(1 for lx, ly in line_px
                                 if box[0] - 3 <= lx <= box[2] + 3 and box[1] - 3 <= ly <= box[3] + 3)
                if box[0] < ax_box[0] or box[2] > ax_box[2] or box[1] < ax_box[1] or box[3] > ax_box[3]:
                    cost += 1e7
                own = _box_distance(box, x, y)
                if any(_box_distance(box, qx, qy) < own for j, (qx, qy) in enumerate(px_points) if j != i):
                    cost += 400          # the label would read as another point's
                cost += radius * 0.5     # nearer is better among free places
                if best is None or cost < best[0]:
                    best = (cost, radius, angle)
            if best[0] < radius * 0.5 + 1:
                break
        _, radius, angle = best
        ha, va = _alignment(angle)
        placed.append(_label_box(x + radius * px_per_pt * math.cos(angle),
                                 y + radius * px_per_pt * math.sin(angle), width, height, angle, pad))
        texts.append((label, ax.annotate(
            label, (oi, fl / 1e12), xytext=(radius * math.cos(angle), radius * math.sin(angle)),
            textcoords="offset points", ha=ha, va=va, fontsize=_LABEL_FONT, zorder=4,
            bbox=dict(boxstyle="square,pad=0.15", fc="white", ec="none", alpha=0.8),
            arrowprops=dict(arrowstyle="-", lw=0.5, color="gray", shrinkA=0, shrinkB=marker_r))))
    # Report where the labels really landed, measured after a full draw; the
    # text's own box, since Annotation.get_window_extent adds the leader line.
    fig.canvas.draw()
    for label, text in texts:
        box = tuple(float(v) for v in Text.get_window_extent(text, renderer).extents)
        layout.labels.append((label, box))
    fig.savefig(path, dpi=dpi)
    return layout


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


def bench_points(results: Mapping) -> list[tuple[str, float, float, str]]:
    """(label, FLOP/B, FLOP/s, precision) for a bench results dict: each
    rung at its largest size, and per precision the fastest baseline at the
    largest size as "cuBLAS <precision>". Memory-bound records are skipped."""
    from .rungs import by_name
    registry = by_name()
    best = {}
    for rec in results.get("records", []):
        if rec.get("tflops") is None or rec.get("precision") not in PRECISION_BYTES:
            continue
        size = int(rec["m"]) * int(rec["n"]) * int(rec["k"])
        key = (f"cuBLAS {rec['precision']}" if rec.get("baseline") else rec["kernel"], rec["precision"])
        old = best.get(key)
        if old is None or (size, rec["tflops"]) > (old[0], old[1]["tflops"]):
            best[key] = (size, rec)
    points = []
    for (label, precision), (_, rec) in best.items():
        rung = None if rec.get("baseline") else registry.get(rec["kernel"])
        points.append((label, record_intensity(rec, rung), rec["tflops"] * 1e12, precision))
    return points


def plot_bench(results: Mapping, path, *, spec: RooflineSpec | None = None,
               measured: Mapping[str, float] | None = None, title: str | None = None) -> PlotLayout:
    # A rung's intensity counts the global-memory traffic its tiling issues;
    # L2 serves part of it, which is how a point can sit above the DRAM slope.
    """`drvgemm bench --plot`: every rung and baseline of ``results`` on the
    roofline of the device that produced them (measured ceilings applied),
    with one roof per precision the results contain."""
    if spec is None:
        name = results.get("device", {}).get("name", "")
        spec = spec_for_device_name(name)
        if spec is None:
            raise ValueError(f"no built-in roofline figures for {name or 'this device'}")
    spec = spec.with_measured(measured)
    points = bench_points(results)
    if not points:
        raise ValueError("no GEMM records to plot")
    precisions = [p for p in PRECISION_BYTES if p in spec.peak_flops and any(q[3] == p for q in points)]
    size = max((int(r["m"]) for r in results["records"] if r.get("tflops") is not None), default=0)
    return plot_roofline(spec, [p[:3] for p in points], path, precisions=precisions or None,
                         title=title or f"{spec.name}: GEMM rungs at their largest size ({size})")


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------
def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "roofline", help="roofline and Little's law analysis of square GEMM on a device",
        description="Roofline arithmetic for one device, size and precision: ridge "
                    "point, operational intensities, time bounds, the summary table and the "
                    "bytes in flight Little's law asks for. Without --gpu it uses the GPU in "
                    "this machine when it has built-in figures, else the RTX 4000 Ada worked "
                    "example.")
    p.add_argument("--gpu", metavar="NAME",
                   help=f"built-in device: {', '.join(s.name for s in SPECS.values())}")
    p.add_argument("--n", type=int, default=3072, help="square GEMM size (default 3072)")
    p.add_argument("--precision", default="fp32", choices=sorted(PRECISION_BYTES),
                   help="math precision (default fp32)")
    p.add_argument("--latency", type=float, metavar="CYCLES",
                   help="DRAM latency in cycles for Little's law (default: the device's figure, "
                        f"else {DEFAULT_DRAM_LATENCY_CYCLES})")
    p.set_defaults(func=run_cli)


def run_cli(args, measured: Mapping[str, float] | None = None) -> int:
    """`drvgemm roofline`. ``measured`` replaces datasheet ceilings with
    measured ones (see RooflineSpec.with_measured) for the live GPU."""
    import sys
    if args.n < 1:
        print("drvgemm roofline: --n must be >= 1", file=sys.stderr)
        return 2
    if args.gpu:
        try:
            spec = get_spec(args.gpu)
        except ValueError as e:
            print(f"drvgemm roofline: {e}", file=sys.stderr)
            return 2
    else:
        if measured is None:
            from . import driver
            if driver.has_gpu() and spec_for_device_name(driver.device().name) is not None:
                from .ceilings import device_ceilings
                measured = device_ceilings()
        spec, device_name = live_spec(measured)
        if spec is None:
            if device_name is not None:
                print(f"drvgemm roofline: no built-in figures for {device_name}; showing the "
                      f"RTX 4000 Ada worked example (choose a device with --gpu)", file=sys.stderr)
            spec = SPECS["rtx4000ada"]
    try:
        print(analysis_report(spec, args.n, args.precision, latency_cycles=args.latency))
    except ValueError as e:
        print(f"drvgemm roofline: {e}", file=sys.stderr)
        return 2
    return 0
