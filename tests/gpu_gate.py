"""Whether GPU tests run, skip or fail, from why the driver did not start.

Skip only when there is nothing to test on: no driver library installed, no
cuda-bindings package, or a driver that sees no device. A driver library
that is installed but cannot be used (it fails to load, it is older than
the bindings need, cuInit returns an error) is a broken machine, and a GPU
test that skipped there would hide it: those fail."""
from __future__ import annotations

import ctypes
import ctypes.util

from drvgemm.runtime import driver
from drvgemm.runtime.errors import NoDeviceError

# NoDeviceError names that mean "nothing to test on".
ABSENT = ("NO_BINDINGS", "CUDA_ERROR_NO_DEVICE")


def driver_library_present() -> bool:
    """Whether a CUDA driver library (libcuda) is installed, whether or not
    it loads: the dynamic loader finds it, or a load fails for another
    reason than the file not being there."""
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError as e:
        text = str(e)
        if "cannot open shared object file" not in text and "No such file" not in text:
            return True       # found, but broken (wrong class, missing symbols, ...)
    return ctypes.util.find_library("cuda") is not None


def decide(init=None, library_present=driver_library_present):
    """("run", None), ("skip", reason) or ("fail", reason). ``init`` starts
    the driver (drvgemm.runtime.driver's start-up by default); any error
    that is not a NoDeviceError is a failure too (it propagates)."""
    init = init or driver._init
    try:
        init()
        return "run", None
    except NoDeviceError as e:
        if e.name in ABSENT:
            return "skip", e.description
        if e.name == "NO_DRIVER" and not library_present():
            return "skip", e.description
        return "fail", (f"a CUDA driver is installed but does not work ({e.name}): "
                        f"{e.description}")
