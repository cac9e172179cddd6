"""`python -m unified.evaluate`: the evaluation command line (unified/eval/cli.py).

The library is `unified.eval.evaluate`; importing this module gives that module itself.
"""

import sys

if __name__ == "__main__":
    import runpy

    runpy.run_module("unified.eval.cli", run_name="__main__", alter_sys=True)
else:
    from unified.eval import evaluate as _library

    sys.modules[__name__] = _library
