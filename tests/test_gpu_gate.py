"""GPU tests skip only where there is nothing to test on; a driver that is
installed but broken makes them fail (tests/gpu_gate.py)."""
import pytest

import gpu_gate
from drvgemm.runtime.errors import CudaError, NoDeviceError


def raising(name, code=-1, description="described"):
    def init():
        raise NoDeviceError("cuInit", code, name, description)
    return init


def test_no_driver_library_skips():
    what, reason = gpu_gate.decide(raising("NO_DRIVER", description="no libcuda"),
                                   library_present=lambda: False)
    assert (what, reason) == ("skip", "no libcuda")


def test_a_driver_library_that_does_not_load_fails():
    what, reason = gpu_gate.decide(raising("NO_DRIVER", description="undefined symbol"),
                                   library_present=lambda: True)
    assert what == "fail" and "installed but does not work" in reason
    assert "undefined symbol" in reason


def test_a_driver_too_old_fails():
    what, reason = gpu_gate.decide(raising("CUDA_ERROR_INSUFFICIENT_DRIVER", 35, "too old"),
                                   library_present=lambda: True)
    assert what == "fail" and "CUDA_ERROR_INSUFFICIENT_DRIVER" in reason


@pytest.mark.parametrize("name", ["CUDA_ERROR_NO_DEVICE", "NO_BINDINGS"])
def test_no_device_or_no_bindings_skips(name):
    assert gpu_gate.decide(raising(name), library_present=lambda: True)[0] == "skip"


def test_any_other_driver_error_propagates():
    def init():
        raise CudaError("cuInit", 999, "CUDA_ERROR_UNKNOWN", "bad")
    with pytest.raises(CudaError):
        gpu_gate.decide(init)


def test_a_working_driver_runs():
    assert gpu_gate.decide(lambda: None) == ("run", None)


@pytest.mark.parametrize("name, library, outcome", [
    ("CUDA_ERROR_INSUFFICIENT_DRIVER", True, "Failed"),
    ("NO_DRIVER", True, "Failed"),
    ("NO_DRIVER", False, "Skipped"),
    ("CUDA_ERROR_NO_DEVICE", True, "Skipped"),
])
def test_the_gpu_fixture_applies_it(monkeypatch, name, library, outcome):
    """The session fixture itself, with the driver's start-up replaced:
    a broken driver is pytest.fail, never pytest.skip."""
    import conftest
    from _pytest import outcomes
    from drvgemm.runtime import driver
    monkeypatch.setattr(driver, "_init", raising(name, description="the driver said so"))
    monkeypatch.setattr(gpu_gate, "driver_library_present", lambda: library)
    monkeypatch.setattr(gpu_gate.decide, "__defaults__", (None, lambda: library))
    try:
        conftest.gpu.__wrapped__()
        got = None
    except (outcomes.Failed, outcomes.Skipped) as e:   # caught: a Skipped must not skip this
        got = e
    assert type(got).__name__ == outcome and "the driver said so" in str(got)


def test_this_machine_is_classified():
    """Here: either a GPU runs, or the reason is one that may skip."""
    what, reason = gpu_gate.decide()
    assert what in ("run", "skip"), reason
