"""The two-node torchrun runs take minutes (two 3-round runs of two trainers each; measured
in docs/multinode.md): they run when asked for (`pytest -m multinode`), not in the default
suite, whose time they would exceed. The Ray tests (about a minute) run in both."""

import pytest

ASKED_ONLY = ("test_torchrun_nodes.py",)


def pytest_collection_modifyitems(config, items):
    if "multinode" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="two-node torchrun runs (minutes): pytest -m multinode")
    for item in items:
        if item.path.name in ASKED_ONLY:
            item.add_marker(skip)
