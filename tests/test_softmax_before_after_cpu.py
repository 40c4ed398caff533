"""benchmarks/softmax_before_after.py without a GPU: on a stand-in device
(launches recorded, each kernel's time a fixed figure), every source folder
-- OLD_DIR and each --also step -- is built from its own copy of the source
with its own headers first, timed as its own column in one interleaved
loop, and reported against the copy."""
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runtime_fakes import H200, StandInArray  # noqa: E402

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "softmax_before_after.py"
spec = importlib.util.spec_from_file_location("softmax_before_after", BENCH)
ba = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ba)


def test_each_source_folder_is_a_column_of_its_own(tmp_path, monkeypatch):
    src = Path(ba.sources.find_source("softmax_10_row_tile.cu")).parent
    folders = {}
    for name, us in (("old", 30.0), ("step1", 25.0)):
        d = tmp_path / name
        d.mkdir()
        shutil.copy(src / "softmax_10_row_tile.cu", d)
        folders[name] = (d, us)
    # step1 stands for a source from before the kernel waited on the grid before it
    step1_src = tmp_path / "step1" / "softmax_10_row_tile.cu"
    assert "grid_dependency_wait()" in step1_src.read_text()
    step1_src.write_text(step1_src.read_text().replace("grid_dependency_wait()", "(void)0"))
    built = []
    objs = {}

    class Built:
        def __init__(self, path, options):
            self.us = next(us for d, us in folders.values() if str(d) in path)
            built.append((os.path.basename(os.path.dirname(path)), options[0]))
            objs[os.path.basename(os.path.dirname(path))] = self

        def set_max_dynamic_smem(self, n):
            pass
    new = Built.__new__(Built)
    new.us = 20.0
    new.dependent_launch = True
    monkeypatch.setattr(ba.driver, "device", lambda *a: H200)
    monkeypatch.setattr(ba.driver, "to_device", lambda x: StandInArray(x.shape, x.dtype))
    monkeypatch.setattr(ba.driver, "empty", lambda shape, dtype: StandInArray(shape, dtype))
    monkeypatch.setattr(ba.driver, "synchronize", lambda: None)
    monkeypatch.setattr(ba.sm, "prepare", lambda p, rows: (new, p))
    monkeypatch.setattr(ba.drvgemm, "compile", lambda path, entry, defines, options: Built(path, options))
    launched = []   # each timed call's kernel: its stand-in time is that kernel's figure
    monkeypatch.setattr(ba.drvgemm, "launch", lambda k, *a, **kw: launched.append(k))
    monkeypatch.setattr(ba, "measure_copy", lambda nbytes, **kw: {"median_ms": 0.015})
    monkeypatch.setattr(ba, "_max_rel_err", lambda y, ref: 0.0)
    monkeypatch.setattr(ba, "softmax_inputs", lambda r, c, prec, seed: np.zeros((r, c), np.float32))
    monkeypatch.setattr(ba.sm, "reference", lambda x: np.zeros(x.shape))
    monkeypatch.setattr(ba, "time_ms", lambda fn, warmup, reps: (fn(), [launched[-1].us / 1000])[1])
    out = tmp_path / "out.json"
    assert ba.main([str(folders["old"][0]), "--also", str(folders["step1"][0]), "--reps", "3",
                    "--shapes", "bf16:131072x127", "--json", str(out)]) == 0
    rec = json.loads(out.read_text())["records"][0]
    assert (rec["old_us"], rec["also"]["step1"]["us"], rec["new_us"]) == (30.0, 25.0, 20.0)
    assert (rec["old_of_copy"], rec["also"]["step1"]["of_copy"], rec["new_of_copy"]) == (0.5, 0.6, 0.75)
    # every earlier build resolves its includes in its own folder first
    assert sorted(built) == [("old", f"-I{folders['old'][0]}"), ("step1", f"-I{folders['step1'][0]}")]
    # launched as the tree's build (a dependent launch), unless the earlier
    # source does not wait for the grid before it
    assert (objs["old"].dependent_launch, objs["step1"].dependent_launch) == (True, False)


def test_a_shape_names_its_kernel_and_the_old_builds_defines_or_neither():
    assert ba.shape_spec("bf16:131072x127") == ("bf16", 131072, 127, "auto", {})
    assert ba.shape_spec("fp32:1024x50257:softmax_08_any_row_cluster") == \
        ("fp32", 1024, 50257, "softmax_08_any_row_cluster", {})
    assert ba.shape_spec("bf16:131072x127:auto:ELEMS=32,ROTATE=1") == \
        ("bf16", 131072, 127, "auto", {"ELEMS": 32, "ROTATE": 1})
