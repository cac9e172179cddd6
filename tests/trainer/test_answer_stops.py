"""The engine stops a completion where its answer ends (`generate(..., ends=...)`): the
backend stops at the marker string as vLLM does, and a match that does not close the answer
(a ``` that opens a block) continues the same completion from its tokens. A backend that
plays scripted completions one character per token shows the result is exactly the script
cut at its answer's end (text/stops.py), within the budget, with the right finish reason."""

import pytest

from unified.text.stops import FENCE_END, TAG_END, AnswerEnd, cut
from unified.trainer.engine_base import STOP_STRING, Engine
from unified.types import SamplingConfig

SCRIPTS = {
    "A|": "Sure:\n```\ndef f(x):\n    return x\n```\nUse it like f(1).\n",  # a bare opening fence first
    "B|": "```python\n# Your code here\n```\nSo:\n```python\ndef f(x):\n    return 2\n```\nmore\n```\nend",
    "C|": "<answer>\n```python\ndef f(x):\n    return 3\n```\n</answer>\ntrailing words",
    "D|": "no code at all, just words that run on",
}


class _CharTokenizer:
    def __call__(self, text):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids)


class _ScriptedBackend(Engine):
    """vLLM's stop-string behaviour over scripted text: a request runs on from its prompt
    (the script's key, then whatever it generated before) and stops after the first match of
    its marker in the text it generates now (`STOP_STRING`), at the script's end ("stop",
    as EOS) or at its budget ("length")."""

    def __init__(self):
        super().__init__(_CharTokenizer(), max_model_len=4096, retries=0, retry_backoff_s=0.0)
        self.requests = []

    def _generate_ids(self, requests, sampling):
        self.requests.append(list(requests))
        out = []
        for r in requests:
            text = "".join(chr(i) for i in r.prompt_ids)
            key, _, before = text.partition("|")
            rest = SCRIPTS[key + "|"][len(before) :]
            new, finish = rest[: r.limit], "stop" if len(rest) <= r.limit else "length"
            found = -1 if r.end is None else new.find(r.end.marker)
            if found >= 0:
                new, finish = new[: found + len(r.end.marker)], STOP_STRING
            out.append([(tuple(ord(c) for c in new), tuple(-0.5 for _ in new), finish)] * sampling.n)
        return out


@pytest.mark.parametrize("budget", [8, 30, 45, 200])
@pytest.mark.parametrize(
    "key,end",
    [
        ("A|", AnswerEnd(FENCE_END, "f")),
        ("B|", AnswerEnd(FENCE_END, "f")),
        ("C|", AnswerEnd(TAG_END)),
        ("C|", AnswerEnd(FENCE_END, "f")),
        ("D|", AnswerEnd(FENCE_END, "f")),
        ("B|", None),
    ],
)
def test_a_stopped_completion_is_its_script_cut_at_the_answer_end(key, end, budget):
    engine = _ScriptedBackend()
    [[done, again]] = engine.generate([key], SamplingConfig(n=2, temperature=1.0, max_tokens=budget, seed=3), ends=[end])
    expected = cut(SCRIPTS[key][:budget], end)
    assert done.text == again.text == expected
    assert len(done.token_ids) == len(done.logprobs) == len(expected) <= budget
    closed = end is not None and len(cut(SCRIPTS[key][:budget], end)) < len(SCRIPTS[key][:budget])
    ran_out = len(SCRIPTS[key]) > budget and not closed
    assert done.finish_reason == ("length" if ran_out else "stop")


def test_a_false_stop_continues_with_the_rest_of_the_budget_and_a_new_seed():
    engine = _ScriptedBackend()
    [[done]] = engine.generate(
        ["A|"], SamplingConfig(n=1, temperature=1.0, max_tokens=100, seed=5), ends=[AnswerEnd(FENCE_END, "f")]
    )
    first, [second] = engine.requests[0], engine.requests[1]
    assert len(engine.requests) == 2 and len(first) == 1
    stopped_at = len("Sure:\n```\n")  # the opening fence matched the marker; it closes nothing
    assert second.prompt_ids == first[0].prompt_ids + [ord(c) for c in SCRIPTS["A|"][:stopped_at]]
    assert second.limit == 100 - stopped_at and second.seed != first[0].seed
    assert done.text.endswith("return x\n```\n") and done.finish_reason == "stop"


def test_greedy_copies_continue_once_and_shaped_requests_never_stop_early():
    engine = _ScriptedBackend()
    [[a, b, c]] = engine.generate(["B|"], SamplingConfig(n=3, temperature=0.0, max_tokens=200), ends=[AnswerEnd(FENCE_END, "f")])
    assert a.text == b.text == c.text == cut(SCRIPTS["B|"], AnswerEnd(FENCE_END, "f"))
    assert all(len(call) == 1 for call in engine.requests[1:])  # one continuation per call, not three
    engine.SHAPES = True
    [[shaped]] = engine.generate(
        ["B|"], SamplingConfig(n=1, max_tokens=200), shapes=["root ::= ..."], ends=[AnswerEnd(FENCE_END, "f")]
    )
    assert shaped.text == SCRIPTS["B|"] and engine.requests[-1][0].end is None  # the grammar ends a shaped answer
    with pytest.raises(ValueError, match="answer ends"):
        engine.generate(["A|", "B|"], SamplingConfig(), ends=[None])
