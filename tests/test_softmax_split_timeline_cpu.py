"""benchmarks/softmax_split_timeline.py without a GPU: the split rung's
phase-clock build compiles for every split plan auto makes without
spills, stamps %globaltimer into its phase_clock array and stays within its
launch bounds
(a cooperative grid sized for the plain build must still fit), and the
pass table reads the stamps as the kernel writes them. That the plain
builds carry none of it, the SASS manifest says."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import drvgemm

from drvgemm.ladders.softmax import plan as smplan

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "softmax_split_timeline.py"
spec = importlib.util.spec_from_file_location("softmax_split_timeline", BENCH)
timeline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(timeline)


@pytest.mark.parametrize("shape", timeline.SHAPES)
def test_stamped_build_of_each_split_plan(shape):
    prec, rc = shape.split(":")
    rows, cols = (int(v) for v in rc.split("x"))
    p = smplan.plan(rows, cols, prec, cc=(9, 0))
    assert p.split, p.describe()
    k = timeline.stamped_build(p)
    r = k.resources
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack == 0, r
    assert r.registers * p.block[0] * p.config.min_blocks <= 65536, r
    size = timeline.MAX_BLOCKS * timeline.ROWS_STAMPED * 6 * 8
    assert f".global .align 8 .b8 phase_clock[{size}];" in k.ptx
    assert f".global .align 4 .b8 phase_smid[{4 * timeline.MAX_BLOCKS}];" in k.ptx and "%smid" in k.ptx
    plain = drvgemm.compile(p.source, p.entry, defines=dict(p.defines))
    assert "phase_clock" not in plain.ptx and "%smid" not in plain.ptx
    # the six marks, at least once each (the watchdog reads the timer in both)
    assert k.ptx.count("%globaltimer") >= plain.ptx.count("%globaltimer") + 6


def test_pass_table_reads_the_stamps_by_slot_and_row():
    """Two slots of three blocks, five rows (passes of two, two, one row):
    block b of slot s stamps mark m of its k-th row at 100 k + 10 m + b us
    past a start of 1 ms; the table gives first / median / last over the
    blocks that have that row."""
    slots, split, rows, grid = 2, 3, 5, 6
    st = np.zeros((timeline.MAX_BLOCKS, timeline.ROWS_STAMPED, 6), np.uint64)
    for b in range(grid):
        for k in range(3):
            for m in range(6):
                st[b, k, m] = 1_000_000 + 1000 * (100 * k + 10 * m + b)
    table, leave = timeline.passes(st, grid, slots, split, rows)
    assert [k for k, _ in table] == [0, 1, 2]
    assert table[0][1]["begin"] == (0.0, 2.5, 5.0)
    assert table[1][1]["stores issued"] == (140.0, 142.5, 145.0)
    # the third pass: slot 0's row 4 only (blocks 0..2)
    assert table[2][1]["pair reduced"] == (210.0, 211.0, 212.0)
    assert leave == (50.0, 52.5, 55.0)
    # the median block's steps: 10 us from each mark to the next
    assert timeline.step_medians(table)[0] == (0, {"loads": 10.0, "wait": 10.0, "fold": 10.0, "stores": 10.0})


def test_main_on_a_stand_in_device(tmp_path, monkeypatch):
    """The script end to end on a stand-in device: auto's split plan as
    prepare() fits it for 132 SMs, the stamped build's clocks zeroed before
    each timed launch and read after it (here a launch writes stamps 10 us
    apart), the table and the JSON with each pass's steps."""
    import json
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from runtime_fakes import H200, StandInArray as Arr
    shape = (timeline.MAX_BLOCKS, timeline.ROWS_STAMPED, 6)
    clock = np.zeros(shape, np.uint64)

    class Clocks(Arr):
        def copy_from_host(self, a):
            clock[...] = a

        def to_host(self):
            return clock

    class Stamped:
        def set_max_dynamic_smem(self, n):
            pass

        def variable(self, name, dtype, shp):
            if name == "phase_smid":
                assert (np.dtype(dtype), shp) == (np.dtype(np.uint32), (timeline.MAX_BLOCKS,))
                return SmIds(shp, dtype)
            assert (name, np.dtype(dtype), shp) == ("phase_clock", np.dtype(np.uint64), shape)
            return Clocks(shp, dtype)

    class SmIds(Arr):
        def to_host(self):
            return np.arange(timeline.MAX_BLOCKS, dtype=np.uint32) % dev.sm_count

    plain, stamped = object(), Stamped()
    launches = []

    def launch(kernel, grid, block, args, smem=0, cooperative=False):
        assert cooperative
        launches.append(kernel)
        if kernel is stamped:
            for b in range(grid[0]):
                for k in range(timeline.ROWS_STAMPED):
                    for m in range(6):
                        clock[b, k, m] = 5_000_000 + 1000 * (100 * k + 10 * m)
    dev = H200
    monkeypatch.setattr(timeline.driver, "device", lambda *a: dev)
    monkeypatch.setattr(timeline.driver, "to_device", lambda x: Arr(x.shape, x.dtype))
    monkeypatch.setattr(timeline.driver, "empty", lambda shp, dtype: Arr(shp, dtype))
    monkeypatch.setattr(timeline.driver, "synchronize", lambda: None)
    def prepare(p, rows):   # the grid fitted to two blocks an SM, as the driver would say
        from drvgemm.ladders.softmax import dispatch
        return plain, dispatch._fit_split(p, 2 * dev.sm_count)
    monkeypatch.setattr(timeline.sm, "prepare", prepare)
    monkeypatch.setattr(timeline.sm, "workspace", lambda n: Arr((n,)))
    monkeypatch.setattr(timeline, "stamped_build", lambda p: stamped)
    monkeypatch.setattr(timeline.drvgemm, "launch", launch)
    monkeypatch.setattr(timeline, "time_ms", lambda fn, warmup, reps: (fn(), [0.02])[1])
    monkeypatch.setattr(timeline, "measure_copy", lambda nbytes, **kw: {"median_ms": 0.015})
    monkeypatch.setattr(timeline, "_max_rel_err", lambda y, ref: 0.0)
    monkeypatch.setattr(timeline, "softmax_inputs", lambda r, c, prec, seed: np.zeros((r, c), np.float32))
    monkeypatch.setattr(timeline.sm, "reference", lambda x: np.zeros(x.shape))
    out = tmp_path / "t.json"
    assert timeline.main(["--shapes", "fp32:4x1048576", "--reps", "3", "--json", str(out)]) == 0
    rec = json.loads(out.read_text())["records"][0]
    assert rec["event_us_stamped"] == rec["event_us_unstamped"] == 20.0
    assert rec["steps"][0] == {"pass": 0, "loads": 10.0, "wait": 10.0, "fold": 10.0, "stores": 10.0}
    assert rec["passes"][0]["begin"] == [0.0, 0.0, 0.0] and rec["leave"] == [50.0, 50.0, 50.0]
    on = rec["pass0_on_sms"]     # 256 blocks on 132 SMs, block b on SM b mod 132
    assert on["sms"] == 132 and on["sms_with_two_or_more"] == 124
    assert on["b_and_b_plus_sm_count_together"] == 124 and len(rec["pass0_blocks"]) == 256
    assert launches.count(stamped) == 3 + 2 and launches.count(plain) == 3 + 2 + 1


def test_pass0_blocks_tell_folds_behind_a_neighbours_stores():
    """Four blocks of split 2 on three SMs: blocks 0 and 2 share SM 5 (rows 0
    and 1), block 2 folds after block 0 has begun its stores; blocks 1 and 3
    are alone. Each block's stamps as written, the folds sorted into the
    three kinds, and the placement counted."""
    st = np.zeros((timeline.MAX_BLOCKS, timeline.ROWS_STAMPED, 6), np.uint64)
    marks = {0: (0, 5, 6, 7, 9, 10),        # begin, reduced, complete, folded, stores, leave (us)
             1: (0, 5, 6, 8, 9, 10),
             2: (1, 6, 8, 11, 12, 13),      # sees its row complete at 8, after block 0 folded at 7
             3: (1, 6, 7, 8, 9, 10)}
    for b, ms in marks.items():
        for m, t in enumerate(ms):
            st[b, 0, m] = 1_000_000 + 1000 * t
    smids = np.zeros(timeline.MAX_BLOCKS, np.uint32)
    smids[:4] = (5, 6, 5, 7)
    per, on = timeline.blocks_of_pass0(st, smids, 4, 2, 2)
    assert [(r["block"], r["sm"], r["row"]) for r in per] == [(0, 5, 0), (1, 6, 0), (2, 5, 1), (3, 7, 1)]
    assert per[2] == {"block": 2, "sm": 5, "row": 1, "begin": 1.0, "reduced": 6.0, "complete": 8.0,
                      "folded": 11.0, "stores": 12.0, "leave": 13.0}
    assert on["sms"] == 3 and on["sms_with_two_or_more"] == 1 and on["of_those_same_row"] == 0
    assert on["b_and_b_plus_sm_count_together"] == 1          # blocks 0 and 2, not 1 and 3
    assert on["fold_blocks"] == {"sm_neighbour_storing": 1, "neighbour_not_yet": 1, "alone_on_sm": 2}
    assert on["fold_median_us"] == {"sm_neighbour_storing": 3.0, "neighbour_not_yet": 1.0, "alone_on_sm": 1.5}
