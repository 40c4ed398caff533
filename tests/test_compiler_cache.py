"""The cache key is right by construction: every file a compile read (any
include form, any folder, any depth), every name, option and define; a hit
counts only while each listed file still reads the same. CPU only."""
import os
import re
import subprocess
import sys

import pytest

import drvgemm
from drvgemm.runtime import compiler, sources


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DRVGEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DRVGEMM_NO_CACHE", raising=False)
    return tmp_path / "cache"


def _value(kernel) -> int:
    """The constant the kernel stores (each test kernel writes one int)."""
    found = re.findall(r"mov\.u32\s+%r\d+,\s*(-?\d+);", kernel.ptx)
    assert found, kernel.ptx
    return int(found[-1])


KERNEL = 'extern "C" __global__ void v(int* o) { o[0] = VALUE; }\n'


def _edit_and_recompile(src, header, text_a, text_b, **kw):
    header.write_text(text_a)
    a = drvgemm.compile(str(src), "v", **kw)
    header.write_text(text_b)
    b = drvgemm.compile(str(src), "v", **kw)
    return _value(a), _value(b)


def test_quoted_header_next_to_the_source(cache, tmp_path):
    (tmp_path / "k.cu").write_text('#include "val.h"\n' + KERNEL)
    assert _edit_and_recompile(tmp_path / "k.cu", tmp_path / "val.h",
                               "#define VALUE 41\n", "#define VALUE 42\n") == (41, 42)


def test_angle_header_next_to_the_source(cache, tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (tmp_path / "k.cu").write_text("#include <val.h>\n" + KERNEL)
    assert _edit_and_recompile(tmp_path / "k.cu", inc / "val.h", "#define VALUE 3\n",
                               "#define VALUE 4\n", options=[f"-I{inc}"]) == (3, 4)


def test_angle_header_through_include_paths(cache, tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    src = tmp_path / "k.cu"
    src.write_text("#include <val.h>\n" + KERNEL)
    (inc / "val.h").write_text("#define VALUE 5\n")
    a = drvgemm.compile_module(str(src), ["v"], include_paths=[inc]).kernel("v")
    (inc / "val.h").write_text("#define VALUE 6\n")
    b = drvgemm.compile_module(str(src), ["v"], include_paths=[inc]).kernel("v")
    assert (_value(a), _value(b)) == (5, 6)


def test_header_nested_two_levels_in_another_folder(cache, tmp_path):
    (tmp_path / "lib" / "detail").mkdir(parents=True)
    (tmp_path / "k.cu").write_text("#include <lib/top.h>\n" + KERNEL)
    (tmp_path / "lib" / "top.h").write_text('#include "detail/mid.h"\n')
    (tmp_path / "lib" / "detail" / "mid.h").write_text("#include <lib/detail/leaf.h>\n")
    leaf = tmp_path / "lib" / "detail" / "leaf.h"
    assert _edit_and_recompile(tmp_path / "k.cu", leaf, "#define VALUE 7\n", "#define VALUE 8\n",
                               options=[f"-I{tmp_path}"]) == (7, 8)


def test_header_in_the_kernel_folders(cache, tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "cu" / "include").mkdir(parents=True)
    (root / "ptx").mkdir()
    monkeypatch.setattr(sources, "kernel_root", lambda: root)
    (root / "cu" / "include" / "wrap.cuh").write_text('#include "val.cuh"\n')
    val = root / "cu" / "include" / "val.cuh"
    (tmp_path / "k.cu").write_text('#include "wrap.cuh"\n' + KERNEL)
    assert _edit_and_recompile(tmp_path / "k.cu", val, "#define VALUE 9\n",
                               "#define VALUE 10\n") == (9, 10)


def test_a_new_header_that_shadows_the_old_one_recompiles(cache, tmp_path):
    """A file appearing earlier on the search path is what NVRTC opens next
    time: the entry remembers the paths it found missing."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "val.h").write_text("#define VALUE 11\n")
    src = tmp_path / "k.cu"
    src.write_text('#include "val.h"\n' + KERNEL)
    a = drvgemm.compile(str(src), "v", options=[f"-I{inc}"])
    (tmp_path / "val.h").write_text("#define VALUE 12\n")  # next to the source: found first
    b = drvgemm.compile(str(src), "v", options=[f"-I{inc}"])
    assert (_value(a), _value(b)) == (11, 12)


def test_user_include_paths_come_before_drvgemm_folders(cache, tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    # mma.cuh also exists in drvgemm's cu/include: the user's wins
    (inc / "mma.cuh").write_text("#define VALUE 13\n")
    k = drvgemm.compile_module('#include "mma.cuh"\n' + KERNEL, ["v"], include_paths=[inc])
    assert _value(k.kernel("v")) == 13


def test_two_entries_of_one_file_in_either_order(cache, tmp_path):
    src = tmp_path / "two.cu"
    src.write_text('extern "C" __global__ void a(int* o) { o[0] = 21; }\n'
                   'extern "C" __global__ void b(float* o, int n) { o[n] = 22; }\n')
    first = [drvgemm.compile(str(src), n) for n in ("a", "b")]
    second = [drvgemm.compile(str(src), n) for n in ("b", "a")][::-1]
    for ka, kb in (first, second):
        assert (ka.entry, kb.entry) == ("a", "b")
        assert [p.name for p in ka.params] == ["o"]
        assert [p.name for p in kb.params] == ["o", "n"]


def test_entry_name_is_in_the_key(cache, tmp_path):
    """Two names of one source are two entries (a key without the names
    would hand the first kernel back for the second)."""
    src = tmp_path / "t.cu"
    src.write_text('template <int V> __global__ void t(int* o) { o[0] = V; }\n')
    for text in (str(src), src.read_text()):
        assert _value(drvgemm.compile(text, "t<31>")) == 31
        assert _value(drvgemm.compile(text, "t<32>")) == 32
    assert len(list(cache.glob("*.bin"))) == 4


def test_lineinfo_include_paths_and_defines_change_the_key(cache, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    drvgemm.compile(KERNEL, "v", defines={"VALUE": 1})
    drvgemm.compile(KERNEL, "v", defines=["VALUE=2"])
    drvgemm.compile(KERNEL, "v", defines={"VALUE": 1}, options=["--use_fast_math"])
    drvgemm.compile_module(KERNEL, ["v"], defines={"VALUE": 1}, include_paths=[tmp_path / "a"])
    drvgemm.compile_module(KERNEL, ["v"], defines={"VALUE": 1}, include_paths=[tmp_path / "b"])
    assert len(list(cache.glob("*.bin"))) == 5
    no_lines = compiler.compile_binary(KERNEL, "v", defines={"VALUE": 1}, lineinfo=False)
    assert ".loc" not in no_lines.ptx and len(list(cache.glob("*.bin"))) == 6


def test_source_text_resolves_quoted_includes_from_the_working_folder(cache, tmp_path,
                                                                      monkeypatch):
    """As NVRTC does for a program named without a folder; the folder is in
    the key, so another working folder's header is not mistaken for it."""
    for d, v in (("one", 14), ("two", 15)):
        (tmp_path / d).mkdir()
        (tmp_path / d / "val.h").write_text(f"#define VALUE {v}\n")
    src = '#include "val.h"\n' + KERNEL
    monkeypatch.chdir(tmp_path / "one")
    a = drvgemm.compile(src, "v")
    monkeypatch.chdir(tmp_path / "two")
    b = drvgemm.compile(src, "v")
    assert (_value(a), _value(b)) == (14, 15)


def test_a_file_next_to_the_working_folder_does_not_shadow_the_source_folder(cache, tmp_path,
                                                                             monkeypatch):
    (tmp_path / "src").mkdir()
    (tmp_path / "cwd").mkdir()
    (tmp_path / "src" / "val.h").write_text("#define VALUE 16\n")
    (tmp_path / "cwd" / "val.h").write_text("#define VALUE 17\n")
    (tmp_path / "src" / "k.cu").write_text('#include "val.h"\n' + KERNEL)
    monkeypatch.chdir(tmp_path / "cwd")
    assert _value(drvgemm.compile(str(tmp_path / "src" / "k.cu"), "v")) == 16


def test_an_include_through_a_macro_is_never_cached(cache, tmp_path):
    (tmp_path / "val.h").write_text("#define VALUE 18\n")
    src = tmp_path / "k.cu"
    src.write_text('#define HDR "val.h"\n#include HDR\n' + KERNEL)
    assert _value(drvgemm.compile(str(src), "v")) == 18
    (tmp_path / "val.h").write_text("#define VALUE 19\n")
    assert _value(drvgemm.compile(str(src), "v")) == 19
    assert not list(cache.glob("*.bin"))


def test_cache_hit_needs_no_compiler(cache, tmp_path):
    (tmp_path / "val.h").write_text("#define VALUE 20\n")
    (tmp_path / "k.cu").write_text('#include "val.h"\n' + KERNEL)
    ran = []
    with compiler.compile_listener(ran.append):
        drvgemm.compile(str(tmp_path / "k.cu"), "v")
        drvgemm.compile(str(tmp_path / "k.cu"), "v")
    assert len(ran) == 1


# -- hygiene (issue 16, defect 9) -------------------------------------------
def test_no_temporary_file_is_left_when_a_write_fails(cache, monkeypatch):
    def full_disk(fd, mode):
        os.close(fd)
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(compiler.os, "fdopen", full_disk)
    drvgemm.compile(KERNEL, "v", defines={"VALUE": 1})
    assert not [p.name for p in cache.iterdir() if p.name.startswith(".tmp-")]


def test_cache_dir_expands_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("DRVGEMM_CACHE_DIR", "~/x")
    monkeypatch.delenv("DRVGEMM_NO_CACHE", raising=False)
    assert compiler.cache_dir() == tmp_path / "x"


@pytest.mark.parametrize("value,on", [("false", True), ("0", True), ("no", True), ("off", True),
                                      ("", True), ("1", False), ("true", False), ("yes", False)])
def test_no_cache_words(monkeypatch, tmp_path, value, on):
    monkeypatch.setenv("DRVGEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("DRVGEMM_NO_CACHE", value)
    assert (compiler.cache_dir() is not None) == on


def test_size_bound_evicts_least_recently_used(cache, monkeypatch):
    drvgemm.compile(KERNEL, "v", defines={"VALUE": 1})
    (first,) = cache.glob("*.bin")
    size = first.stat().st_size
    os.utime(first, (1, 1))  # long unused
    drvgemm.compile(KERNEL, "v", defines={"VALUE": 2})
    monkeypatch.setenv("DRVGEMM_CACHE_MAX_MB", str(2.5 * size / 2**20))
    drvgemm.compile(KERNEL, "v", defines={"VALUE": 3})
    left = list(cache.glob("*.bin"))
    assert first not in left and len(left) == 2


def test_cache_cli_info_and_clear(cache, capsys):
    from drvgemm.cli import main
    drvgemm.compile(KERNEL, "v", defines={"VALUE": 1})
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(cache) in out and "1 entries" in out
    assert main(["cache", "clear"]) == 0
    assert "removed 1" in capsys.readouterr().out
    assert not list(cache.glob("*.bin"))


def test_the_test_suite_uses_a_temporary_cache():
    d = compiler.cache_dir()
    home = os.path.join(os.path.expanduser("~"), ".cache")
    assert d is None or not str(d).startswith(home)


def test_warm_run_of_the_compile_command_prints_no_compiling_lines(tmp_path):
    code = ("import sys; from drvgemm.cli import main; "
            "sys.exit(main(['compile', '--kernels', '01_naive,saxpy,saxpy_ptx']))")
    env = dict(os.environ, DRVGEMM_CACHE_DIR=str(tmp_path / "c"))
    env.pop("DRVGEMM_NO_CACHE", None)
    cold = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert cold.returncode == 0, cold.stderr[-2000:]
    assert "compiling" in cold.stderr
    warm = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert warm.returncode == 0 and "compiling" not in warm.stderr, warm.stderr[-2000:]
    assert warm.stdout == cold.stdout
    assert max(len(line) for line in warm.stdout.splitlines()) <= 100
