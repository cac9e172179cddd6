"""`loop.finished`: a run asked again when its checkpoint covers every round and its final
evaluation is of those weights returns at once; anything short of that runs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import torch

from unified.config import load_config
from unified.run.loop import finished


def _cfg(out: Path, *extra: str):
    return load_config(["model=tiny", f"output_dir={out}", "trainer.rounds=3", *extra])[1]


def _checkpoint(out: Path, round_index: int, version: int) -> Path:
    folder = out / "checkpoints" / f"round_{round_index:06d}"
    folder.mkdir(parents=True)
    torch.save({"round": round_index, "aggregator": {"version": version}}, folder / "state.pt")
    return folder


def _problems(*ids: str) -> tuple:
    return tuple(SimpleNamespace(problem_id=i) for i in ids)


def _final_eval(out: Path, version: int, ids: tuple[str, ...]) -> None:
    (out / "eval").mkdir(parents=True, exist_ok=True)
    body = {"version": version, "problems": len(ids), "per_problem": {i: 0.0 for i in ids}}
    (out / "eval" / "eval_results.json").write_text(json.dumps(body))


def test_a_run_that_covers_every_round_and_evaluated_its_weights_is_finished(tmp_path):
    inputs = SimpleNamespace(resume=_checkpoint(tmp_path, 3, 12), problems=_problems("a", "b"))
    _final_eval(tmp_path, 12, ("a", "b"))
    said = finished(_cfg(tmp_path), inputs)
    assert said and "round 3 of 3" in said and "version 12" in said and "--rounds 4" in said


def test_anything_left_to_do_runs(tmp_path):
    inputs = SimpleNamespace(resume=_checkpoint(tmp_path, 3, 12), problems=_problems("a", "b"))
    assert finished(_cfg(tmp_path), SimpleNamespace(resume=None, problems=_problems("a"))) is None  # a fresh run
    assert finished(_cfg(tmp_path), inputs) is None  # no final evaluation on disk
    _final_eval(tmp_path, 11, ("a", "b"))
    assert finished(_cfg(tmp_path), inputs) is None  # an evaluation of older weights
    _final_eval(tmp_path, 12, ("a", "c"))
    assert finished(_cfg(tmp_path), inputs) is None  # of other problems, as many
    _final_eval(tmp_path, 12, ("a",))
    assert finished(_cfg(tmp_path), inputs) is None  # of fewer problems
    _final_eval(tmp_path, 12, ("a", "b"))
    assert finished(_cfg(tmp_path, "trainer.rounds=4"), inputs) is None  # more rounds asked for
    (tmp_path / "eval" / "eval_results.json").write_text("{torn")
    assert finished(_cfg(tmp_path), inputs) is None  # an unreadable evaluation is no evaluation


def test_without_evaluation_the_checkpoint_alone_says_finished(tmp_path):
    inputs = SimpleNamespace(resume=_checkpoint(tmp_path, 3, 12), problems=_problems("a"))
    said = finished(_cfg(tmp_path, "trainer.eval_every=0"), inputs)
    assert said and "final evaluation" not in said
