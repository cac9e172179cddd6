"""`python -m unified.evaluate`: the older name of `python -m unified.eval` (same flags, same output)."""

if __name__ == "__main__":
    import sys

    from unified.eval.cli import main

    sys.exit(main(prog="python -m unified.evaluate"))
