"""Discovery: spend the samples where no sample has passed yet, and keep what was found.

At this model size a problem trains only once some sample of it passes its visible example
(a group with one passing answer has signal; a group where all fail trains nothing). Which
problems ever train is fixed by that first discovery, so the round's samples go where it
has not happened yet, and a found answer is not lost again:

- **The budget by signal** (`samples_per_problem`): a problem with a passing sample in an
  earlier round (`found`) gets `n` samples (the group size); one without gets
  `discovery_n` (e.g. 32): the inverse of selective sampling.
- **Down-sampling** (`downsample`): a group larger than `n` trains on the `n` samples of
  largest reward variance (the top half by reward and the bottom half: max-variance
  down-sampling, PODS, Xu et al. 2025), so the update costs what a group of `n` costs while
  the discovery is kept.
- **Replay** (`replay`): the newest passing completion of each problem (with the behaviour
  log-probs it was sampled with) is offered to the problem's later groups; it enters only
  a group where no fresh sample passes, and trains off-policy under the PPO clip (the
  ratio against its recorded log-probs), as ExGRPO and rollout-replay work do for sparse
  rewards.

- **Transfer** (`found_answers`, trained under `algorithm.sft_coef`): every found answer (this
  round's newest pass of a problem, else an earlier round's) trains beside the groups with a
  fixed positive advantage, a supervised term (rejection-sampling fine-tuning / expert
  iteration), so the greedy answer follows what sampling found.

Everything here is pure: the same inputs give the same budget and the same choices on any
machine, and the state (`found`) travels in the checkpoint.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from unified.types import Completion

PASS = 1.0  # a solve answer that returns every visible example's expected value


def samples_per_problem(problem_ids: Iterable[str], found: Iterable[str], n: int, discovery_n: int) -> dict[str, int]:
    """Problem id -> phase 1's samples this round: `n` where a passing sample was found in an
    earlier round, `max(n, discovery_n)` where none was (`discovery_n` 0: `n` everywhere)."""
    known = set(found)
    wide = max(n, discovery_n)
    return {pid: (n if pid in known else wide) for pid in problem_ids}


def downsample(rewards: Sequence[float], n: int) -> list[int]:
    """The indices (ascending) of the `n` samples a group of `len(rewards)` trains on: the
    `n // 2` highest rewards and the `n - n // 2` lowest (ties: the earlier sample first), the
    subset of largest reward variance for a binary reward. A group of at most `n`: all."""
    if len(rewards) <= n:
        return list(range(len(rewards)))
    order = sorted(range(len(rewards)), key=lambda i: (-rewards[i], i))
    high = set(order[: n // 2])
    low = [i for i in sorted(range(len(rewards)), key=lambda i: (rewards[i], i)) if i not in high]
    return sorted([*high, *low[: n - len(high)]])


def with_replay(rewards: Sequence[float], replay_reward: float | None) -> bool:
    """Whether a group (its fresh samples' rewards) takes its problem's replayed answer
    (reward `replay_reward`, None: no replay): only when it passes and no fresh sample does."""
    return replay_reward is not None and replay_reward >= PASS and not any(r >= PASS for r in rewards)


def first_passing(completions: Sequence[Completion], passing_ids: Iterable[str], problem_id: str) -> Completion | None:
    """The first of a problem's phase-1 completions whose program passed the visible
    examples (`passing_ids`: program ids `<problem>#p<i>`), or None."""
    passing = set(passing_ids)
    for i, completion in enumerate(completions):
        if f"{problem_id}#p{i}" in passing:
            return completion
    return None


def update_found(
    found: Mapping[str, Completion], completions: Mapping[str, Sequence[Completion]], passing_ids: Iterable[str]
) -> dict[str, Completion]:
    """`found` after a round: each problem with a passing completion this round keeps this
    round's (the newest: its log-probs are the closest to the policy); the others keep theirs."""
    passing = set(passing_ids)
    out = dict(found)
    for pid, group in completions.items():
        hit = first_passing(group, passing, pid)
        if hit is not None:
            out[pid] = hit
    return out


def found_answers(found: Mapping[str, Completion], problem_ids: Sequence[str]) -> list[Completion]:
    """The supervised term's answers: each problem's found completion (`found`), in the order of
    `problem_ids` (the round's problems on this rank; a found problem not among them is left out)."""
    return [found[pid] for pid in problem_ids if pid in found]
