"""The run: the round loop, what it builds once, phase 5, metrics and the run log."""
