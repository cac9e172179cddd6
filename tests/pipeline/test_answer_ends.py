"""Which requests stop where their answer ends (`pipeline.stop_at_answer`): phase 1's
programs and free-text phase-5 answers do, shaped answers (their grammar ends them) and the
greedy evaluation never do; a scripted round reads the same programs either way."""

from dataclasses import replace

import pytest

from tests.helpers.rounds import round_data as phases_1_4
from unified.kinds import KINDS, SOLVE, kind_of, raw_answer
from unified.benchmarks.hidden import with_expected_outputs
from unified.benchmarks.load import load_problems
from tests.helpers.scripted import ScriptedGenerator
from tests.helpers.pipeline_config import pipeline_config
from unified.sandbox.executor import ExecutorConfig
from unified.sandbox.executors import build_executor
from unified.text.stops import FENCE_END, TAG_END, AnswerEnd
from unified.types import Task

ANSWER = "```python\ndef similar_elements(a, b):\n    return tuple(set(a) & set(b))\n```\n\nExample:\n```python\nprint(similar_elements((1, 2), (2, 3)))\n```\nOutput: (2,)\n"


def _task(kind: str) -> Task:
    return Task(f"Mbpp/2#p0:{kind}:0", kind, "Mbpp/2", "Mbpp/2#p0", "prompt", "gold", "similar_elements", "code", ())


def test_free_text_answers_stop_at_their_kinds_end_and_shaped_ones_never():
    free = pipeline_config(kinds=tuple(KINDS), constrain=())
    for kind in KINDS:
        marker = FENCE_END if raw_answer(kind_of(kind)) else TAG_END
        assert free.answer_end(_task(kind)) == AnswerEnd(marker, "similar_elements" if marker == FENCE_END else "")
    shaped = pipeline_config(kinds=tuple(KINDS))  # the default: the self-play kinds are shaped
    assert all(shaped.answer_end(_task(k)) is None for k in shaped.constrain if k in KINDS)
    assert shaped.answer_end(_task(SOLVE)) == AnswerEnd(FENCE_END, "similar_elements")
    off = replace(free, stop_at_answer=False)
    assert all(off.answer_end(_task(k)) is None for k in KINDS) and off.program_end("f") is None
    assert pipeline_config(constrain=(SOLVE,)).program_end("f") is None  # shaped programs end in their grammar


@pytest.fixture(scope="module")
def problems():
    with build_executor(ExecutorConfig(workers=2, timeout_s=2.0)) as ex:
        yield (
            ex,
            with_expected_outputs([replace(p, hidden=p.hidden[:3]) for p in load_problems("mbpp", ids=["Mbpp/2"])], ex.run_batch),
        )


@pytest.mark.parametrize("stop", [True, False])
def test_phase_1_asks_for_the_stop_and_reads_the_same_program(problems, stop):
    executor, chosen = problems
    generator = ScriptedGenerator(lambda text, sampling: [ANSWER] if sampling.temperature > 0 else ["no"])
    cfg = pipeline_config(kinds=(SOLVE,), num_programs=2, evaluate_baseline=True, stop_at_answer=stop)
    data = phases_1_4(chosen, generator, executor, cfg, round_index=1, evaluate=True)
    sampled = [ends for (texts, sampling), ends in zip(generator.calls, generator.ends) if sampling.temperature > 0]
    greedy = [ends for (texts, sampling), ends in zip(generator.calls, generator.ends) if sampling.temperature == 0]
    assert sampled == [[AnswerEnd(FENCE_END, "similar_elements") if stop else None]]
    assert greedy == [[None]]  # the hidden-test evaluation reads whole completions, as before
    [text] = {c.text for c in data.program_completions["Mbpp/2"]}
    assert text == (ANSWER[: ANSWER.index("\nExample")] if stop else ANSWER)
    assert [p.code for p in data.programs] == ["def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n"]
