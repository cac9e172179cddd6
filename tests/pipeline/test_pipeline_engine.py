"""One round of phases 1-4 and the rewards through the real resident tiny-model vLLM engine."""

from dataclasses import replace

import pytest

from tests.helpers.pipeline_config import pipeline_config
from tests.helpers.rounds import round_data as phases_1_4
from unified.benchmarks.hidden import with_expected_outputs
from unified.benchmarks.load import load_problems
from unified.sandbox.executor import ExecutorConfig
from unified.sandbox.executors import build_executor
from unified.pipeline.parquet_io import write_round
from unified.pipeline.phases import score_rollouts
from unified.pipeline.validate import REASONS


def _engine():
    engine_mod = pytest.importorskip("unified.trainer.engine")
    pytest.importorskip("vllm")
    existing = engine_mod.current_engine()  # one resident engine per process: reuse it
    if existing is not None:
        return existing
    from unified.models.tiny_model import default_model_dir
    from unified.trainer.distributed import init_distributed

    init_distributed("cpu")  # the process group must exist before vLLM
    return engine_mod.build_engine(
        "vllm_cpu",
        str(default_model_dir()),
        dtype="float32",
        max_model_len=1024,
        seed=0,
        kv_cache_gib=1,
        gpu_memory_utilization=0.4,
        tensor_parallel_size=1,
        retries=2,
        retry_backoff_s=0.1,
    )


@pytest.mark.slow
def test_round_through_the_tiny_vllm_engine(tmp_path):
    engine = _engine()
    from unified.pipeline.generation import SamplingConfig

    cfg = pipeline_config(
        max_tasks=None,
        keep_passing_visible=True,
        balance_kinds=True,
        seed_programs="canonical",
        num_programs=2,
        program_max_tokens=48,
        num_proposed_inputs=2,
        input_max_tokens=48,
    )
    with build_executor(ExecutorConfig(workers=2, timeout_s=2.0)) as executor:
        problems = [replace(p, hidden=p.hidden[:3]) for p in load_problems("mbpp", ids=["Mbpp/2", "Mbpp/63"])]
        problems = with_expected_outputs(problems, executor.run_batch)
        data = phases_1_4(problems, engine, executor, cfg, round_index=1, seed=0, evaluate=True)

        assert set(data.pass_at_1) == {"Mbpp/2", "Mbpp/63"} and set(data.pass_at_1.values()) <= {0.0, 1.0}
        # every sampled completion became a program or a counted program rejection
        sampled = [p for p in data.program_candidates if p.source == "model"]
        unextracted = [r for r in data.rejections if r.stage == "program" and r.reason in ("no_code", "syntax", "no_entry_point")]
        assert len(sampled) + len(unextracted) == 2 * cfg.num_programs
        assert all(r.reason in REASONS[r.stage] for r in data.rejections)
        assert {t.kind for t in data.tasks} == set(cfg.kinds)

        completions = engine.generate(
            [t.messages for t in data.tasks], SamplingConfig(n=2, temperature=1.0, max_tokens=32, seed=0)
        )
        assert [len(c) for c in completions] == [2] * len(data.tasks)
        scores = score_rollouts(data.tasks, completions, executor, cfg)
        penalty = {cfg.format_penalty, 0.0}  # format_penalty_when=no_signal: the penalty or, with a signal, 0
        for group in scores:
            for reward, reason in group:
                assert (reason is None and reward in (0.0, 1.0)) or (reason is not None and reward in penalty)
        gold = score_rollouts(data.tasks, [[t.gold] for t in data.tasks], executor, cfg)
        assert all(g == [(1.0, None)] for g in gold)

    paths = write_round(tmp_path / "round_1", data)
    assert all(p.exists() for p in paths.values())
