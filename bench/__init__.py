"""Speed benchmarks: each measures one cost (engine throughput, push time, a round's split,
the sandbox, scaling), prints a table and writes logs/bench/<name>.json with the machine it
ran on. Run from the repository root: `python -m bench.<name>` (`make bench` runs the set).
The claims about learning (gain, transfer, curve, sweep, ...) are `unified.eval.experiments`."""
