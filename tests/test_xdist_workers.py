"""Under pytest-xdist the workers share one compile cache and keep their
groups (tests/conftest.py)."""
import os

import pytest

import conftest


def test_workers_use_the_cache_the_controller_made():
    """A worker that made a cache of its own would compile every kernel its
    tests need again, and so would the processes it starts."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("not run on a pytest-xdist worker")
    assert not conftest.CACHE_MADE_HERE, os.environ["DRVGEMM_CACHE_DIR"]


@pytest.mark.xdist_group("xdist_workers")
def test_a_group_is_in_the_node_id_the_scheduler_sees(request):
    """--dist loadgroup puts a test on its group's worker by the suffix of
    its node id (test@group). Without the suffix every group is silently
    ignored: the kernel-set tests compile at once on two workers and both
    workers build the wheel."""
    # xdist sets this option on its workers under --dist loadgroup
    if not request.config.getoption("loadgroup", False):
        pytest.skip("not run on a pytest-xdist worker under --dist loadgroup")
    assert request.node.nodeid.endswith("@xdist_workers"), request.node.nodeid
