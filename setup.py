"""Copies the kernel folders cu/ and ptx/ into the wheel as drvgemm/_kernels/.

A checkout (and an editable install) reads them from the repository root;
an installed wheel reads them from the package. drvgemm/sources.py looks in
both places.
"""
import shutil
from pathlib import Path

from setuptools import setup
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


setup(cmdclass={"build_py": BuildPyWithKernels})
