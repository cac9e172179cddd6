"""A stand-in for `ray`, put on the path by bench/gpu_check.py only where ray is missing.

verl 0.9.1 imports ray at module level (`verl/protocol.py`, reached by any `import verl...`,
ours being `verl.trainer.ppo.core_algos`, `verl.trainer.config`, `verl.workers.config`) and
uses it only in `DataProtoFuture` (`ray.ObjectRef` in an annotation, `ray.get`), which this
project never calls. Ray's wheel is ~79 MB (ray 2.60.0, cp312, manylinux2014): more than
the 64 MiB that travels to the GPU machine, which has no network. Anything else asked of
this module raises, so a code path that really needs ray fails loudly instead of quietly.
"""


class ObjectRef:
    """The one name verl's import needs (an annotation in DataProtoFuture)."""


def __getattr__(name: str):
    raise AttributeError(f"ray.{name}: this is bench/gpu_shims' stand-in for ray (docs/gpu.md); install ray to use it")
