"""Disassemble a cubin with nvdisasm (from the nvidia-cuda-nvdisasm wheel or
the PATH), so SASS can be read and checked with no GPU: HMMA, HGMMA,
LDGSTS, LDSM, UTMALDG present where a rung means them, no LDL/STL."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path


def nvdisasm_path() -> str | None:
    try:
        import nvidia
        for base in nvidia.__path__:
            for cand in Path(base).glob("cu*/bin/nvdisasm"):
                if os.access(cand, os.X_OK):
                    return str(cand)
    except ImportError:
        pass
    return shutil.which("nvdisasm")


def disassemble(cubin: bytes) -> str:
    tool = nvdisasm_path()
    if tool is None:
        raise FileNotFoundError("nvdisasm not found: pip install nvidia-cuda-nvdisasm "
                                "(or put the CUDA toolkit's bin/ on PATH)")
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
        name = f.name
    try:
        out = subprocess.run([tool, "-c", name], capture_output=True, text=True)
    finally:
        os.unlink(name)
    if out.returncode != 0:
        raise RuntimeError(f"nvdisasm failed: {out.stderr.strip()}")
    return out.stdout


_OP = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)")


def opcode_counts(sass: str) -> Counter:
    """Count base opcodes (HMMA, FFMA, LDGSTS, ...) in a disassembly."""
    c = Counter()
    for m in _OP.finditer(sass):
        c[m.group(1)] += 1
    return c
