"""Every test here runs when asked for (`pytest -m multinode`), not in the default suite: each
starts simulated nodes (Ray nodes, torchrun agents and their trainers) and takes minutes on a
busy machine (measured in docs/multinode.md), which the CI suite's time cannot carry. The
default suite keeps the cheap check that a stale Ray session does not break a run
(tests/sandbox/test_executor.py::test_ray_backend_runs_batches_in_order)."""

import pytest


def pytest_collection_modifyitems(config, items):
    if "multinode" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="simulated nodes (minutes): pytest -m multinode")
    for item in items:
        if item.get_closest_marker("multinode") is not None:
            item.add_marker(skip)
