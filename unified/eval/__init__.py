"""Evaluation: pass@1 on hidden tests, samples.jsonl scoring, pass@k, the scaling fit."""
