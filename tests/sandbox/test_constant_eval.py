"""`eval` under the default policy: an expression of constants and operators is evaluated, as
a plain interpreter would (HumanEval/160's canonical answer builds "3+4*5-2" and evals it);
anything that names, calls, subscripts or reaches an attribute is refused at run time, however
`eval` is reached. And the policy costs no canonical answer of either benchmark anything: each
gives the same results under it as in a pool that bans nothing."""

import pytest

from tests.helpers.sandbox_pools import bare, pool  # noqa: F401 - fixtures
from unified.benchmarks.hidden import hidden_calls, passes_hidden
from unified.benchmarks.load import load_problems
from unified.benchmarks.oracle import output_matches

ALLOWED = [
    ('eval("2 + 3 * 4 - 5 // 2 ** 2")', 13),
    ('eval(b"(1, [2, 3], {4: 5}, -6.5, 1 if 2 > 1 else 0)")', (1, [2, 3], {4: 5}, -6.5, 1)),
    ('eval("  7 * 6")', 42),
    ('list(map(eval, ["1 + 1", "2 * 3"]))', [2, 6]),
    ("eval(\"'ab' * 2 + 'c'\")", "ababc"),
    ('eval("not (1 < 2 <= 3)")', False),
]
REFUSED = [
    "eval(\"__import__('os').getpid()\")",  # a call and a name
    'eval("x + 1", {"x": 1})',  # a name, whatever the namespace given
    'eval("().__class__")',  # an attribute
    '(lambda e: e("len([1])"))(eval)',  # reached through another name
    "list(map(eval, [\"open('/etc/passwd').read()\"]))",  # through a builtin that calls it
    'eval("{**{1: 2}}")',  # unpacking
    'eval("[i for i in (1, 2)]")',  # a comprehension binds a name
    'eval("(1)[0]")',  # a subscript
    'eval(f"{1}")',  # not refused: the f-string is the program's, eval sees "1"
]


@pytest.mark.parametrize("expression,value", ALLOWED)
def test_an_expression_of_constants_and_operators_is_evaluated(pool, expression, value):  # noqa: F811
    r = pool.run(f"def f():\n    return {expression}\n", "f")
    assert r.ok and r.value == value, r


@pytest.mark.parametrize("expression", REFUSED[:-1])
def test_eval_of_anything_else_is_refused_at_run_time(pool, expression):  # noqa: F811
    r = pool.run(f"def f():\n    return {expression}\n", "f")
    assert r.status == "banned" and "beyond constants and operators" in r.error, r


def test_the_program_cannot_hand_eval_a_code_object_or_use_exec(pool):  # noqa: F811
    for source, word in (('eval(compile("1", "s", "eval"))', "compile"), ('exec("x = 1")', "exec")):
        r = pool.run(f"def f():\n    return {source}\n", "f")
        assert r.status == "banned" and word in r.error, r
    r = pool.run(f"def f():\n    return {REFUSED[-1]}\n", "f")
    assert r.ok and r.value == 1, r


def test_humaneval_160s_canonical_answer_passes_under_the_default_policy(pool):  # noqa: F811
    (problem,) = load_problems("humaneval", ids=["HumanEval/160"])
    assert "eval(" in problem.canonical_solution
    results = pool.run_batch(hidden_calls(problem, problem.canonical_solution))
    assert results and passes_hidden(problem, results), results[:2]


def test_every_canonical_answer_gives_the_same_results_under_the_policy_as_under_no_ban(pool, bare):  # noqa: F811
    """The first 3 hidden cases of every canonical answer (MBPP+ and HumanEval): the policy's
    bans (static, run-time, determinism's left out of a plain run) change no result."""
    jobs = []
    for name in ("mbpp", "humaneval"):
        for p in load_problems(name):
            cases = tuple(c for c in p.hidden if c.args is not None)[:3]
            if p.canonical_solution and cases:
                jobs += [(p, case, call) for case, call in zip(cases, hidden_calls(p, p.canonical_solution, cases))]
    assert len({p.problem_id for p, _, _ in jobs}) >= 399 + 164 - 2
    under = pool.run_batch([call for _, _, call in jobs])
    plain = bare.run_batch([call for _, _, call in jobs])
    differ = [
        (p.problem_id, a.status, a.error[:80], b.status)
        for (p, case, _), a, b in zip(jobs, under, plain)
        if a.status != b.status or (a.ok and not output_matches(p, case.args, a.value, b.value))
    ]
    assert not differ, f"{len(differ)} of {len(jobs)} calls differ: {differ[:5]}"
    assert sum(r.ok for r in under) >= 0.98 * len(jobs)  # the comparison is not between two failures
