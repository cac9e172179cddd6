"""`python -m unified.pipeline.executor`: the sandbox's command line (unified/sandbox/cli.py).

The executor itself is `unified.sandbox.executor`; importing this module gives that module.
"""

import sys

if __name__ == "__main__":
    import runpy

    runpy.run_module("unified.sandbox.cli", run_name="__main__", alter_sys=True)
else:
    from unified.sandbox import executor as _library

    sys.modules[__name__] = _library
