"""Guarded routing: stay with a default LLM unless the predicted gain clears a margin.

A router's P(correct) moves queries away from the best single LLM on small differences that are
mostly noise: on MMLU-Pro the unguarded LOCUS router sent most test queries to one LLM and lost
to it on the rest. A `Guard` names a default LLM (the best on average on training queries) and a
margin: a query leaves the default only for an LLM whose predicted P(correct) (or utility, with
costs) is higher by more than the margin. `fit_guard` chooses the margin on validation queries:
among the margins whose routing beats always asking the default by at least `z` standard errors
of the paired per-query difference, the smallest whose gain is within one standard error of the
best; where none clears, the margin is infinite and the router always answers with the
default.

On sparse evidence (a production log: each query answered by one LLM, `locus.offpolicy`), every
router ties on the scored LLMs, so the gains are inverse-propensity estimates over all LLMs
(`paired_ips`), and where they cannot tell routing from the default either way, the guard
stands down (margin 0: P(correct) routes), saying so in its `validation`: a guard that kept the
default there would freeze routing on it on no evidence.

    >>> import numpy as np
    >>> from locus.routing.decision import RouteRequest, choose
    >>> proba = np.array([[0.9, 0.2], [0.5, 0.6], [0.4, 0.9]])
    >>> choose(proba, None, RouteRequest(), guard=(0, 0.2)).tolist()
    [0, 0, 1]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.metrics import best_single_accuracy
from locus.offpolicy import overlap_of, paired_ips
from locus.routing.decision import RouteRequest, choose

__all__ = [
    "BEYOND_NOISE_Z",
    "Guard",
    "fit_default_guard",
    "fit_guard",
    "paired_gain",
    "rechosen_default",
]


@dataclass(frozen=True)
class Guard:
    """Where a router stays unless the evidence is strong.

    Attributes:
        default: the LLM every query goes to unless another clears the margin.
        margin: P(correct) (utility, with costs) another LLM must beat the default's by;
            `math.inf`: always the default.
        validation: what the choice was made on (hit@1 guarded, unguarded and of the default
            alone, the share of queries moved, the queries, z).
    """

    default: str
    margin: float
    validation: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.margin >= 0:
            raise LocusInputError(f"a guard's margin must be >= 0, found {self.margin}")

    @property
    def always_default(self) -> bool:
        return math.isinf(self.margin)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready; an infinite margin is written as null."""
        return {
            "default": self.default,
            "margin": None if self.always_default else float(self.margin),
            "validation": dict(self.validation),
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> Guard:
        margin = value.get("margin")
        return cls(
            default=str(value["default"]),
            margin=math.inf if margin is None else float(margin),
            validation=dict(value.get("validation") or {}),
        )


def _paired_gain(
    proba: NDArray[np.float64], truth: NDArray[np.float64], default_column: int, margin: float
) -> tuple[float, float, float]:
    """(mean gain of guarded routing over the default, its standard error, share moved) on
    the queries where the default was evaluated."""
    evaluated = ~np.isnan(truth)
    guard = (default_column, margin)
    choice = choose(proba, None, RouteRequest(), allowed=evaluated, guard=guard)
    rows = np.arange(len(truth))
    diff = truth[rows, choice] - truth[:, default_column]
    if len(diff) < 2:
        return 0.0, math.inf, 0.0
    return (
        float(diff.mean()),
        float(diff.std(ddof=1) / math.sqrt(len(diff))),
        float(np.mean(choice != default_column)),
    )


def _offpolicy_gain(
    proba: NDArray[np.float64], truth: NDArray[np.float64], default_column: int, margin: float
) -> tuple[float, float, float]:
    """`_paired_gain` on sparse evidence: the inverse-propensity estimate over every query,
    the router free to choose any LLM."""
    choice = choose(proba, None, RouteRequest(), guard=(default_column, margin))
    found = paired_ips(choice, np.full(len(truth), default_column), truth)
    return found.value, found.se, float(np.mean(choice != default_column))


def fit_guard(
    proba: NDArray[np.floating[Any]],
    truth: NDArray[np.floating[Any]],
    llm_ids: list[str] | tuple[str, ...],
    default_column: int,
    *,
    z: float = 1.0,
    candidates: int = 40,
) -> Guard:
    """The guard's margin, chosen on validation queries.

    Args:
        proba: (n_queries, n_llms) a router's P(correct) (or utility) on validation queries.
        truth: (n_queries, n_llms) their true scores (NaN: not evaluated).
        llm_ids: the columns' LLMs.
        default_column: the default LLM's column (the best on average on training queries).
        z: standard errors by which routing must beat the default on validation to be used.
        candidates: margins tried, at quantiles of the predicted gains over the default.

    Raises:
        LocusInputError: shapes that disagree, or no validation query the default was scored on.
    """
    p = np.asarray(proba, dtype=np.float64)
    t = np.asarray(truth, dtype=np.float64)
    if p.shape != t.shape or p.ndim != 2 or p.shape[1] != len(llm_ids):
        raise LocusInputError(
            f"fit_guard: proba {p.shape} and truth {t.shape} must both be (n_queries, "
            f"{len(llm_ids)})"
        )
    if not 0 <= default_column < len(llm_ids):
        raise LocusInputError(f"fit_guard: no column {default_column} among {len(llm_ids)}")
    scored = ~np.isnan(t[:, default_column])
    if not scored.any():
        raise LocusInputError("fit_guard: the default LLM has no validation score")
    sparse = overlap_of(t).sparse
    gain_of = _offpolicy_gain if sparse else _paired_gain
    if sparse:
        default_hit = float(np.nanmean(t[:, default_column]))
    else:
        p, t = p[scored], t[scored]
        default_hit = float(t[:, default_column].mean())
    gains = p.max(axis=1) - p[:, default_column]
    positive = gains[gains > 0]
    margins = [0.0]
    if len(positive):
        margins += sorted(set(np.quantile(positive, np.linspace(0, 1, candidates)).tolist()))
    curve = [(margin, *gain_of(p, t, default_column, margin)[:2]) for margin in margins]
    clears = [(margin, gain, se) for margin, gain, se in curve if gain - z * se > 0]
    best_margin, best_gain = math.inf, 0.0
    if clears:
        # the smallest margin whose gain is within a standard error of the best one: a margin
        # tuned to the last query of a small validation set would hold back real specialists
        _, top_gain, top_se = max(clears, key=lambda row: row[1])
        best_margin, best_gain = next(
            (margin, gain) for margin, gain, _ in clears if gain >= top_gain - top_se
        )
    unguarded, unguarded_se, moved_unguarded = gain_of(p, t, default_column, 0.0)
    stood_down = sparse and not clears and not unguarded + z * unguarded_se < 0
    if stood_down:
        best_margin, best_gain = 0.0, unguarded
    _, _, moved = (
        gain_of(p, t, default_column, best_margin)
        if math.isfinite(best_margin)
        else (0.0, 0.0, 0.0)
    )
    validation: dict[str, Any] = {
        "queries": len(t),
        "z": z,
        "default_hit@1": default_hit,
        "hit@1": default_hit + best_gain,
        "unguarded_hit@1": default_hit + unguarded,
        "moved": moved,
        "unguarded_moved": moved_unguarded,
    }
    if sparse:
        # the gains are inverse-propensity estimates (`locus.offpolicy`)
        validation.update(estimate="ips", unguarded_gain_se=unguarded_se, stood_down=stood_down)
    return Guard(default=str(llm_ids[default_column]), margin=best_margin, validation=validation)


# standard errors an onboarded LLM's paired gain over the default must clear
# (`rechosen_default`; `locus onboard` reports against the same rule)
BEYOND_NOISE_Z = 2.0


def paired_gain(
    new_scores: NDArray[np.floating[Any]], old_scores: NDArray[np.floating[Any]]
) -> tuple[float, float, int]:
    """(mean of `new_scores` - `old_scores` over the queries both scored, its standard error,
    those queries); (0, inf, n) with fewer than two.

    >>> paired_gain(np.array([1.0, 1.0, 0.0, np.nan]), np.array([0.0, 1.0, 0.0, 1.0]))[::2]
    (0.3333333333333333, 3)
    """
    new = np.asarray(new_scores, np.float64)
    old = np.asarray(old_scores, np.float64)
    diff = (new - old)[~np.isnan(new) & ~np.isnan(old)]
    if len(diff) < 2:
        return 0.0, math.inf, len(diff)
    return float(diff.mean()), float(diff.std(ddof=1) / math.sqrt(len(diff))), len(diff)


def rechosen_default(
    guard: Guard,
    llm_id: str,
    new_scores: NDArray[np.floating[Any]],
    default_scores: NDArray[np.floating[Any]],
    *,
    z: float = BEYOND_NOISE_Z,
    min_pairs: int = 16,
) -> Guard:
    """`guard` with `llm_id` (an LLM onboarded since the fit) as its default where its scores
    beat the default's on the same queries beyond noise: `new_scores` and `default_scores`
    (n,) on one list of queries (NaN: not scored), at least `min_pairs` scored by both, and a
    mean paired gain over `z` standard errors. Otherwise `guard` as it is."""
    gain, se, pairs = paired_gain(new_scores, default_scores)
    if pairs < max(min_pairs, 2) or llm_id == guard.default or not gain > z * se:
        return guard
    validation = {
        **guard.validation,
        "rechosen_from": guard.default,
        "paired_queries": pairs,
        "paired_gain": gain,
        "paired_gain_se": se,
    }
    return Guard(default=llm_id, margin=guard.margin, validation=validation)


def fit_default_guard(
    val_proba: NDArray[np.floating[Any]],
    train_scores: NDArray[np.floating[Any]],
    val_scores: NDArray[np.floating[Any]],
    llm_ids: list[str] | tuple[str, ...],
) -> Guard | None:
    """The guard `locus fit` keeps: the default the best LLM on the training scores, the
    margin chosen by `fit_guard` on the router's validation P(correct) `val_proba`; None
    with fewer than two validation queries or none the default was scored on."""
    truth = np.asarray(val_scores, dtype=np.float64)
    if len(truth) < 2:
        return None
    default, _ = best_single_accuracy(np.asarray(train_scores, dtype=np.float64), truth)
    if np.isnan(truth[:, default]).all():
        return None
    return fit_guard(val_proba, truth, list(llm_ids), default)
