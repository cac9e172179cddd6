"""A measured gain as a claim against noise: flips, McNemar's exact test, a paired bootstrap.
The ONE module where flips and p-values are computed: every claim (eval/experiments/) and its
record (`record.Record`) call these; none counts a flip or a p on its own.

Every input is per problem: 1 (greedy answer passes the hidden tests) or 0, for the control
(the untrained model: without updates greedy decoding cannot change) and for each training
seed. Pure functions over dicts `problem id -> 0/1`.

    flipped(control, after)        (gained ids, lost ids): problems the training turned 0->1 / 1->0
    flips(control, after)          (gained, lost): how many
    mcnemar_exact_p(gained, lost)  two-sided exact McNemar (binomial test on the discordant pairs)
    paired_bootstrap_ci(control, seeds)   95% interval of the mean-over-seeds gain, problems resampled
    noisy_problems(repeats)        problems whose control outcome differs between repeated evaluations
    versus(a, b)                   two trained arms against each other, paired by seed (the same problems)
    permutation_p(control, seeds)  paired sign-flip permutation test over problems of the mean-over-seeds gain
    problems_seeds_ci(control, seeds)   95% interval of the gain, problems and seeds both resampled
    holm(p_values)                 Holm's step-down adjustment for several comparisons

McNemar's test is per seed (each seed against the control): the seeds share one control, so
pooling their discordant pairs counts a problem once per seed and overstates the evidence.
`summary` still reports the pooled figure under its own name (`mcnemar_p_pooled`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np


def flipped(control: Mapping[str, float | None], after: Mapping[str, float | None]) -> tuple[list[str], list[str]]:
    """(gained, lost), sorted ids: the problems scored in both (None: not scored) that pass after
    and failed in the control, and the other way round (a pass: >= 0.5)."""
    ids = sorted(i for i in control if control[i] is not None and after.get(i) is not None)
    return [i for i in ids if after[i] >= 0.5 > control[i]], [i for i in ids if control[i] >= 0.5 > after[i]]


def flips(control: Mapping[str, float | None], after: Mapping[str, float | None]) -> tuple[int, int]:
    gained, lost = flipped(control, after)
    return len(gained), len(lost)


def mcnemar_exact_p(gained: int, lost: int) -> float:
    """Two-sided exact McNemar p: under H0 each discordant pair is a fair coin (scipy's binomtest)."""
    from scipy.stats import binomtest

    n = gained + lost
    return 1.0 if n == 0 else float(binomtest(gained, n, 0.5, alternative="two-sided").pvalue)


def gain(control: Mapping[str, float], after: Mapping[str, float]) -> float:
    ids = [i for i in control if i in after]
    return float(np.mean([after[i] - control[i] for i in ids])) if ids else 0.0


def paired_bootstrap_ci(
    control: Mapping[str, float],
    seeds: Sequence[Mapping[str, float]],
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile interval of the mean-over-seeds gain when the problems are resampled with
    replacement (each problem keeps its control and all its seeds' outcomes: paired)."""
    ids = [i for i in control if all(i in s for s in seeds)]
    if not ids or not seeds:
        return (0.0, 0.0)
    return _bootstrap([np.mean([s[i] - control[i] for s in seeds]) for i in ids], resamples, seed, level)


def _bootstrap(diffs: Sequence[float], resamples: int, seed: int, level: float) -> tuple[float, float]:
    """Percentile interval of the mean of per-problem differences, problems resampled with replacement."""
    diffs = np.asarray(diffs, dtype=float)
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, len(diffs), size=(resamples, len(diffs)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _differences(control: Mapping[str, float], seeds: Sequence[Mapping[str, float]], noisy: Sequence[str] = ()) -> np.ndarray:
    """(seeds, problems) of after - control over the problems every seed and the control scored."""
    ids = [i for i in control if i not in set(noisy) and control[i] is not None and all(s.get(i) is not None for s in seeds)]
    return np.array([[float(s[i]) - float(control[i]) for i in ids] for s in seeds], dtype=float).reshape(len(seeds), len(ids))


def permutation_p(
    control: Mapping[str, float],
    seeds: Sequence[Mapping[str, float]],
    noisy: Sequence[str] = (),
    resamples: int = 100_000,
    seed: int = 0,
) -> float:
    """Two-sided paired permutation p of the mean-over-seeds gain: under H0 (training changes
    nothing) each problem's difference (its seeds' mean minus the control) is as likely with
    either sign, so the signs are flipped at random (scipy's `permutation_test`, one sample)."""
    from scipy.stats import permutation_test

    d = _differences(control, seeds, noisy)
    if d.size == 0 or not d.any():
        return 1.0
    per_problem = d.mean(axis=0)
    test = permutation_test(
        (per_problem,), np.mean, permutation_type="samples", n_resamples=resamples, alternative="two-sided", random_state=seed
    )
    return float(test.pvalue)


def problems_seeds_ci(
    control: Mapping[str, float],
    seeds: Sequence[Mapping[str, float]],
    noisy: Sequence[str] = (),
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile interval of the mean gain when both the problems and the seeds are resampled
    with replacement (a hierarchical bootstrap: it carries the seed-to-seed spread as well)."""
    d = _differences(control, seeds, noisy)
    if d.size == 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, d.shape[0], size=(resamples, d.shape[0]))
    cols = rng.integers(0, d.shape[1], size=(resamples, d.shape[1]))
    means = np.array([d[r][:, c].mean() for r, c in zip(rows, cols)])
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error), in the input's order."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    out, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        out[i] = running
    return out


def versus(a: Mapping[int, Mapping[str, float]], b: Mapping[int, Mapping[str, float]], noisy: Sequence[str] = ()) -> dict:
    """Arm `a` against arm `b` (seed -> problem id -> 0/1), paired by seed: seed s of both arms
    trained from the same model with the same seed on the same problems, so each seed is a
    paired experiment. Per seed: the difference in pass@1, the problems only `a` solves and only
    `b` solves, and McNemar's exact p on them; over the seeds both arms have: the mean
    difference, its paired-bootstrap 95 % interval (problems resampled, every seed kept), and the
    pooled discordant counts. `noisy` problems (the control's own noise) are left out."""
    seeds = [s for s in a if s in b]
    drop = set(noisy)
    ids = (
        sorted(
            i
            for i in set().union(*(a[s] for s in seeds))
            if i not in drop and all(a[s].get(i) is not None and b[s].get(i) is not None for s in seeds)
        )
        if seeds
        else []
    )
    per_seed = {}
    for s in seeds:
        only_a, only_b = flips({i: b[s][i] for i in ids}, a[s])
        per_seed[s] = {
            "difference": gain({i: b[s][i] for i in ids}, a[s]),
            "only_a": only_a,
            "only_b": only_b,
            "mcnemar_p": mcnemar_exact_p(only_a, only_b),
        }
    only_a, only_b = sum(v["only_a"] for v in per_seed.values()), sum(v["only_b"] for v in per_seed.values())
    diffs = [np.mean([a[s][i] - b[s][i] for s in seeds]) for i in ids]
    return {
        "seeds": seeds,
        "problems": len(ids),
        "difference": float(np.mean(diffs)) if ids else 0.0,
        "difference_per_seed": [per_seed[s]["difference"] for s in seeds],
        "only_a": only_a,
        "only_b": only_b,
        "mcnemar_p_per_seed": [per_seed[s]["mcnemar_p"] for s in seeds],
        "mcnemar_p_pooled": mcnemar_exact_p(only_a, only_b),
        "ci95": list(_bootstrap(diffs, 10_000, 0, 0.95)) if ids else [0.0, 0.0],
        "per_seed": per_seed,
        "noisy_problems": sorted(drop),
    }


def noisy_problems(repeats: Sequence[Mapping[str, float]]) -> list[str]:
    """Problems whose outcome differs between repeated evaluations of the same (untrained)
    model: greedy decoding in bf16 depends on the batch, so such a problem's flip after
    training is noise, not a gain."""
    ids = sorted(set().union(*repeats)) if repeats else []
    return [i for i in ids if len({r.get(i) for r in repeats if r.get(i) is not None}) > 1]


def summary(control: Mapping[str, float], seeds: Mapping[int, Mapping[str, float]], noisy: Sequence[str] = ()) -> dict:
    """The keys the test-time result reports: per seed (`per_seed`: gain, flips, McNemar p
    against the control) and over seeds; `noisy` problems (`noisy_problems`) are left out of
    every figure and listed, and so is a problem some evaluation could not score (None: MBPP+
    v0.1's Mbpp/793 has no plus inputs), as `Record.aligned` and `_differences` leave it out."""
    drop = set(noisy)
    control = {
        i: v for i, v in control.items() if i not in drop and v is not None and all(a.get(i) is not None for a in seeds.values())
    }
    seeds = {s: {i: a[i] for i in control} for s, a in seeds.items()}
    per_seed = {}
    for s, after in seeds.items():
        g, lost = flips(control, after)
        per_seed[s] = {"gain": gain(control, after), "flips_gained": g, "flips_lost": lost, "mcnemar_p": mcnemar_exact_p(g, lost)}
    gained = sum(v["flips_gained"] for v in per_seed.values())
    lost = sum(v["flips_lost"] for v in per_seed.values())
    gains = [v["gain"] for v in per_seed.values()]
    return {
        "gain_per_seed": gains,
        "gain": float(np.mean(gains)) if gains else 0.0,
        "flips_gained": gained,
        "flips_lost": lost,
        "mcnemar_p": mcnemar_exact_p(gained, lost),  # pooled over seeds: see the module doc
        "mcnemar_p_pooled": mcnemar_exact_p(gained, lost),
        "mcnemar_p_per_seed": [v["mcnemar_p"] for v in per_seed.values()],
        "ci95": list(paired_bootstrap_ci(control, list(seeds.values()))),
        "per_seed": per_seed,
        "noisy_problems": sorted(noisy),
    }
