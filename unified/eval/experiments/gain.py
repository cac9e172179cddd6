"""Test-time gain, as a claim against noise: greedy pass@1 after training on the problems'
own visible examples, against the untrained model, over seeds, with flips, McNemar's exact p
and a paired-bootstrap interval.

    python -m unified.eval.experiments.gain --problems 100 --rounds 3 --seeds 0,1 [--split report]
        [--benchmark mbpp|humaneval] [--parallel] [--collect] [key=value ...]

Steps (each resumes: a killed bench continues where it stopped; `--collect` only rebuilds; the
jobs are `gain_jobs.py`, the flags `gain_args.py`, this module collects the result):
1. before: `python -m unified.eval --n 16 --temperature T` on the base model: greedy
   pass@1 per problem (the control: without updates greedy decoding cannot change) and the
   unbiased sampled pass@k; `headroom` = problems greedy fails that some sample solves.
   Repeated greedily (`--control-repeats`, default 3: `before` and `control_2`, ...) with the
   threads and greedy batches of every "after" (greedy requests are batched apart from the
   samples): bf16 greedy depends on the batch, so a problem whose control differs between
   repeats is noise (`noisy_problems`), left out of every figure.
2. train: one `train_unified.py` run per seed (the default recipe plus any key=value given),
   `trainer.eval_every=0` (the bench evaluates), checkpointing every round.
3. after: the same evaluation of each seed's last checkpoint (greedy per problem, pass@k).
4. summary (`unified.eval.gain_stats`): per seed flips and McNemar's exact p, on the
   hidden tests (`pass_at_1_*`) and on EvalPlus's metric (`evalplus`: MBPP+ base + plus), and seed 0's trained weights in compact form
   (`unified.models.compact`, the bf16 delta of the changed tensors) at `--weights`, which
   `python -m unified.eval --model <model_path>` re-scores to seed 0's `pass_at_1_after`.

Problems (`unified/benchmarks/splits.py`): MBPP+ ids in a seeded random order, less the 21
tasks EvalPlus v0.2 removed: `tune` (92: recipes are decided here), `report` (192: the
exploratory results of earlier recipes, all chosen on them) and `confirm` (94: no decision
saw them). `--split confirm` runs once, for a recipe frozen in a commit first: it needs
`--recipe-commit SHA` (an ancestor of the running code), recorded as `recipe_commit`.
HumanEval: all 164 in order (its visible tests are the examples in the prompts).

With `--select-visible N` every seed's trained model and the control are also evaluated with
`--select visible` at n = N, and the untrained model at the samples per problem the recipe
drew over its rounds plus N (`sample_filter_baseline`: training against sample-and-filter at
equal samples); the planned analysis (`planned.py`: permutation p, consolidation, to_goal) is
added to the JSON.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from unified.benchmarks.splits import SPLIT_SEED, split_ids
from unified.cli import exit_code
from unified.eval.experiments.gain_args import parse_args
from unified.eval.experiments.gain_jobs import control_dirs, machines, per_round, read_json, run_all, run_select
from unified.eval.experiments.planned import planned
from unified.eval.experiments.record import REPO, Record, repo_relative, settings
from unified.eval.failures import flip_classes, gain_split
from unified.eval.gain_stats import flipped, noisy_problems, summary
from unified.files import latest_checkpoint, read_jsonl


def with_plan(args, ids: list[str], base: Path, result: dict) -> dict:
    """`result` with `select_visible`, the split, the recipe's commit and the planned keys."""
    out = {**result, "select_visible": select_block(args, ids, base), "split": args.split, "recipe_commit": args.recipe_commit}
    afters = {s: read_json(base / f"seed{s}" / "select_after" / "eval_results.json") for s in args.seeds}
    out.update(planned(out, read_json(base / "sample_filter" / "eval_results.json"), {s: a for s, a in afters.items() if a}))
    if out["select_visible"] is not None:  # the trained models' figure is the mean over seeds; seed 0's flips stay
        block = out["select_visible"]
        block.update(
            seed0_pass_at_1_after=block["pass_at_1_after"],
            pass_at_1_after=out["sample_filter_baseline"]["trained_select_visible_n8"],
        )
    return out


def select_block(args, ids: list[str], base: Path) -> dict | None:
    """`select_visible` of the result: filtered pass@1 of the control and of seed 0, with flips."""
    control = read_json(base / "select_control" / "eval_results.json")
    after = read_json(base / f"seed{args.seeds[0]}" / "select_after" / "eval_results.json")
    if not (control.get("complete") and after.get("complete")):
        return None
    key = "per_problem_select_visible"
    before, mine = {i: control[key].get(i) for i in ids}, {i: after[key].get(i) for i in ids}
    stats = summary(before, {args.seeds[0]: mine}, [])
    return {
        "n": args.select_visible,
        "seed": args.seeds[0],
        "control_pass_at_1": control.get("pass@1_select_visible"),
        "pass_at_1_after": after.get("pass@1_select_visible"),
        "control_greedy_pass_at_1": control.get("pass@1"),
        "greedy_pass_at_1_after": after.get("pass@1"),
        "filter_passed_control": control["select_visible"]["filter_passed"],
        "filter_passed_after": after["select_visible"]["filter_passed"],
        "per_seed": stats.get("per_seed"),
        "flips_gained": stats.get("flips_gained"),
        "flips_lost": stats.get("flips_lost"),
        "mcnemar_p": stats.get("mcnemar_p"),
        "per_problem_control": before,
        "per_problem_after": mine,
        "rule": "per problem, the first of n samples (T as sampled pass@k) that passes the visible examples; "
        "the greedy answer where none does; scored on the hidden tests",
    }


def metric_block(ids: list[str], controls: list[dict], afters: dict[int, dict], key: str) -> dict:
    """One metric's statistics (`key`: the eval JSON's per-problem map): per seed against the
    first control, leaving out the problems whose control differs between repeats."""
    reps = [{i: c.get(key, {}).get(i) for i in ids} for c in controls if c.get(key)]
    if not reps:
        return {}
    noisy = noisy_problems(reps) if len(reps) > 1 else []
    mine = {s: {i: a.get(key, {}).get(i) for i in ids} for s, a in afters.items() if a.get(key)}
    scored = [i for i in ids if reps[0].get(i) is not None]
    per_rep = [sum(bool(r.get(i)) for i in scored) / len(scored) for r in reps] if scored else []
    stats = summary(reps[0], mine, noisy) if mine else {"noisy_problems": sorted(noisy)}
    return {
        "control_pass_at_1": per_rep[0] if per_rep else None,
        "control_pass_at_1_repeats": per_rep,
        "control_repeats": len(reps),
        **stats,
    }


def collect(args, ids: list[str], base: Path, overrides: list[str]) -> dict:
    """The result JSON: its record's figures under the keys committed results carry."""
    controls = [read_json(base / name / "eval_results.json") for name in control_dirs(args)]
    controls = [c for c in controls if c.get("complete")] or controls[:1]
    before = controls[0]
    seeds, after_json = _seeds(args, ids, base)
    hidden = metric_block(ids, controls, after_json, "per_problem")
    record = Record(
        f"{args.benchmark}-{args.split}",
        args.benchmark,
        {i: before.get("per_problem", {}).get(i) for i in ids},
        tuple((x["seed"], x["per_problem_after"]) for x in seeds),
        tuple(hidden.get("noisy_problems", [])),
        rounds=args.rounds,
        settings=_settings(args, base, overrides),
    )
    _classify(seeds, record, before, after_json)
    return {
        "benchmark": args.benchmark,
        "problems": ids,
        "rounds": args.rounds,
        "model_path": repo_relative(args.weights),
        **_figures(record, seeds, before, _sample_rows(base)),
        **_discovery(record, seeds),
        "complete": len(seeds) == len(args.seeds),
        "control_repeats": hidden.get("control_repeats", 1),
        "control_pass_at_1_repeats": hidden.get("control_pass_at_1_repeats", []),
        "metric": {
            "pass_at_1_*": "hidden tests only (MBPP+: plus inputs; HumanEval: check's calls)",
            "evalplus": "EvalPlus's pass@1 of the same greedy samples (MBPP+: base + plus inputs)",
        },
        "evalplus": metric_block(ids, controls, after_json, "per_problem_evalplus"),
        "settings": dict(record.settings),
    }


def _seeds(args, ids: list[str], base: Path) -> tuple[list[dict], dict[int, dict]]:
    """Each finished seed's row (outcomes, sampled pass@k, metrics per round, CPU kinds) and its eval JSON."""
    seeds, after_json = [], {}
    for s in args.seeds:
        after = read_json(base / f"seed{s}" / "after" / "eval_results.json")
        if not after.get("complete"):
            continue
        after_json[s] = after
        seeds.append(
            {
                "seed": s,
                "pass_at_1_after": after.get("pass@1", after.get("pass_at_1")),
                "per_problem_after": {i: after["per_problem"].get(i) for i in ids},
                "sampled_pass_at_1_after": after.get("pass_at_k", {}).get("1"),
                "pass_at_k_after": after.get("pass_at_k", {}),
                "metrics_per_round": per_round(base / f"seed{s}" / "run"),
                "cpu_kinds": machines(base / f"seed{s}"),
            }
        )
    return seeds, after_json


def _classify(seeds: list[dict], record: Record, before: dict, after_json: dict) -> None:
    """Each seed's flips with their failure class before and after (`flip_classes`), in place."""
    steady = {i: v for i, v in record.control.items() if i not in set(record.noisy)}  # the flips the statistics count
    for seed in seeds:
        classes = before.get("per_problem_class"), after_json[seed["seed"]].get("per_problem_class")
        seed["flip_classes"] = flip_classes(*classes, steady, seed["per_problem_after"]) if all(classes) else None


def _figures(record: Record, seeds: list[dict], before: dict, rows: dict) -> dict:
    """pass@1 before and after, the gain, flips, McNemar p and the interval: computed from the record."""
    stats = summary(record.control, dict(record.seeds), record.noisy) if record.seeds else {}
    control_pass = before.get("pass@1", before.get("pass_at_1"))
    sampled = [x["sampled_pass_at_1_after"] for x in seeds if x["sampled_pass_at_1_after"] is not None]
    headroom = sorted(i for i, v in record.control.items() if v == 0 and (rows.get(i, {}).get("correct") or 0) > 0)
    return {
        "pass_at_1_before": control_pass,
        "pass_at_1_after": sum(x["pass_at_1_after"] for x in seeds) / len(seeds) if seeds else None,
        "control_pass_at_1_after": control_pass,
        "gain": stats.get("gain"),
        "gain_per_seed": stats.get("gain_per_seed"),
        "seeds": seeds,
        "gain_split": gain_split([x["flip_classes"] for x in seeds if x["flip_classes"]]),  # net problems: format / logic fixes
        "per_seed": stats.get("per_seed"),  # each seed's own flips and McNemar p against the control
        "flips_gained": stats.get("flips_gained"),
        "flips_lost": stats.get("flips_lost"),
        "mcnemar_p": stats.get("mcnemar_p"),
        "ci95": stats.get("ci95"),
        "sampled_pass_at_1_before": before.get("pass_at_k", {}).get("1"),
        "sampled_pass_at_1_after": sum(sampled) / len(sampled) if sampled else None,
        "pass_at_k_before": before.get("pass_at_k", {}),
        "control_classes": before.get("classes"),
        "control_classes_source": before.get("per_problem_class_source", "this run's control evaluation"),
        "headroom": len(headroom),
        "headroom_problems": headroom,
        "per_problem_before": dict(record.control),
        # the control repeated (greedy in bf16 depends on the batch): problems whose control differs between
        # repeats are noise, left out of every figure above and listed here
        "noisy_problems": list(record.noisy),
    }


def _discovery(record: Record, seeds: list[dict]) -> dict:
    """Per seed: problems with a sample passing the visible example per round and in any round,
    generated tokens, and the problems gained (noise aside)."""
    for seed in seeds:
        rounds = seed["metrics_per_round"]
        seed["signal_problems"] = [r.get("tasks/found_problems") for r in rounds]
        seed["signal_problems_any_round"] = rounds[-1].get("tasks/found_total") if rounds else None
        seed["generated_tokens"] = rounds[-1].get("compute/generation_tokens") if rounds else None
    steady = {i: v for i, v in record.control.items() if i not in set(record.noisy)}
    gained = {s: flipped(steady, after)[0] for s, after in record.seeds}
    return {
        "signal_problems": {str(x["seed"]): x["signal_problems"] for x in seeds},
        "signal_problems_any_round": {str(x["seed"]): x["signal_problems_any_round"] for x in seeds},
        "generated_tokens": {str(x["seed"]): x["generated_tokens"] for x in seeds},
        "gained_problems": {str(s): g for s, g in gained.items()},
        "distinct_gained": len({i for g in gained.values() for i in g}),
    }


def _sample_rows(base: Path) -> dict:
    """The control's sampled completions per problem (`correct`: how many of them pass)."""
    return {r["task_id"]: r for r in read_jsonl(base / "before" / "samples.jsonl")}


def _settings(args, base: Path, overrides: list[str]) -> dict:
    return {
        "model": args.model,
        "split": args.split,
        "offset": args.offset,
        "split_seed": SPLIT_SEED,
        "sampling": {"n": args.n, "temperature": args.temperature},
        "overrides": overrides,
        "train_config": _saved_config(base / f"seed{args.seeds[0]}" / "run"),
        "parallel": args.parallel,
        **settings(),
        "control_cpu_kinds": machines(base),
    }


def attach(result: dict, curve: dict | None = None, transfer: dict | None = None) -> dict:
    """The result with issue 35's `curve` (unified/eval/experiments/curve.py: one point per round of one seed's run)
    and `transfer` (unified/eval/experiments/transfer.py: these weights on untrained problems) beside its own keys.
    A curve of other problems or another number of rounds, or a transfer measured from other
    trained problems, stops with one line: the keys must describe this result."""
    out = dict(result)
    if curve is not None:
        if not curve.get("curve"):
            raise SystemExit("--curve: no `curve` points in that file; give the JSON unified/eval/experiments/curve.py wrote")
        if curve.get("problems") is not None and list(curve["problems"]) != list(result["problems"]):
            raise SystemExit(
                "--curve: the curve evaluated other problems than this result's; rerun unified/eval/experiments/curve.py "
                "with --problems-from this result"
            )
        if max(p["round"] for p in curve["curve"]) != result["rounds"]:
            raise SystemExit(
                f"--curve: the curve ends at round {max(p['round'] for p in curve['curve'])}, this result "
                f"trained {result['rounds']} rounds; curve the run these seeds trained"
            )
        out.update(
            curve=curve["curve"],
            curve_saturation=curve.get("saturation"),
            curve_run=repo_relative(curve["run"]) if curve.get("run") else None,
        )
    if transfer is not None:
        block = transfer.get("transfer")
        if not block:
            raise SystemExit(
                "--transfer: no `transfer` block in that file; give the JSON unified/eval/experiments/transfer.py wrote"
            )
        if sorted(transfer.get("trained_on", [])) != sorted(result["problems"]):
            raise SystemExit(
                "--transfer: that transfer was measured from weights trained on other problems; "
                "rerun unified/eval/experiments/transfer.py on this result"
            )
        out["transfer"] = block
    return out


def _saved_config(run: Path) -> dict:
    from omegaconf import OmegaConf

    latest = latest_checkpoint(run / "checkpoints")
    config = latest / "config.yaml" if latest is not None else None
    saved = OmegaConf.to_container(OmegaConf.load(config)) if config and config.exists() else {}
    return json.loads(json.dumps(saved).replace(str(REPO) + "/", ""))  # no path of this machine in a committed result


def write_weights(args, base: Path) -> None:
    """Seed 0's last checkpoint as compact committed weights (once)."""
    from omegaconf import OmegaConf

    from unified.models.compact import is_compact, write_compact, write_compact_adapter
    from unified.models.resolve import resolve_model_path

    ckpt = latest_checkpoint(base / f"seed{args.seeds[0]}" / "run" / "checkpoints")
    if ckpt is not None and not is_compact(args.weights):
        budget = OmegaConf.select(OmegaConf.load(ckpt / "config.yaml"), "pipeline.program_max_tokens")
        if (ckpt / "adapter").is_dir():  # LoRA: the adapter is the compact form
            write_compact_adapter(
                ckpt / "adapter",
                args.model,
                resolve_model_path(args.model),
                args.weights,
                program_max_tokens=budget,
                checkpoint=ckpt.name,
            )
        else:
            write_compact(
                ckpt / "model",
                args.model,
                resolve_model_path(args.model),
                args.weights,
                program_max_tokens=budget,
                checkpoint=ckpt.name,
            )


def main() -> int:
    args, overrides = parse_args(__doc__)
    ids = split_ids(args.split, args.benchmark)[args.offset : args.offset + args.problems]
    base = Path(args.runs_dir) / f"{args.benchmark}-{args.split}-{args.offset}+{len(ids)}x{args.rounds}"
    if not args.collect and (code := run_all(args, ids, base, overrides)) != 0:
        return code
    if not args.collect and (code := run_select(args, ids, base, {**os.environ, "PYTHONUNBUFFERED": "1"})) != 0:
        return code
    write_weights(args, base)
    result = attach(
        collect(args, ids, base, overrides),
        curve=read_json(args.curve) if args.curve else None,
        transfer=read_json(args.transfer) if args.transfer else None,
    )
    result = with_plan(args, ids, base, result)
    suffix = "" if args.benchmark == "mbpp" else f"_{args.benchmark}"
    out = Path(args.output or REPO / "logs" / "bench" / f"test_time_gain{suffix}.json")
    Record.read(out.name, result).write(out, result)  # its figures recomputed from the outcomes, stamped
    f = lambda v: "n/a" if v is None else f"{v:.3f}"
    print(
        f"greedy pass@1 control {f(result['control_pass_at_1_after'])} | after {f(result['pass_at_1_after'])} "
        f"(seeds {result['gain_per_seed']}) | flips +{result['flips_gained']}/-{result['flips_lost']} | "
        f"McNemar p {f(result['mcnemar_p'])} | 95% CI {result['ci95']} | headroom {result['headroom']} -> {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(exit_code(main, "run the same command again: every step resumes"))
