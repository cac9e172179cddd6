"""`ray` for a test that needs it, or the test skipped with one line where Ray is not installed.

The lent GPU machine has no Ray but may have bench/gpu_shims' stand-in on the path (verl
imports ray at module level; docs/gpu.md): `import ray` works there and everything else
raises, so the stand-in counts as not installed too."""

from __future__ import annotations

import pytest


def real_ray():
    """The `ray` module, or a skip (module level too) where only the stand-in or nothing is there."""
    ray = pytest.importorskip("ray", reason="ray is not installed")
    if not hasattr(ray, "init"):  # the stand-in raises AttributeError for every name but ObjectRef
        pytest.skip("ray is not installed (only bench/gpu_shims' stand-in for it)", allow_module_level=True)
    return ray
