"""Disassemblies are cached per cubin and nvdisasm version
(drvgemm/runtime/sass.py): in the process, and on disk in the compile cache."""
import pytest

import drvgemm
from drvgemm.runtime import sass

if sass.nvdisasm_path() is None:
    pytest.skip("nvdisasm is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def cubin():
    return drvgemm.compile("saxpy.cu", "saxpy", arch="sm_90").cubin


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """A fresh cache directory, an empty in-process memo, and a count of the
    nvdisasm runs."""
    monkeypatch.setenv("DRVGEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DRVGEMM_NO_CACHE", raising=False)
    monkeypatch.setattr(sass, "_memo", {})
    runs = []

    def run(tool, c):          # nvdisasm itself runs once per distinct cubin per session
        runs.append(1)
        if c not in _REAL:
            _REAL[c] = _real_nvdisasm(tool, c)
        return _REAL[c]
    monkeypatch.setattr(sass, "_run_nvdisasm", run)
    return runs, tmp_path


_REAL = {}
_real_nvdisasm = sass._run_nvdisasm


def test_one_nvdisasm_run_per_cubin(counted, cubin, monkeypatch):
    runs, cache = counted
    first = sass.disassemble(cubin)
    assert "saxpy" in first and len(runs) == 1
    assert sass.disassemble(cubin) == first and len(runs) == 1          # in the process
    monkeypatch.setattr(sass, "_memo", {})
    assert sass.disassemble(cubin) == first and len(runs) == 1          # from the disk
    assert len(list(cache.glob("*.sass"))) == 1
    assert not list(cache.glob(".tmp-*"))


def test_another_cubin_or_nvdisasm_version_is_a_miss(counted, cubin, monkeypatch):
    runs, cache = counted
    text = sass.disassemble(cubin)
    other = drvgemm.compile("saxpy.cu", "saxpy", arch="sm_80").cubin
    assert sass.disassemble(other) != text and len(runs) == 2
    monkeypatch.setattr(sass, "_memo", {})
    monkeypatch.setattr(sass, "nvdisasm_version", lambda tool: "nvdisasm 99.9 (pretend)")
    assert sass.disassemble(cubin) == text and len(runs) == 3
    assert len(list(cache.glob("*.sass"))) == 3


def test_a_corrupt_entry_is_disassembled_again(counted, cubin, monkeypatch):
    runs, cache = counted
    text = sass.disassemble(cubin)
    (entry,) = cache.glob("*.sass")
    entry.write_text(entry.read_text().replace("saxpy", "saxpz"))
    monkeypatch.setattr(sass, "_memo", {})
    assert sass.disassemble(cubin) == text and len(runs) == 2
    entry.write_bytes(b"\xff\xfe garbage")
    monkeypatch.setattr(sass, "_memo", {})
    assert sass.disassemble(cubin) == text and len(runs) == 3


def test_no_cache_writes_nothing(counted, cubin, monkeypatch):
    runs, cache = counted
    monkeypatch.setenv("DRVGEMM_NO_CACHE", "1")
    sass.disassemble(cubin)
    assert not list(cache.iterdir())


def test_code_digest_reads_the_entrys_machine_code():
    """The .text section read from the ELF holds 16 bytes per instruction
    nvdisasm prints for the entry; its digest is stable, other code gives
    another one, and an unknown entry or a non-ELF image is refused."""
    k = drvgemm.compile("saxpy.cu", "saxpy", arch="sm_90")
    text = sass.elf_section(k.cubin, f".text.{k.entry}")
    assert len(text) == 16 * len(sass.entry_instructions(sass.disassemble(k.cubin), k.entry))
    assert sass.code_digest(k.cubin, k.entry) == sass.code_digest(bytes(k.cubin), k.entry)
    from drvgemm.ladders.gemm.registry import by_name, rung_kernel
    other = rung_kernel(by_name()["01_naive"], False)
    assert sass.code_digest(other.cubin, other.entry) != sass.code_digest(k.cubin, k.entry)
    with pytest.raises(ValueError, match="no .text.nosuch"):
        sass.code_digest(k.cubin, "nosuch")
    with pytest.raises(ValueError, match="ELF64"):
        sass.elf_section(b"not a cubin", ".text")
