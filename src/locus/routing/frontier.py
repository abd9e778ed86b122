"""Accuracy against cost: the frontier a router's decision rules trace, and what it buys.

A decision rule swept over its settings (`sweep`: the cost weight from 0 to "only the cheapest",
the quality share from 1 to 0) gives (mean cost, accuracy) points on a set of queries; their
non-decreasing convex hull (`hull`) is what a user can reach with one router (mixing two
settings reaches every point between). `frontier_metrics` reads it against the most accurate
single LLM ("the strong LLM") and the cheapest: RouterBench's AIQ, the cost to reach 100% and
95% of the strong LLM's accuracy, RouteLLM's APGR and CPT. Both `locus evaluate` and the cost
suite (`locus.benchmark.cost`) read frontiers here.

    >>> import numpy as np
    >>> hull(np.array([[1.0, 0.5], [2.0, 0.6], [3.0, 0.9], [4.0, 0.8]])).tolist()
    [[1.0, 0.5], [3.0, 0.9]]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from locus.errors import LocusInputError
from locus.routing.decision import RouteRequest, choose

__all__ = [
    "RULES",
    "describe_frontier",
    "frontier_metrics",
    "frontier_of",
    "hull",
    "hull_accuracy_at",
    "plot_frontiers",
    "sweep",
    "sweep_settings",
]

RULES = ("cost-weight", "quality")


def hull(points: np.ndarray) -> np.ndarray:
    """The non-decreasing upper convex hull of (cost, accuracy) points, sorted by cost: no point
    on it is beaten by a cheaper one, and mixing two routers reaches every point on it."""
    order = np.lexsort((-points[:, 1], points[:, 0]))
    kept: list[np.ndarray] = []
    for point in points[order]:
        if kept and point[1] <= kept[-1][1]:
            continue  # costs more, not more accurate
        while len(kept) >= 2:
            (x1, y1), (x2, y2) = kept[-2], kept[-1]
            # drop the middle point if it lies on or under the chord to the new point
            if (y2 - y1) * (point[0] - x1) <= (point[1] - y1) * (x2 - x1):
                kept.pop()
            else:
                break
        kept.append(point)
    return np.array(kept)


def hull_accuracy_at(curve: np.ndarray, cost: float) -> float:
    """Accuracy of the hull at `cost` (NaN below its cheapest point, flat after its last)."""
    if cost < curve[0, 0] * (1 - 1e-9):  # equal costs summed in another order still count
        return float("nan")
    return float(np.interp(cost, curve[:, 0], curve[:, 1]))


def _area(curve: np.ndarray, low: float, high: float) -> float:
    """Mean hull accuracy over [low, high] (0 where the hull has no point yet)."""
    grid = np.linspace(low, high, 1024)
    values = np.where(grid < curve[0, 0], 0.0, np.interp(grid, curve[:, 0], curve[:, 1]))
    if high <= low:
        return float(values[0])
    area = np.sum((values[1:] + values[:-1]) / 2 * np.diff(grid))  # trapezoid rule
    return float(area / (high - low))


def _cost_to_reach(curve: np.ndarray, accuracy: float) -> float:
    """Cheapest cost at which the hull reaches `accuracy` (NaN if it never does)."""
    above = np.flatnonzero(curve[:, 1] >= accuracy - 1e-12)
    if len(above) == 0:
        return float("nan")
    i = int(above[0])
    if i == 0:
        return float(curve[0, 0])
    (x1, y1), (x2, y2) = curve[i - 1], curve[i]
    return float(x1 + (accuracy - y1) * (x2 - x1) / (y2 - y1))


def sweep_settings(rule: str, predicted: np.ndarray) -> np.ndarray:
    """The settings `sweep` tries: cost weights relative to the spread of the predicted costs
    (0, then 1e-3 ... 1e4 per spread), or quality shares from 1 down to 0."""
    if rule == "cost-weight":
        spread = float(np.ptp(predicted)) or 1.0
        return np.concatenate([[0.0], np.geomspace(1e-3, 1e4, 141) / spread])
    if rule == "quality":
        return np.linspace(1.0, 0.0, 101)
    raise LocusInputError(f"unknown decision rule {rule!r}; expected one of {', '.join(RULES)}")


def sweep(
    rule: str, proba: np.ndarray, predicted: np.ndarray, truth: np.ndarray, real: np.ndarray
) -> np.ndarray:
    """(mean real cost, accuracy) of `rule` ("cost-weight" or "quality") at each setting from
    the most accurate routing to the cheapest; every array (n_queries, n_llms), no gaps."""
    rows = np.arange(len(proba))
    points = []
    for setting in sweep_settings(rule, predicted):
        request = (
            RouteRequest(cost_weight=float(setting))
            if rule == "cost-weight"
            else RouteRequest(quality=float(setting))
        )
        chosen = choose(proba, predicted, request)
        points.append((float(real[rows, chosen].mean()), float(truth[rows, chosen].mean())))
    return np.array(points)


def frontier_metrics(
    curve: np.ndarray, strong: tuple[float, float], weak: tuple[float, float], high: float
) -> dict[str, float]:
    """What a frontier (a hull, sorted by cost) buys against the strong LLM (cost, accuracy),
    the cheapest single LLM `weak` (cost, accuracy), over the cost range [weak cost, `high`]."""
    (strong_cost, strong_accuracy), (weak_cost, weak_accuracy) = strong, weak
    clipped = np.clip(curve, [weak_cost, 0.0], [high, 1.0])
    gap = strong_accuracy - weak_accuracy
    out = {
        "aiq": _area(clipped, weak_cost, high),
        "max_accuracy": float(curve[:, 1].max()),
        "cost_share_at_100": _cost_to_reach(curve, strong_accuracy) / strong_cost,
        "cost_share_at_95": _cost_to_reach(curve, 0.95 * strong_accuracy) / strong_cost,
        "accuracy_at_cheapest_cost": hull_accuracy_at(curve, weak_cost),
    }
    if gap > 0:
        grid = np.linspace(weak_cost, strong_cost, 1024)
        reached = np.where(grid < curve[0, 0], weak_accuracy, np.interp(grid, *curve.T))
        out["apgr"] = float(np.mean((reached - weak_accuracy) / gap))
        for share in (0.5, 0.8):
            cost = _cost_to_reach(curve, weak_accuracy + share * gap)
            out[f"cpt{round(share * 100)}"] = cost / strong_cost
    return out


def _share(value: float) -> str:
    return "never" if math.isnan(value) else f"{100 * value:.0f}%"


def _reach(level: int, figures: Mapping[str, float]) -> str:
    share = figures[f"cost_share_at_{level}"]
    return f"never {level}%" if math.isnan(share) else f"{level}% at {100 * share:.0f}%"


def plot_frontiers(
    singles: Mapping[str, tuple[float, float]],
    frontiers: Mapping[str, tuple[np.ndarray, Mapping[str, float]]],
    path: Path,
    *,
    title: str,
    note: str = "",
) -> Path:
    """A PNG of accuracy against mean cost per query (log scale): each frontier (a hull, and
    its `frontier_metrics` for the legend; the first drawn boldest), every single LLM as a
    labelled point, the best static mix of single LLMs, the strong LLM's accuracy and 95% of
    it as dotted lines. Labels stay inside the picture (`bbox_inches="tight"`).

    Raises:
        LocusInputError: matplotlib is not installed.
    """
    from locus._plotting import pyplot
    from locus.palette import method_colour

    plt = pyplot()
    points = np.array(list(singles.values()), dtype=np.float64)  # (n_llms, 2)
    strong = points[int(np.argmax(points[:, 1]))]
    weak = points[int(np.argmin(points[:, 0]))]
    static = hull(points)
    figure, axis = plt.subplots(figsize=(10, 6.2))
    for i, (name, (curve, figures)) in enumerate(frontiers.items()):
        first = i == 0
        axis.plot(
            curve[:, 0], curve[:, 1], marker="." if first else None, color=method_colour(name),
            linewidth=2.6 if first else 1.2, zorder=5 if first else 3,
            label=f"{name}: AIQ {figures['aiq']:.3f}, {_reach(100, figures)}, "
            f"{_reach(95, figures)}",
        )  # fmt: skip
    mix = frontier_metrics(static, tuple(strong), tuple(weak), float(points[:, 0].max()))
    axis.plot(static[:, 0], static[:, 1], color=method_colour("static mix"), linestyle="--",
              zorder=2,
              label=f"best static mix of single LLMs: AIQ {mix['aiq']:.3f}, 100% at 100%, "
              f"95% at {_share(mix['cost_share_at_95'])}")  # fmt: skip
    axis.scatter(points[:, 0], points[:, 1], color="black", s=18, zorder=6, label="single LLMs")
    ordered = sorted(singles.items(), key=lambda item: item[1][1])
    for rank, (name, (cost, accuracy)) in enumerate(ordered):
        axis.annotate(name.split("/")[-1][:22], (cost, accuracy), fontsize=7, zorder=7,
                      xytext=(4, -9 if rank % 2 else 3), textcoords="offset points")  # fmt: skip
    for level in (strong[1], 0.95 * strong[1]):
        axis.axhline(level, color="black", linewidth=0.6, linestyle=":")
    axis.set_xscale("log")
    axis.set_xlabel("mean cost per query (USD, log scale)")
    axis.set_ylabel("accuracy")
    axis.grid(alpha=0.3, which="both")
    axis.set_title(title)
    # the legend and the definitions under the axes, where they cover no point or label
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.1), ncol=2,
                title="AIQ: mean accuracy of a frontier over the single LLMs' cost range. 100% "
                "/ 95% at x%: the cost, as a share of the most accurate LLM's, at which it "
                "reaches that LLM's accuracy (dotted lines) or 95% of it." +
                (f"\n{note}" if note else ""), title_fontsize=7)  # fmt: skip
    axis.get_legend()._legend_box.align = "left"  # the definitions read as a paragraph
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path


def frontier_of(
    proba: np.ndarray, predicted: np.ndarray, truth: np.ndarray, real: np.ndarray
) -> np.ndarray:
    """The hull of both rules' sweeps (`sweep`) on these queries: a router's frontier."""
    return hull(np.concatenate([sweep(rule, proba, predicted, truth, real) for rule in RULES]))


def describe_frontier(figures: Mapping[str, Any]) -> str:
    """One line: what a frontier's `frontier_metrics` say about money."""
    return (
        f"reaches the most accurate LLM at {_share(figures['cost_share_at_100'])} of its cost, "
        f"95% of it at {_share(figures['cost_share_at_95'])}"
    )
