"""The README's figures of the committed H200 results are the results' own:
each is held here to the summary of the file it cites, rounded as printed,
so a new suite run that moves them fails until the README says the same."""
import json
import re
from pathlib import Path

from drvgemm.tools.sweep import geomean

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def _readme():
    return " ".join((ROOT / "README.md").read_text().split())   # lines rewrapped freely


def _summary(name):
    return json.loads((RESULTS / name).read_text())["summary"]


def _as_printed(printed, value):
    """`printed` is `value` to the digits printed (half a unit of the last
    digit either way: the summaries hold values already rounded to three)."""
    digits = len(printed.split(".")[1])
    return abs(float(printed) - value) <= 0.5 * 10 ** -digits + 1e-9


def test_readme_gemm_shape_suite_figures_are_the_committed_suites():
    s = _summary("h200-shapes.json")
    precs = ("bf16", "fp16", "fp32", "tf32")
    m = re.search(r"geometric mean over (\d+) shapes with calls back to back, "
                  r"(\d\.\d\d) for bf16, (\d\.\d\d) for fp16, "
                  r"(\d\.\d\d) for fp32, (\d\.\d\d) for tf32 "
                  r"\((\d\.\d\d)-(\d\.\d\d) one call at a time\); the lowest shapes "
                  r"\((\d\.\d\d)-(\d\.\d\d)\)", _readme())
    assert m, "README: the gemm() shape-suite sentence is not where this test reads it"
    shapes, *b2b, one_lo, one_hi, low_lo, low_hi = m.groups()
    assert int(shapes) == s["bf16"]["shapes"]
    for p, printed in zip(precs, b2b):
        assert _as_printed(printed, s[p]["geomean_b2b"]), (p, printed, s[p]["geomean_b2b"])
    one = [s[p]["geomean_one_call"] for p in precs]
    assert _as_printed(one_lo, min(one)) and _as_printed(one_hi, max(one)), (one_lo, one_hi, one)
    # "the lowest shapes (lo-hi)": the lowest is the suite's lowest, the highest
    # some precision's lowest (the sentence names the shapes below 0.70)
    lows = [s[p]["min_b2b"] for p in precs]
    assert _as_printed(low_lo, min(lows)), (low_lo, lows)
    assert any(_as_printed(low_hi, x) for x in lows), (low_hi, lows)


def test_readme_softmax_row_suite_figures_are_the_committed_suites():
    """The row-suite sentence: each precision's geometric means (one call / back
    to back), bf16's back-to-back mean without the one shape the sentence names
    (at the ratio it gives), and the lowest ratio of the suite."""
    s = _summary("h200-softmax-shapes.json")
    m = re.search(r"on the shapes of 8 MiB and more, (\d\.\d\d) / (\d\.\d\d) of the device "
                  r"copy's bandwidth in fp32 and (\d\.\d\d) / (\d\.\d\d) in bf16 \(geometric mean, "
                  r"one call at a time / back to back; bf16's \d\.\d\d is (\d\.\d\d) without bf16 (\d+) x (\d+), "
                  r"at (\d\.\d\d) of a copy .*? are the slowest, (\d\.\d\d)-", _readme())
    assert m, "README: the softmax row-suite sentence is not where this test reads it"
    f1, fb, b1, bb, without, rows, cols, ratio, slowest = m.groups()
    for p, one, b2b in (("fp32", f1, fb), ("bf16", b1, bb)):
        assert _as_printed(one, s[p]["geomean_copy_ratio_large"]), (p, one)
        assert _as_printed(b2b, s[p]["geomean_copy_ratio_large_b2b"]), (p, b2b)
    large = [r for r in json.loads((RESULTS / "h200-softmax-shapes.json").read_text())["records"]
             if not r["baseline"] and r["precision"] == "bf16" and r["shape_class"] == "large"]
    named = [r for r in large if (r["m"], r["n"]) == (int(rows), int(cols))]
    assert len(named) == 1 and _as_printed(ratio, named[0]["copy_fraction_b2b"]), (ratio, named)
    rest = [r["copy_fraction_b2b"] for r in large if r is not named[0]]
    assert _as_printed(without, geomean(rest)), (without, rest)
    lowest = min(s[p][k] for p in ("fp32", "bf16")
                 for k in ("min_copy_ratio_large", "min_copy_ratio_large_b2b"))
    assert _as_printed(slowest, lowest), (slowest, lowest)


def test_readme_ladder_table_figures_are_the_committed_runs():
    """"The ladder on an H200": each row of one rung with figures at 4096^3
    (TFLOP/s and the fraction of the fastest cuBLAS call of the run writing
    the same C type; "fp32 C / 16-bit C" where a row gives both) is h200.json's."""
    records = json.loads((RESULTS / "h200.json").read_text())["records"]
    at = [r for r in records if (r["m"], r["n"], r["k"]) == (4096, 4096, 4096)]
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## The ladder on an H200"):]
    table = table[:table.index("\n\n", table.index("| rung |"))]
    number = r"\d+\.\d+(?: / \d+\.\d+)?"
    checked = 0
    for line in table.splitlines():
        cells = [c.strip().replace("*", "") for c in line.strip("|").split("|")]
        if len(cells) != 4 or not all(re.fullmatch(number, c) for c in cells[2:]):
            continue
        name = cells[0]
        rung = [r for r in at if r["kernel"] == name]
        assert len(rung) == 1, (name, "no single record of the rung at 4096^3 in h200.json")
        prec = rung[0]["precision"]
        outs = [rung[0]] + [r for r in at if r["kernel"] == f"{name}.{prec}_out"]
        tflops, fractions = cells[2].split(" / "), cells[3].split(" / ")
        assert len(tflops) == len(fractions) <= len(outs), (name, cells)
        for rec, t, f in zip(outs, tflops, fractions):
            best = max(r["tflops"] for r in at
                       if r["baseline"] and r["precision"] == prec and r["out"] == rec["out"])
            assert _as_printed(t, rec["tflops"]), (name, rec["out"], t, rec["tflops"])
            assert _as_printed(f, rec["tflops"] / best), (name, rec["out"], f, rec["tflops"] / best)
            checked += 1
    assert checked >= 20, checked


def test_readme_column_slice_figures_are_the_committed_views():
    """The column-slice sentence under the row suite: 16-bit slice->contiguous
    (lowest-highest, then the rows of 4096 columns and more, then the lowest's
    shape), slice->slice and fp32's slice->contiguous as h200-softmax-views.json
    has them; the 16-bit figures before the shifted stores as
    h200-softmax-views-before.json has them."""
    def records(name, layout, precs):
        return [r for r in json.loads((RESULTS / name).read_text())["records"]
                if not r["baseline"] and r["layout"] == layout and r["precision"] in precs]
    def fractions(name, layout, precs):
        return [r["copy_fraction"] for r in records(name, layout, precs)]
    m = re.search(r"A 16-bit column slice written to a fresh array .*? runs at (\d\.\d\d)-(\d\.\d\d) of copy "
                  r"\((\d\.\d\d)-(\d\.\d\d) on rows of 4096 and\s+more; (\d\.\d\d) on (\w+) (\d+) x (\d+), .*?"
                  r"ran at (\d\.\d\d)-(\d\.\d\d) before .*?at x's pitch (\d\.\d\d)-(\d\.\d\d) .*?"
                  r"fp32 slices keep\s+their 8-byte pieces, (\d\.\d\d)-(\d\.\d\d) of copy", _readme(), re.S)
    assert m, "README: the column-slice sentence is not where this test reads it"
    lo16, hi16, lo_long, hi_long, low, prec, rows, cols, lo_before, hi_before, lo_ss, hi_ss, lo32, hi32 = m.groups()
    after, before = "h200-softmax-views.json", "h200-softmax-views-before.json"
    sc16 = records(after, "slice->contiguous", ("bf16", "fp16"))
    f = fractions(after, "slice->contiguous", ("bf16", "fp16"))
    assert _as_printed(lo16, min(f)) and _as_printed(hi16, max(f)), (lo16, hi16, f)
    long = [r["copy_fraction"] for r in sc16 if r["n"] >= 4096]
    assert _as_printed(lo_long, min(long)) and _as_printed(hi_long, max(long)), (lo_long, hi_long, long)
    lowest = min(sc16, key=lambda r: r["copy_fraction"])
    assert _as_printed(low, lowest["copy_fraction"]), (low, lowest)
    assert (prec, int(rows), int(cols)) == (lowest["precision"], lowest["m"], lowest["n"]), lowest
    f = fractions(before, "slice->contiguous", ("bf16", "fp16"))
    assert _as_printed(lo_before, min(f)) and _as_printed(hi_before, max(f)), f
    ss = fractions(after, "slice->slice", ("bf16", "fp16"))
    assert _as_printed(lo_ss, min(ss)) and _as_printed(hi_ss, max(ss)), (lo_ss, hi_ss, ss)
    f32 = fractions(after, "slice->contiguous", ("fp32",))
    assert _as_printed(lo32, min(f32)) and _as_printed(hi32, max(f32)), (lo32, hi32, f32)
    m = re.search(r"The one-form exps took the 16-bit slices on an H100 from (\d\.\d\d)-(\d\.\d\d) to "
                  r"(\d\.\d\d)-(\d\.\d\d) of that\s+card's copy", _readme())
    assert m, "README: the one-form exps' column-slice sentence is not where this test reads it"
    for (lo, hi), name in zip((m.groups()[:2], m.groups()[2:]), ("h100-softmax-views-one-form-exp-before.json",
                                                              "h100-softmax-views-one-form-exp.json")):
        sc16 = fractions(name, "slice->contiguous", ("bf16", "fp16"))
        assert _as_printed(lo, min(sc16)) and _as_printed(hi, max(sc16)), (name, lo, hi, sc16)


def _readme_before_after(shape, results, before, after):
    """The README's "took PREC R x C from A to B of the copy back to back on an
    H100" figures against the record of that shape in RESULTS, columns BEFORE
    and AFTER of its back-to-back ratios."""
    prec, rows, cols = shape
    m = re.search(rf"took {prec} {rows} x {cols}\s+from\s+(\d\.\d+) to (\d\.\d+) of the copy back to back"
                  r"\s+on an H100", _readme())
    assert m, f"README: the sentence on {prec} {rows} x {cols} is not where this test reads it"
    rec = next(r for r in json.loads((RESULTS / results).read_text())["records"]
               if (r["precision"], r["m"], r["n"]) == shape)
    assert (float(m.group(1)), float(m.group(2))) == (rec["b2b_of_copy"][before], rec["b2b_of_copy"][after])


def test_readme_one_form_exp_figures_are_the_committed_before_after():
    """The one-form exps' sentence: bf16 4096 x 4097 back to back before and
    after (main's source in column old, the change in column new, one run)."""
    _readme_before_after(("bf16", 4096, 4097), "h100-softmax-one-form-exp.json", "old", "new")
