"""Kernel sources are named by file name or by a path relative to cu/ or
ptx/, whether the file sits at the top of cu/ or in a subfolder."""
import pytest

from drvgemm.runtime import sources


def test_bare_names_and_relative_paths_resolve(tmp_path, monkeypatch):
    root = tmp_path
    (root / "cu" / "gemm").mkdir(parents=True)
    (root / "cu" / "include").mkdir()
    (root / "ptx" / "probes").mkdir(parents=True)
    (root / "cu" / "gemm" / "01_naive.cu").write_text("// a")
    (root / "cu" / "scale.cu").write_text("// b")
    (root / "ptx" / "probes" / "probe.ptx").write_text("// c")
    (root / "cu" / "gemm" / "dup.cu").write_text("// d")
    (root / "cu" / "include" / "dup.cu").write_text("// e")
    monkeypatch.setattr(sources, "kernel_root", lambda: root)
    (root / "elsewhere").mkdir()
    monkeypatch.chdir(root / "elsewhere")   # a path is first tried as given, from the cwd
    assert sources.find_source("01_naive.cu") == root / "cu" / "gemm" / "01_naive.cu"
    assert sources.find_source("gemm/01_naive.cu") == root / "cu" / "gemm" / "01_naive.cu"
    assert sources.find_source("cu/gemm/01_naive.cu") == root / "cu" / "gemm" / "01_naive.cu"
    # the other layout: a path whose folder does not exist finds the file by name
    assert sources.find_source("memory/scale.cu") == root / "cu" / "scale.cu"
    assert sources.find_source("probe.ptx") == root / "ptx" / "probes" / "probe.ptx"
    assert sources.find_source("gemm/dup.cu") == root / "cu" / "gemm" / "dup.cu"
    with pytest.raises(FileNotFoundError, match="ambiguous"):
        sources.find_source("dup.cu")
    with pytest.raises(FileNotFoundError, match="not found"):
        sources.find_source("nope.cu")
    assert sources.include_dirs()[0] == root / "cu" / "include"


def test_every_registered_source_resolves():
    from drvgemm.ladders.gemm.registry import RUNGS
    from drvgemm.ladders.memory.registry import MEM_KERNELS
    from drvgemm.ladders.softmax.registry import SOFTMAX_RUNGS
    for name in {r.source for r in RUNGS} | {r.source for r in SOFTMAX_RUNGS} | \
            {k.source for k in MEM_KERNELS}:
        assert sources.find_source(name).is_file()


def test_a_name_lookup_sees_files_added_and_removed_after_the_first(tmp_path, monkeypatch):
    """find_source's index of file names is walked again when a folder of the
    tree changes: a file added, a second of the same name (ambiguous), a file
    removed, a new folder, are all seen by the next lookup."""
    from drvgemm.runtime import sources as src
    (tmp_path / "cu" / "a").mkdir(parents=True)
    (tmp_path / "ptx").mkdir()
    monkeypatch.setattr(src, "kernel_root", lambda: tmp_path)
    (tmp_path / "cu" / "a" / "x.cu").write_text("// x")
    assert src.find_source("x.cu") == (tmp_path / "cu" / "a" / "x.cu").resolve()
    (tmp_path / "cu" / "a" / "y.cu").write_text("// y")
    assert src.find_source("y.cu") == (tmp_path / "cu" / "a" / "y.cu").resolve()
    (tmp_path / "cu" / "b").mkdir()
    (tmp_path / "cu" / "b" / "x.cu").write_text("// another x")
    with pytest.raises(FileNotFoundError, match="ambiguous"):
        src.find_source("x.cu")
    (tmp_path / "cu" / "a" / "x.cu").unlink()
    assert src.find_source("x.cu") == (tmp_path / "cu" / "b" / "x.cu").resolve()
    (tmp_path / "cu" / "b" / "x.cu").unlink()
    with pytest.raises(FileNotFoundError, match="not found"):
        src.find_source("x.cu")


def test_a_file_read_again_after_any_change_to_it(tmp_path):
    """read_file keeps a file's bytes while its stat is unchanged: an old
    file rewritten with the same size and its mtime set back is read again
    (its ctime moves), and a file written within the clock's tick is not kept
    at all (a second rewrite in the same tick would not move its stat)."""
    import hashlib
    import os
    import time
    f = tmp_path / "h.cuh"
    f.write_bytes(b"#define A 1\n")
    time.sleep(2 * sources._MTIME_GRANULARITY_NS / 1e9)
    assert sources.read_file(f) == (b"#define A 1\n", hashlib.sha256(b"#define A 1\n").hexdigest())
    assert str(f) in sources._file_memo  # kept: old enough
    mtime = os.stat(f).st_mtime_ns
    f.write_bytes(b"#define A 2\n")
    os.utime(f, ns=(mtime, mtime))
    assert sources.read_file(f)[0] == b"#define A 2\n"
    assert str(f) not in sources._file_memo  # just changed: not kept
    f.write_bytes(b"#define A 3\n")
    assert sources.read_file(f)[0] == b"#define A 3\n"
    f.unlink()
    with pytest.raises(OSError):
        sources.read_file(f)


def test_the_file_memo_is_bounded(tmp_path, monkeypatch):
    """A long process compiling many files of its own keeps at most
    _MEMO_ENTRIES of them, the oldest dropped first, and reads each right."""
    import os
    monkeypatch.setattr(sources, "_MEMO_ENTRIES", 4)
    monkeypatch.setattr(sources, "_file_memo", {})
    old = 1_000_000_000 * 10**9
    files = []
    for i in range(10):
        f = tmp_path / f"h{i}.cuh"
        f.write_bytes(b"// %d\n" % i)
        os.utime(f, ns=(old, old))
        files.append(f)
    monkeypatch.setattr(sources, "_MTIME_GRANULARITY_NS", -10**19)  # every file counts as old
    for i, f in enumerate(files):
        assert sources.read_file(f)[0] == b"// %d\n" % i
    assert list(sources._file_memo) == [str(f) for f in files[-4:]]
