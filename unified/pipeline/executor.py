"""`python -m unified.pipeline.executor`: the older name of `python -m unified.sandbox` (same flags, same output)."""

if __name__ == "__main__":
    import sys

    from unified.sandbox.cli import main

    sys.exit(main(prog="python -m unified.pipeline.executor"))
