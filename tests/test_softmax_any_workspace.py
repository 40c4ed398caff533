"""The split-row kernels' workspace protocol (cu/softmax/09_split_row.cu),
emulated on the CPU across a sequence of launches of different plans sharing
one buffer, as drvgemm_softmax_any.workspace() shares it.

The kernel's precondition is that a slot's arrive/leave counters read zero
when a launch starts (a block waits until arrive reaches (k + 1) * split; a
counter already past that lets it fold pairs its peers have not written yet).
The first GPU run failed exactly so: 3 x 777777 fp16 after 3 x 1048576 fp32
and bf16, with the counters stored after the pairs (offset slots*2*split),
so an earlier plan's pairs sat where the next plan looked for its counters."""
import re
import struct
from pathlib import Path

import pytest

A = pytest.importorskip("drvgemm_softmax_any")

ROOT = Path(__file__).resolve().parents[1]


def old_layout(slots, split):
    """The first version's layout, kept to show the emulation catches it."""
    pairs_bytes = slots * 2 * split * 8
    return {"arrive": pairs_bytes, "leave": pairs_bytes + slots * 4, "pairs": 0,
            "bytes": pairs_bytes + slots * 8}


def emulate_launch(ws: bytearray, rows, split, slots, layout):
    """One launch: check the precondition, then do what the kernel writes:
    every chunk's pair for every row of its slot (parity double-buffered),
    the arrive counts, and the last leaver's reset. Returns the problems."""
    lay = layout(slots, split)
    if len(ws) < lay["bytes"]:
        ws.extend(bytes(lay["bytes"] - len(ws)))
    problems = []
    u32 = lambda off: struct.unpack_from("<I", ws, off)[0]  # noqa: E731
    for s in range(slots):
        a, l = u32(lay["arrive"] + 4 * s), u32(lay["leave"] + 4 * s)
        if a or l:
            problems.append(f"slot {s}: counters ({a}, {l}) at launch")
    for s in range(slots):
        k = 0
        for _row in range(s, rows, slots):
            for c in range(split):
                off = lay["pairs"] + ((s * 2 + (k & 1)) * split + c) * 8
                struct.pack_into("<ff", ws, off, 3.0 + c, 1000.0 + k)    # positive floats: big u32s
                struct.pack_into("<I", ws, lay["arrive"] + 4 * s, u32(lay["arrive"] + 4 * s) + 1)
            k += 1
        struct.pack_into("<I", ws, lay["leave"] + 4 * s, split)
        if u32(lay["arrive"] + 4 * s) != k * split:
            problems.append(f"slot {s}: arrive {u32(lay['arrive'] + 4 * s)} != {k * split}")
        struct.pack_into("<I", ws, lay["arrive"] + 4 * s, 0)
        struct.pack_into("<I", ws, lay["leave"] + 4 * s, 0)
    return problems


# the split cases of check_softmax_any.correctness_cases(), in their order
SEQUENCE = [(3, 1048576, "fp32", 0), (3, 1048575, "fp32", 1), (3, 1048576, "bf16", 5),
            (3, 777_777, "fp16", 3), (2, 4_500_000, "fp32", 1), (2, 9_000_001, "bf16", 0),
            (40, 300_000, "fp32", 1), (1, 1048576, "fp32", 0),
            (4, 1048576, "fp32", 0), (16, 1048576, "fp32", 0), (1, 1048576, "fp32", 0),
            (64, 262144, "fp32", 0), (4, 1048576, "bf16", 0), (3, 1048576, "fp32", 0)]


def _split_plans():
    for rows, cols, prec, off in SEQUENCE:
        p = A.plan(rows, cols, prec, aligned=off == 0)
        if p.split:
            yield rows, p


def _run_sequence(layout):
    ws = bytearray()
    out = []
    for rows, p in _split_plans():
        out += [f"{rows} rows {p.describe()}: {m}" for m in emulate_launch(ws, rows, p.split, p.slots, layout)]
    return out


def test_counters_are_zero_at_every_launch_of_a_mixed_sequence():
    assert _run_sequence(A.split_workspace_layout) == []


def test_the_emulation_catches_the_first_layout():
    assert _run_sequence(old_layout), "the old layout should have been caught"


def test_counter_head_and_pairs_never_overlap():
    for slots in (1, 2, 3, 37, 264, A.WS_MAX_SLOTS):
        for split in (1, 2, 48, 65, 264):
            lay = A.split_workspace_layout(slots, split)
            assert lay["leave"] + 4 * A.WS_MAX_SLOTS <= lay["pairs"]
            assert lay["bytes"] == lay["pairs"] + slots * 2 * split * 8
    with pytest.raises(ValueError):
        A.split_workspace_layout(A.WS_MAX_SLOTS + 1, 1)


def test_plans_fit_the_counter_head_and_their_workspace():
    for rows, cols in ((100000, 70000), (8, 50_000_000), (1, 2**30), (1000, 20000), (60, 20000)):
        p = A.plan(rows, cols, "fp32")
        if p.split:
            assert 1 <= p.slots <= A.WS_MAX_SLOTS
            assert p.workspace_bytes >= A.split_workspace_layout(p.slots, p.split)["bytes"]


def test_kernel_and_host_agree_on_the_head():
    src = (ROOT / "cu/softmax/09_split_row.cu").read_text()
    m = re.search(r"constexpr int WS_MAX_SLOTS = (\d+);", src)
    assert m and int(m.group(1)) == A.WS_MAX_SLOTS
    assert "WS_PAIRS_OFFSET = 2 * WS_MAX_SLOTS * 4" in src
