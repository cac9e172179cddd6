"""Command line: convenience flags that map onto Hydra keys, plus free `key=value` overrides.

python train_unified.py --benchmark mbpp --problems 4 --rounds 2 algorithm.lr=1e-5
python train_unified.py --cfg job          # print the resolved config and exit
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from unified.errors import ArgumentParser, UserError, whole_number

FLAG_TO_KEY = {
    "problems": "benchmark.problems",
    "rounds": "trainer.rounds",
    "save_every": "trainer.save_every",
    "resume": "trainer.resume",
    "output_dir": "output_dir",
}
BOOL_FLAG_TO_KEY = {"verbose": "trainer.verbose"}


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="train_unified.py",
        description="Test-time RL for code LLMs: one resident policy and one resident vLLM engine.",
        epilog="Any other KEY=VALUE argument is a Hydra override, e.g. algorithm.lr=1e-5 rollout=hf. "
        "Config groups: model, rollout, algorithm, benchmark, pipeline, executor, trainer, experiment.",
    )
    p.add_argument("--benchmark", help="mbpp or humaneval (config group benchmark)")
    p.add_argument("--problems", type=whole_number("--problems"), help="use the first K problems")
    p.add_argument("--problem-id", action="append", default=[], metavar="ID", help="a problem id, e.g. Mbpp/2 (repeatable)")
    p.add_argument("--rounds", type=whole_number("--rounds"), help="number of rounds N")
    p.add_argument("--save-every", type=whole_number("--save-every"), help="checkpoint every K rounds")
    p.add_argument("--resume", help="auto | none | PATH to a checkpoint")
    p.add_argument("--gpu", help="GPU ids, e.g. 0,1,2,3 (sets CUDA_VISIBLE_DEVICES)")
    p.add_argument("--output-dir", help="where logs, data and checkpoints go (default logs/<run_name>)")
    p.add_argument("--cfg", choices=["job", "all"], help="print the resolved config and exit")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=None,
        help="keep vLLM/torch/transformers start-up warnings (trainer.verbose=true)",
    )
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="Hydra overrides")
    return p


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    """Returns the parsed flags and the full Hydra override list they stand for."""
    args = build_parser().parse_intermixed_args(list(sys.argv[1:] if argv is None else argv))
    overrides = []
    if args.benchmark is not None:
        overrides.append(f"benchmark={args.benchmark}")
    for flag, key in FLAG_TO_KEY.items():
        value = getattr(args, flag)
        if value is not None:
            overrides.append(f"{key}={value}")
    for flag, key in BOOL_FLAG_TO_KEY.items():
        if getattr(args, flag):
            overrides.append(f"{key}=true")
    if args.problem_id:
        quoted = ",".join("'" + pid.replace("'", "") + "'" for pid in args.problem_id)
        overrides.append(f"benchmark.problem_ids=[{quoted}]")
    if args.gpu is not None:
        overrides.append(f"trainer.gpus='{args.gpu}'")
    for ov in args.overrides:
        if "=" not in ov and not ov.startswith("~"):  # ~key deletes a key
            raise UserError(f"malformed override {ov!r}: write overrides as key=value, e.g. trainer.rounds=3")
    return args, overrides + list(args.overrides)


RESUME_HINT = "to continue from the last checkpoint, run the same command with --resume auto"


def exit_code(run: Callable[[], int], resume_hint: str = RESUME_HINT) -> int:
    """Run a command's body: a UserError is one `error: ...` line on stderr and exit code 2
    (no traceback), Ctrl-C is exit code 130."""
    try:
        return run()
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: {resume_hint}", file=sys.stderr)
        return 130
