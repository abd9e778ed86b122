"""LOCUS and a kNN router combined: the `Stack` of their logits that `locus fit` keeps.

LOCUS and a kNN vote over the same query vectors err differently: LOCUS reads each LLM through
its embedding, kNN reads the LLM's own scores on the nearest training queries. A mixture of
their probabilities (`mix`, its weight by `choose_weight`: the lowest validation log-loss, a
signal far steadier than validation routing accuracy) is well calibrated, but it lets LOCUS,
whose networks explain query difficulty and LLM quality and little of which LLM suits which
query, decide the routing too. The `Stack` keeps the mixture for how likely a query is answered
and fits, apart, how much each part's ranking of the LLMs on the query counts (`fit_stack`).
The router that applies it is `locus.routing.stacked.StackedRouter`.

    >>> import numpy as np
    >>> truth = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> sharp, flat = np.array([[0.9, 0.1], [0.2, 0.8]]), np.full((2, 2), 0.5)
    >>> choose_weight(sharp, flat, truth)
    1.0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.artifact.formats import upgrade_stack
from locus.calibration import fit_logistic, logit, sigmoid
from locus.errors import LocusInputError
from locus.metrics import log_loss, logit_log_loss

__all__ = [
    "LEVELS",
    "STACK_KS",
    "Stack",
    "base_rate_shift",
    "choose_level",
    "choose_weight",
    "fit_stack",
    "knn_logits",
    "mix",
    "smoothed_vote",
]


def mix(first: NDArray[Any], second: NDArray[Any], weight: float) -> NDArray[np.float64]:
    """weight x first + (1 - weight) x second, elementwise."""
    return weight * np.asarray(first, np.float64) + (1.0 - weight) * np.asarray(second, np.float64)


def choose_weight(
    first: NDArray[Any], second: NDArray[Any], truth: NDArray[Any], *, steps: int = 10
) -> float:
    """The weight of `first` in {0, 1/steps, ..., 1} with the lowest log-loss of the mix on
    `truth`'s scored cells (ties: the larger weight).

    Raises:
        LocusInputError: shapes that differ, or no scored cell.
    """
    a, b, y = np.asarray(first), np.asarray(second), np.asarray(truth, dtype=np.float64)
    if not a.shape == b.shape == y.shape:
        raise LocusInputError(f"choose_weight: shapes {a.shape}, {b.shape}, {y.shape} differ")
    if not (~np.isnan(y)).any():
        raise LocusInputError("choose_weight: no scored cell to choose a weight on")
    losses = {w: log_loss(mix(a, b, w), y) for w in np.linspace(1.0, 0.0, steps + 1)}
    return float(min(losses, key=lambda w: (losses[w], -w)))


# what a stack's level reads beside LOCUS (`Stack.level`)
LEVELS = ("knn", "tasks")

# the kNN router's neighbourhood sizes whose votes decide which LLM suits a query: a local vote
# and a regional one (about a task's worth of queries); capped per LLM at its training evidence
STACK_KS = (50, 500)


def smoothed_vote(proba: NDArray[Any], k: int) -> NDArray[np.float64]:
    """kNN means over `k` neighbours smoothed by one pseudo-success and one pseudo-failure,
    (k p + 1) / (k + 2): an unanimous vote of a few neighbours is not a certainty."""
    return (k * np.asarray(proba, np.float64) + 1.0) / (k + 2.0)


def knn_logits(proba: NDArray[Any], k: int) -> NDArray[np.float64]:
    """Logits of kNN means over `k` neighbours, smoothed (`smoothed_vote`) so that an
    unanimous vote stays finite: logit((k p + 1) / (k + 2))."""
    smoothed = smoothed_vote(proba, k)
    return np.log(smoothed) - np.log1p(-smoothed)


def choose_level(vote: NDArray[Any], k: int, task_votes: NDArray[Any], truth: NDArray[Any]) -> str:
    """The level's kind (`Stack.level`) a small pool's stack reads (`locus.routing.cross_fit`):
    "tasks" where the task votes read `truth`'s cells with a lower log-loss than the kNN `vote`
    at `k` (smoothed), else "knn"; the votes out of fold. A large pool's level stays "knn": on
    its validation votes this rule chose the task vote on BFCL (test AUROC +0.0070) and on
    ZeroEval too (-0.0025; docs/decisions.md, "The ablation table")."""
    tasks = logit_log_loss(logit(task_votes), truth)
    return "tasks" if tasks < logit_log_loss(knn_logits(vote, k), truth) else "knn"


def _deviations(
    parts: Sequence[NDArray[np.float64]], reference: NDArray[np.bool_] | None = None
) -> NDArray[np.float64]:
    """(n_queries, n_llms, n_parts): each part's logits less their mean over the LLMs (over
    the `reference` columns only, where given)."""
    if reference is None:
        return np.stack([part - part.mean(axis=1, keepdims=True) for part in parts], axis=-1)
    return np.stack(
        [part - part[:, reference].mean(axis=1, keepdims=True) for part in parts], axis=-1
    )


@dataclass(frozen=True)
class Stack:
    """LOCUS and a kNN router combined: the mixture says how likely a query is answered, the
    stacked deviations say by which LLM.

    logit P(correct) of LLM j on query q = level(q) + sum over parts p of w_p x dev_p(q, j):
    level(q) is the mean over the LLMs of logit(m x P_LOCUS + (1 - m) x P_kNN at `mix_k`), the
    probability mixture of earlier versions, the kNN vote smoothed as the parts' are
    (`smoothed_vote`: a small pool's level read 0/5 neighbours as a certainty, its mean over
    four LLMs 3.4 logits off; with `level` "tasks", the task vote in the kNN
    vote's place: a small pool's per-task rates read its queries' level far better than a vote
    of a few neighbours, `locus.routing.cross_fit`); the parts are LOCUS's calibrated logit
    and the kNN router's smoothed logits at each k of `ks`, and dev_p a part's distance from
    its own mean over the LLMs on the query; where the training queries carry tasks
    (`tasks`), one more part: the logit of the task vote (`locus.routing.task_vote`). The
    mixture alone gives one weight to both jobs, so the better-calibrated part (LOCUS) also
    decides which LLM a query goes to, though its networks
    explain little beyond each LLM's quality; fitted apart, the kNN votes' deviations carry the
    routing while the level keeps the mixture's calibration (benchmarks/README, "The stack").

    Attributes:
        ks: the kNN neighbourhood sizes of the deviation parts.
        deviation_weights: w_p, LOCUS's first, then one per k of `ks`, then the task vote's.
        mix_weight: m, LOCUS's share in the level's mixture.
        mix_k: the kNN neighbourhood size of the level's mixture.
        shift: added to every logit so that the mean P(correct) over the training and
            validation cells is their mean score (`base_rate_shift`).
        tasks: whether the task vote is a part.
        level: what the level's mixture reads beside LOCUS: "knn" (the kNN vote at `mix_k`)
            or "tasks" (the task vote; a stack with `tasks` only).
        smoothed: whether the level's kNN vote is smoothed as the parts' are
            (`smoothed_vote`); stacks saved before locus-stacked/6 read it raw (False).
    """

    ks: tuple[int, ...]
    deviation_weights: tuple[float, ...]
    mix_weight: float
    mix_k: int
    shift: float = 0.0
    tasks: bool = False
    level: str = "knn"
    smoothed: bool = True

    def __post_init__(self) -> None:
        parts = 1 + len(self.ks) + int(self.tasks)
        if len(self.deviation_weights) != parts:
            raise LocusInputError(
                f"a stack over LOCUS, {len(self.ks)} kNN parts"
                f"{' and the task vote' if self.tasks else ''} needs {parts} deviation weights, "
                f"found {len(self.deviation_weights)}"
            )
        if not 0.0 <= self.mix_weight <= 1.0:
            raise LocusInputError(f"a mixture weight must lie in [0, 1], found {self.mix_weight}")
        if self.level not in LEVELS or (self.level == "tasks" and not self.tasks):
            raise LocusInputError(
                f"a stack's level reads one of {', '.join(LEVELS)} (the task vote only in a "
                f"stack with a task part), found {self.level!r}"
            )

    @property
    def needed_ks(self) -> tuple[int, ...]:
        """Every kNN neighbourhood size `logits` reads, ascending."""
        return tuple(sorted({*self.ks, self.mix_k}))

    def logits(
        self,
        locus_logits: NDArray[Any],
        votes: Mapping[int, NDArray[Any]],
        task_votes: NDArray[Any] | None = None,
        reference: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.float64]:
        """Combined logits (n_queries, n_llms) from LOCUS's calibrated logits, the kNN
        router's P(correct) at each k of `needed_ks` (`votes[k]`) and, for a stack with
        `tasks`, its task votes, all over the same LLMs. `reference` (n_llms,): the columns
        the level and the deviations' means are taken over (default all): the LLMs of the fit,
        so that an LLM joined since moves no other LLM's P(correct).

        Raises:
            LocusInputError: a stack with `tasks` given no task votes.
        """
        locus = np.asarray(locus_logits, np.float64)
        parts = self._parts(locus, votes, task_votes)
        # a stack with `tasks` given no task votes raised in `_parts`
        if self.level == "knn" or task_votes is None:
            beside = votes[self.mix_k]
            if self.smoothed:
                beside = smoothed_vote(beside, self.mix_k)
        else:
            beside = task_votes
        mixture = logit(mix(sigmoid(locus), beside, self.mix_weight))
        columns = slice(None) if reference is None else reference
        level = mixture[:, columns].mean(axis=1, keepdims=True)
        deviations = _deviations(parts, reference)
        return level + deviations @ np.asarray(self.deviation_weights) + self.shift

    def _parts(
        self,
        locus: NDArray[np.float64],
        votes: Mapping[int, NDArray[Any]],
        task_votes: NDArray[Any] | None,
    ) -> list[NDArray[np.float64]]:
        parts = [locus, *(knn_logits(votes[k], k) for k in self.ks)]
        if self.tasks:
            if task_votes is None:
                raise LocusInputError("this stack has a task-vote part: pass the task votes")
            parts.append(logit(task_votes))
        return parts

    def part_names(self) -> list[str]:
        """The parts' names: locus, then knn<k> for each k of `ks`, then tasks."""
        return ["locus", *(f"knn{k}" for k in self.ks), *(["tasks"] if self.tasks else [])]

    def describe(self) -> str:
        """One line: the mixture behind the level, then each part's deviation weight."""
        pairs = zip(self.part_names(), self.deviation_weights, strict=True)
        listed = ", ".join(f"{name} {weight:.2f}" for name, weight in pairs)
        beside = "the task vote" if self.level == "tasks" else f"kNN{self.mix_k}"
        return f"level from LOCUS {self.mix_weight:.1f} + {beside}; which LLM: {listed}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "ks": list(self.ks),
            "deviation_weights": list(self.deviation_weights),
            "mix_weight": self.mix_weight,
            "mix_k": self.mix_k,
            "shift": self.shift,
            "tasks": self.tasks,
            "level": self.level,
            "smoothed": self.smoothed,
        }

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Stack:
        """Inverse of `as_dict`; a stack saved by an older version lacks fields added since,
        given their values by `locus.artifact.formats.upgrade_stack`."""
        value = upgrade_stack(value)
        return cls(
            ks=tuple(int(k) for k in value["ks"]),
            deviation_weights=tuple(float(w) for w in value["deviation_weights"]),
            mix_weight=float(value["mix_weight"]),
            mix_k=int(value["mix_k"]),
            shift=float(value["shift"]),
            tasks=bool(value["tasks"]),
            level=str(value["level"]),
            smoothed=bool(value["smoothed"]),
        )


def fit_stack(
    locus_logits: NDArray[Any],
    votes: Mapping[int, NDArray[Any]],
    truth: NDArray[Any],
    *,
    ks: Sequence[int] = STACK_KS,
    mix_k: int,
    task_votes: NDArray[Any] | None = None,
    penalty: float = 1e-4,
    use_locus: bool = True,
    level: str = "knn",
    toward: int | None = None,
) -> Stack:
    """The `Stack` fitted on `truth`'s scored cells (graded scores are soft targets): the
    mixture's weight by `choose_weight`, then the deviation weights by log-loss with the level
    held, pulled towards LOCUS's deviations alone (1, 0, ...) by `penalty` x their squared
    distance. `votes[k]`: the kNN router's P(correct) at every k of `ks` and `mix_k`;
    `task_votes` (same shape): the task vote, a part of its own where given. Without
    `use_locus`, LOCUS has no part: the level is the kNN vote's and LOCUS's deviation weight
    stays 0 (the other weights are pulled towards the part `toward` alone: its index among
    LOCUS, the kNN votes of `ks` and the task vote; by default the task vote where there is
    one, else the regional kNN vote). `level`: as `Stack.level` (where the level reads the
    task vote, LOCUS's share of it is chosen beside the task vote).

    Raises:
        LocusInputError: shapes that differ, a k without votes, or no scored cell.
    """
    y = np.asarray(truth, dtype=np.float64)
    missing = sorted({*ks, mix_k} - set(votes))
    if missing:
        raise LocusInputError(f"fit_stack: no kNN votes for k = {missing[0]}")
    shapes = {np.shape(locus_logits), y.shape, *(np.shape(votes[k]) for k in (*ks, mix_k))}
    if task_votes is not None:
        shapes.add(np.shape(task_votes))
    if len(shapes) != 1:
        raise LocusInputError(
            f"fit_stack: LOCUS logits {np.shape(locus_logits)}, truth {y.shape} and the kNN "
            "votes must all have one shape"
        )
    scored = ~np.isnan(y)
    if not scored.any():
        raise LocusInputError("fit_stack: no scored cell to fit the stack on")
    locus = np.asarray(locus_logits, np.float64)
    tasks = task_votes is not None
    if use_locus:
        beside = (
            task_votes
            if level == "tasks" and task_votes is not None
            else smoothed_vote(votes[mix_k], mix_k)
        )
        weight = choose_weight(sigmoid(locus), beside, y)
        first = (1.0, *(0.0,) * (len(ks) + int(tasks)))
    else:
        parts = 1 + len(ks) + int(tasks)
        pulled = parts - 1 if toward is None else int(toward)  # the task vote, else the last
        if not 0 < pulled < parts:
            raise LocusInputError(f"fit_stack: no evidence part {pulled} to pull towards")
        weight, first = 0.0, tuple(float(i == pulled) for i in range(parts))
    start = Stack(tuple(int(k) for k in ks), first, weight, int(mix_k), tasks=tasks, level=level)
    # the level plus the starting deviations, (cells,)
    held = start.logits(locus, votes, task_votes)[scored]
    x, target = _deviations(start._parts(locus, votes, task_votes))[scored], y[scored]
    prior = np.asarray(start.deviation_weights)
    offset = held - x @ prior
    if not use_locus:  # LOCUS's weight held at 0: fit the others alone
        x, prior = x[:, 1:], prior[1:]

    found = fit_logistic(x, target, offset=offset, prior=prior, strength=2 * penalty, average=True)
    if not use_locus:
        found = np.concatenate([[0.0], found])
    return replace(start, deviation_weights=tuple(float(w) for w in found))


def base_rate_shift(logits: NDArray[Any], truth: NDArray[Any]) -> float:
    """The constant d for which the mean of sigmoid(logits + d) over `truth`'s scored cells is
    their mean score. `locus fit` solves it over the training and validation queries together:
    the calibration's shape needs held-out cells (the networks have seen the training ones),
    but the base rate is a mean that 8 times more queries estimate better (BFCL: 168
    validation queries score 0.711 on average, 1,371 training ones 0.725, the test ones 0.750).

    Raises:
        LocusInputError: shapes that differ, or no scored cell.
    """
    z, y = np.asarray(logits, np.float64), np.asarray(truth, np.float64)
    if z.shape != y.shape:
        raise LocusInputError(f"base_rate_shift: logits {z.shape} and truth {y.shape} differ")
    scored = ~np.isnan(y)
    if not scored.any():
        raise LocusInputError("base_rate_shift: no scored cell")
    z, target = z[scored], float(np.clip(y[scored].mean(), 1e-4, 1 - 1e-4))
    shift = 0.0
    for _ in range(50):  # Newton on a monotone function of one variable
        p = sigmoid(z + shift)
        gap, slope = float(p.mean()) - target, float(np.mean(p * (1 - p)))
        if abs(gap) < 1e-9 or slope <= 0:
            break
        shift -= float(np.clip(gap / slope, -2.0, 2.0))
    return shift
