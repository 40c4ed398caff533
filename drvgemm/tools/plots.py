"""Plots (matplotlib, an optional dependency): the roofline with points on it,
every label placed where it covers nothing else, and the bench results on
the roofline of the device that produced them."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ..analysis.roofline import (PRECISION_BYTES, RooflineSpec, format_rate, record_intensity,
                                 spec_for_device_name)
from ..ladders.gemm import registry

__all__ = ["PlotLayout", "plot_roofline", "bench_points", "plot_bench", "shape_ratio_series",
           "plot_shape_ratios"]


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
        fixed.append(ax.text(at, at * bw / 1e12 * 1.25, f"{name} {format_rate(bw, 'B/s')}", fontsize=8,
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


def bench_points(results: Mapping) -> list[tuple[str, float, float, str]]:
    """(label, FLOP/B, FLOP/s, precision) for a bench results dict: each
    rung at its largest size, and per precision the fastest baseline at the
    largest size as "cuBLAS <precision>". Memory-bound records are skipped."""
    table = registry.by_name()
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
        rung = None if rec.get("baseline") else table.get(rec["kernel"])
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


# ---------------------------------------------------------------------------
# the shape suite: cuBLAS time / drvgemm time against shape
# ---------------------------------------------------------------------------
def shape_ratio_series(results: Mapping) -> tuple[list[str], dict]:
    """(shape labels in suite order, {series: [(index, b2b ratio, one-call
    ratio)]}) from ``drvgemm bench --shapes`` results, one series per
    precision and C type of the drvgemm records that were compared."""
    labels, index = [], {}
    series: dict = {}
    for rec in results.get("records", []):
        key = (rec.get("shape_class", ""), rec["m"], rec["n"], rec["k"])
        if key not in index:
            index[key] = len(labels)
            labels.append(f"{rec['m']}x{rec['n']}x{rec['k']} {key[0]}")
        if rec.get("baseline") or rec.get("vs_cublas") is None:
            continue
        out = rec.get("out") or "fp32"
        headline = out == rec["precision"] or (out == "fp32" and rec["precision"] in ("tf32", "fp32"))
        name = rec["precision"] if headline else f"{rec['precision']}, C {out}"
        series.setdefault(name, []).append((index[key], rec["vs_cublas"],
                                            rec.get("vs_cublas_one_call")))
    return labels, series


def plot_shape_ratios(results: Mapping, path, *, title: str | None = None, dpi: int = 110):
    """`drvgemm bench --shapes --plot`: per precision, cuBLAS time / drvgemm
    time at every shape of the suite (filled: calls back to back; hollow: one
    call), log scale, with the lines at 1 (parity) and 0.6 (the floor the
    targets allow)."""
    Figure, FigureCanvasAgg, _ = _import_matplotlib()
    labels, series = shape_ratio_series(results)
    if not series:
        raise ValueError("no drvgemm record was compared with cuBLAS: nothing to plot")
    fig = Figure(figsize=(max(10.0, 0.22 * len(labels) + 3), 6.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
    width = 0.7 / max(1, len(series))
    for j, (name, pts) in enumerate(sorted(series.items())):
        c = colours[j % len(colours)]
        xs = [i - 0.35 + width * (j + 0.5) for i, _, _ in pts]
        ax.scatter(xs, [b for _, b, _ in pts], color=c, s=18, label=f"{name} back to back",
                   zorder=3)
        one = [(x, o) for x, (_, _, o) in zip(xs, pts) if o]
        if one:
            ax.scatter([x for x, _ in one], [o for _, o in one], facecolors="none",
                       edgecolors=c, s=18, label=f"{name} one call", zorder=3)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axhline(0.6, color="grey", lw=0.8, ls="--")
    ax.set_yscale("log")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=90, fontsize=6)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_ylabel("cuBLAS time / drvgemm time (> 1: drvgemm faster)")
    ax.grid(True, which="both", axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="best")
    dev = results.get("device", {}).get("name", "")
    ax.set_title(title or f"gemm(kernel='auto') against the best cuBLAS call, {dev}".strip())
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    return path
