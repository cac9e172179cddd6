"""The gain bench's command line: its flags, the key=value overrides passed on to every training
run, and the recipe's commit checked (`--split confirm` runs only a recipe frozen in a commit
the running code descends from)."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from unified.eval.experiments.record import REPO


def frozen_recipe(split: str, commit: str | None) -> str | None:
    """The recipe's commit, checked: `--split confirm` needs one that the running code descends
    from (the recipe was frozen before the confirm run started)."""
    if commit is None:
        if split == "confirm":
            raise SystemExit(
                "--split confirm needs --recipe-commit SHA: freeze the recipe in a commit first, then run "
                "the confirm split once with that commit"
            )
        return None
    full = subprocess.run(["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=REPO, capture_output=True, text=True)
    if (
        full.returncode != 0
        or subprocess.run(["git", "merge-base", "--is-ancestor", full.stdout.strip(), "HEAD"], cwd=REPO).returncode != 0
    ):
        raise SystemExit(
            f"--recipe-commit {commit}: not a commit the running code descends from; give the commit that froze the recipe"
        )
    return full.stdout.strip()


def parser(doc: str) -> argparse.ArgumentParser:
    """`doc`: gain.py's module doc (its first paragraph is the description)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmark", choices=("mbpp", "humaneval"), default="mbpp")
    p.add_argument("--model", default="smollm2")
    p.add_argument("--problems", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seeds", default="0,1", help="training seeds, comma separated")
    p.add_argument("--split", choices=("tune", "report", "confirm", "no_example"), default="report")
    p.add_argument(
        "--recipe-commit", default=None, help="--split confirm: the commit that froze the recipe (an ancestor of HEAD)"
    )
    p.add_argument("--offset", type=int, default=0, help="skip the split's first problems")
    p.add_argument("--n", type=int, default=16, help="samples per problem for pass@k before and after")
    p.add_argument("--temperature", type=float, default=1.0, help="their temperature")
    p.add_argument("--parallel", action="store_true", help="train all seeds at once (one thread each)")
    p.add_argument(
        "--control-repeats",
        type=int,
        default=3,
        help="evaluations of the base model; problems whose greedy outcome differs between them are noise",
    )
    p.add_argument(
        "--select-visible",
        type=int,
        default=0,
        metavar="N",
        help="also evaluate the control and seed 0 with --n N --select visible (filtered pass@1: `select_visible`)",
    )
    p.add_argument("--collect", action="store_true", help="only rebuild the JSON from the run folders")
    # the run folders and result names keep the script's old name: committed results and resumed runs use them
    p.add_argument("--runs-dir", default=str(REPO / "logs" / "bench" / "test_time_gain"))
    p.add_argument("--output", default=None, help="default logs/bench/test_time_gain[_humaneval].json")
    p.add_argument("--weights", default=None, help="seed 0's compact weights (default docs/results/weights/<benchmark>-seed0)")
    p.add_argument(
        "--curve", type=Path, default=None, help="a unified/eval/experiments/curve.py JSON of one of these seeds: kept as `curve`"
    )
    p.add_argument(
        "--transfer",
        type=Path,
        default=None,
        help="a unified/eval/experiments/transfer.py JSON of these weights: kept as `transfer`",
    )
    return p


def parse_args(doc: str) -> tuple[argparse.Namespace, list[str]]:
    """The flags (seeds as ints, the recipe's commit checked, the weights' folder filled in) and the key=value overrides."""
    p = parser(doc)
    args, overrides = p.parse_known_args()
    if [o for o in overrides if "=" not in o]:
        p.error(f"unknown argument(s) {[o for o in overrides if '=' not in o]}: extra arguments must be key=value overrides")
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.recipe_commit = frozen_recipe(args.split, args.recipe_commit)
    args.weights = args.weights or str(REPO / "docs" / "results" / "weights" / f"{args.benchmark}-seed{args.seeds[0]}")
    return args, overrides
