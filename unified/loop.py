"""The round loop (placeholder until the trainer issue lands: loads everything, trains nothing)."""

from __future__ import annotations

from omegaconf import DictConfig

from unified.config import UserError


def train(cfg: DictConfig) -> None:
    from unified.pipeline.benchmarks import BenchmarkError, load_problems

    try:
        problems = load_problems(cfg.benchmark.name, cfg.benchmark.source, cfg.benchmark.problems, list(cfg.benchmark.problem_ids))
    except BenchmarkError as exc:
        raise UserError(str(exc)) from None
    from transformers import AutoConfig

    from unified.models import load_tokenizer, resolve_model_path

    where = resolve_model_path(cfg.model.path)
    tokenizer, mcfg = load_tokenizer(where), AutoConfig.from_pretrained(where)
    n_params = mcfg.num_hidden_layers * 12 * mcfg.hidden_size**2 + mcfg.vocab_size * mcfg.hidden_size  # rough
    print(f"config ok; {len(problems)} {cfg.benchmark.name} problems ({problems[0].task_id}..); model {where} (~{n_params/1e6:.1f}M params, vocab {len(tokenizer)})")
    print("training is not wired yet: nothing was trained (see the trainer issue)")
