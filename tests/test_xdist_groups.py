"""The suite's xdist groups take effect (tests/conftest.py)."""
import pytest


@pytest.mark.xdist_group("xdist_groups")
def test_a_group_is_in_the_node_id_the_scheduler_sees(request):
    """--dist loadgroup puts a test on its group's worker by the suffix of
    its node id (test@group). Without the suffix every group is silently
    ignored: the kernel-set tests compile at once on two workers and both
    workers build the wheel."""
    # xdist sets this option on its workers under --dist loadgroup
    if not request.config.getoption("loadgroup", False):
        pytest.skip("not run on a pytest-xdist worker under --dist loadgroup")
    assert request.node.nodeid.endswith("@xdist_groups"), request.node.nodeid
