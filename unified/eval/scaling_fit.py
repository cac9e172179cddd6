"""The ScaleRL fit of pass@1 against cumulative compute, as RALO reports it.

    R(C) = R0 + (A - R0) / (1 + (C_mid / C) ** B)

R0: pass@1 before training (C -> 0), A: the asymptote, C_mid: the compute at which half of
the gain A - R0 is reached, B: the curve's steepness. Fitted with
`scipy.optimize.curve_fit` (bounded least squares); pass@1 is a rate, so R0 and A lie in
[0, 1]. Fewer than 4 points, or a flat curve (nothing to fit a sigmoid to), give
`fitted: false` and the reason instead of numbers.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Sequence

MIN_POINTS = 4


def scalerl_curve(c, r0: float, a: float, c_mid: float, b: float):
    import numpy as np

    c = np.maximum(np.asarray(c, dtype=float), 1e-12)
    return r0 + (a - r0) / (1.0 + (c_mid / c) ** b)


def fit_scalerl(compute: Sequence[float], pass_at_1: Sequence[float]) -> dict:
    """{"fitted": True, "r0", "a", "c_mid", "b", "loss"} or {"fitted": False, "reason"}.
    `compute`: cumulative compute at each evaluation (> 0 after the first), same length."""
    import numpy as np

    points = [(float(c), float(r)) for c, r in zip(compute, pass_at_1) if math.isfinite(c) and math.isfinite(r)]
    if len(points) < MIN_POINTS:
        return {"fitted": False, "reason": f"{len(points)} evaluation point(s); the fit needs at least {MIN_POINTS}"}
    c = np.array([p[0] for p in points])
    r = np.array([p[1] for p in points])
    if np.ptp(r) < 1e-9:
        return {"fitted": False, "reason": f"flat curve: pass@1 is {r[0]:.4f} at every point"}
    positive = c[c > 0]
    if positive.size < 2:
        return {"fitted": False, "reason": "fewer than 2 points with compute > 0"}
    from scipy.optimize import OptimizeWarning, curve_fit

    lo_c, hi_c = float(positive.min()) / 100, float(positive.max()) * 100
    p0 = [float(r[0]), float(r.max()), float(np.median(positive)), 1.0]
    bounds = ([0.0, 0.0, lo_c, 0.05], [1.0, 1.0, hi_c, 20.0])
    p0 = [min(max(v, lo), hi) for v, lo, hi in zip(p0, *bounds)]
    try:
        with warnings.catch_warnings():  # few points: no covariance, said in the result, not on stderr
            warnings.simplefilter("ignore", OptimizeWarning)
            params, cov = curve_fit(scalerl_curve, c, r, p0=p0, bounds=bounds, maxfev=20000)
    except (RuntimeError, ValueError) as exc:
        return {"fitted": False, "reason": f"curve_fit did not converge ({exc})"}
    loss = float(np.mean((scalerl_curve(c, *params) - r) ** 2))
    r0, a, c_mid, b = (float(x) for x in params)
    return {
        "fitted": True,
        **{"r0": r0, "a": a, "c_mid": c_mid, "b": b, "loss": loss, "n_points": len(points)},
        "covariance_estimated": bool(np.all(np.isfinite(cov))),  # False: as many points as parameters, or fewer
    }


def fit_metrics(benchmark: str, fit: dict) -> dict[str, float]:
    """TensorBoard/metrics.jsonl scalars `eval/<benchmark>/fit_*` (none when not fitted)."""
    if not fit.get("fitted"):
        return {}
    return {f"eval/{benchmark}/fit_{k}": fit[k] for k in ("r0", "a", "c_mid", "b", "loss")}


def write_fit_summary(path: Path, benchmark: str, compute: Sequence[float], pass_at_1: Sequence[float], totals: dict) -> dict:
    """Fit and write `eval_fit_summary.json` (points, fit or why not, compute totals)."""
    fit = fit_scalerl(compute, pass_at_1)
    summary = {
        "benchmark": benchmark,
        "formula": "R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)",
        "compute_unit": "device-seconds (GPU-seconds on CUDA, process CPU-seconds on CPU)",
        "points": [{"compute": float(c), "pass_at_1": float(r)} for c, r in zip(compute, pass_at_1)],
        **fit,
        "status": "fitted" if fit.get("fitted") else "not fitted",
        "compute_totals": totals,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=1) + "\n")
    return summary
