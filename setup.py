"""Copies the kernel folders cu/ and ptx/ into the wheel as drvgemm/_kernels/,
and builds drvgemm.runtime._fastlaunch, the C fast path of drvgemm.launch.

A checkout (and an editable install) reads the kernels from the repository
root; an installed wheel reads them from the package. drvgemm/runtime/sources.py
looks in both places. The extension is optional: where no C compiler (or no
Python headers) is found the build goes on without it and drvgemm.launch
stays in Python (drvgemm.launch_path() says which one is in use).
"""
import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithKernels(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "drvgemm" / "_kernels"
        for folder in ("cu", "ptx"):
            dst = target / folder
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(ROOT / folder, dst,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


FAST_LAUNCH = Extension(
    "drvgemm.runtime._fastlaunch", ["drvgemm/runtime/_fastlaunch.c"],
    py_limited_api=True,          # one build for every CPython >= 3.10 (abi3)
    extra_compile_args=["-O2"],
    optional=True,                # no compiler: drvgemm works without it
)

# The wheel's tag says what the extension is: abi3 from CPython 3.10 on
# (cp310-abi3-<platform>), not the interpreter that happened to build it.
setup(cmdclass={"build_py": BuildPyWithKernels}, ext_modules=[FAST_LAUNCH],
      options={"bdist_wheel": {"py_limited_api": "cp310"}})
