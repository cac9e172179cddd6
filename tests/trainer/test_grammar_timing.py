"""Answers decoded in a shape (structured outputs) do not depend on how fast grammars compile.

vLLM compiles each request's grammar on a thread pool by default and leaves a request out of
every step until its grammar is ready, so a slow compile (a busy machine) moves the request
into a later prefill batch, and batches of other sizes round the logits differently: the
behaviour log-probs (and now and then a token) change (issue 61: two deterministic runs
differed in round 1). The engine compiles in line (`compile_grammars_in_line`). Here some
compiles are delayed on purpose; the outputs must equal the undelayed ones bit for bit.

Broken code fails here: with the thread pool back (`_use_async_grammar_compilation = True`),
6 of 16 delayed completions had other log-probs (measured on the tiny model, 2-core Xeon).
"""

from __future__ import annotations

import time

import pytest

from tests.trainer.test_constrained import _tasks
from unified.kinds import KINDS
from unified.trainer.engine import SamplingConfig

SAMPLING = SamplingConfig(n=4, temperature=1.0, max_tokens=24, seed=3)


def _outputs(engine) -> list:
    """Token ids and log-probs of shaped answers to four tasks, from an empty prefix cache
    (a cached prefix would change the batches too)."""
    tasks = _tasks("deduction") + _tasks("abduction")
    engine.llm.reset_prefix_cache()
    groups = engine.generate([t.messages for t in tasks], SAMPLING, [KINDS[t.kind].answer_shape(t) for t in tasks])
    return [[(c.token_ids, c.logprobs) for c in group] for group in groups]


def test_a_slow_grammar_compile_changes_no_answer(vllm_engine, monkeypatch):
    so = pytest.importorskip("vllm.v1.structured_output")
    plain = _outputs(vllm_engine)
    compile_grammar, calls = so.StructuredOutputManager._create_grammar, []

    def slow(manager, request):
        calls.append(request.request_id)
        if len(calls) % 3 == 0:  # every third request's grammar comes late
            time.sleep(0.3)
        return compile_grammar(manager, request)

    monkeypatch.setattr(so.StructuredOutputManager, "_create_grammar", slow)
    delayed = _outputs(vllm_engine)
    assert len(calls) == 16  # four tasks, four samples each: every grammar went through the delay
    assert delayed == plain
