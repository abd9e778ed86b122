"""What `locus evaluate` measures, as results: routing, correctness, baselines, per task
(`locus.pipeline.evaluate` computes them; `Evaluation.as_dict()` is the `--json` form).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from locus import metrics
from locus.offpolicy import Estimate, Overlap
from locus.pipeline.savings import CostSavings

__all__ = [
    "FLOORS",
    "Baselines",
    "CorrectnessMetrics",
    "Evaluation",
    "Floor",
    "OffPolicy",
    "RoutingMetrics",
    "TaskEvaluation",
]

# the simple predictors of P(correct) the router's is set beside, by name: what they read
FLOORS = {
    "llm_rate": "each LLM's rate",
    "task_rate": "each LLM's rate on the query's task",
    "knn": "the kNN vote",
}


@dataclass(frozen=True)
class RoutingMetrics:
    """hit@k: mean true score of the best of the k highest-ranked LLMs, over the queries.

    `hit_at_3` and `hit_at_5` are None (JSON null) where the pool has no more than k LLMs:
    there the k highest-ranked are every LLM, and hit@k is the oracle's, whatever the router.
    `hit_at_1` is what `locus route` does: with the artifact's guard when it has one
    (`unguarded_hit_at_1` without it); `task_given_hit_at_1`: the same where each query's task
    is given (`locus route --task`), None where the queries or the router have no tasks;
    `moved`: the share of queries the guarded router sends
    to another LLM than the guard's default (None without a guard). `hit_at_1_se`: one
    standard error of `hit_at_1` over the queries; `gain`: hit@1 less the best single LLM's
    on the queries both were scored on, with its paired standard error `gain_se` (a gain
    under two standard errors is noise).
    """

    hit_at_1: float
    hit_at_3: float | None
    hit_at_5: float | None
    unguarded_hit_at_1: float
    moved: float | None = None
    guard: dict[str, Any] | None = None
    hit_at_1_se: float | None = None
    gain: float | None = None
    gain_se: float | None = None
    task_given_hit_at_1: float | None = None

    @property
    def gain_is_noise(self) -> bool:
        """True where the gain over the best single LLM is within two standard errors."""
        if self.gain is None or self.gain_se is None:
            return True
        return abs(self.gain) <= 2 * self.gain_se

    def as_dict(self) -> dict[str, Any]:
        return {
            "hit@1": self.hit_at_1,
            "hit@1_se": self.hit_at_1_se,
            "hit@3": self.hit_at_3,
            "hit@5": self.hit_at_5,
            "unguarded_hit@1": self.unguarded_hit_at_1,
            "gain_over_best_single": self.gain,
            "gain_se": self.gain_se,
            "gain_is_noise": self.gain_is_noise,
            "moved": self.moved,
            "guard": self.guard,
            "task_given_hit@1": self.task_given_hit_at_1,
        }


@dataclass(frozen=True)
class Floor:
    """A simple predictor's P(correct) on the router's cells (`FLOORS`): its Brier score and
    log-loss, and `gain`, its log-loss less the router's (positive: the router reads the
    cells better), with the gain's standard error over queries (`metrics.log_loss_gain`).
    Like against like: each LLM's rate on the query's task reads the true task, so it is set
    against the router told each query's task where the router reads tasks (`router_told`);
    `router_log_loss`: the router's log-loss it is set against."""

    brier: float
    log_loss: float
    gain: float
    gain_se: float | None
    router_log_loss: float
    router_told: bool = False

    def as_dict(self) -> dict[str, float | None]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CorrectnessMetrics:
    """P(correct) as a classifier over every evaluated (query, LLM) cell; `auroc` is None
    (JSON null) where it is undefined: every cell right, or every cell wrong.
    `task_given_auroc`: the same where each query's task is given (None where not known).
    `floors`: the simple predictors' P(correct) on the same cells (`Floor`), by name."""

    accuracy: float
    auroc: float | None
    brier: float
    ece: float
    cells: int
    task_given_auroc: float | None = None
    log_loss: float | None = None
    floors: dict[str, Floor] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            key: value for key, value in self.__dict__.items() if key != "floors"
        }
        out["floors"] = {name: floor.as_dict() for name, floor in self.floors.items()}
        return out


@dataclass(frozen=True)
class Baselines:
    """Routers chosen on the training split, scored on the same queries. The best LLM per
    task reads each query's true task; `best_llm_per_task_from_text` reads it from the text
    as a router of texts must (the nearest task centroid of the training queries' vectors),
    None where the queries carry no tasks. `knn`: the router's own kNN vote at its k, None for
    a router without one (LOCUS alone)."""

    best_single_llm: float
    best_single_llm_id: str
    best_llm_per_task: float
    oracle: float
    random: float
    best_llm_per_task_from_text: float | None = None
    knn: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class TaskEvaluation:
    queries: int
    hit_at_1: float
    best_single_llm: float
    oracle: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "queries": self.queries,
            "hit@1": self.hit_at_1,
            "best_single_llm": self.best_single_llm,
            "oracle": self.oracle,
        }


@dataclass(frozen=True)
class OffPolicy:
    """What each router would have scored on sparse evidence (a log: each query answered by
    few LLMs), estimated off-policy (`locus.offpolicy`): where the dense figures (hit@1 among
    the scored LLMs, random, oracle) tie every router on the one logged LLM.

    Attributes:
        overlap: how much the LLMs share these queries.
        estimates: per router, by method ("ips", "dr"), its estimated hit@1.
        propensity: where the logging probabilities came from.
    """

    overlap: Overlap
    estimates: dict[str, dict[str, Estimate]]
    propensity: str = "each LLM's share of these queries (logging independent of the prompt)"

    def as_dict(self) -> dict[str, Any]:
        return {
            "overlap": self.overlap.__dict__,
            "propensity": self.propensity,
            "estimates": {
                name: {method: e.as_dict() for method, e in by.items()}
                for name, by in self.estimates.items()
            },
        }


@dataclass(frozen=True)
class Evaluation:
    """`evaluate_workspace`'s result; `as_dict()` is the `--json` form, where a figure that
    means nothing on these queries is null (see `RoutingMetrics`, `CorrectnessMetrics`).
    `few_queries`: fewer than `locus.metrics.FEW_QUERIES` queries, so every figure is mostly
    noise. `folds`: k of a k-fold evaluation over queries (`evaluate_folds`: every query routed
    once, by a router fitted without it; `split` then says "k-fold"), None for one split."""

    artifact: str
    split: str
    queries: int
    llms: int
    routing: RoutingMetrics
    correctness: CorrectnessMetrics
    baselines: Baselines
    per_task: dict[str, TaskEvaluation] = field(default_factory=dict)
    savings: CostSavings | None = None
    folds: int | None = None
    offpolicy: OffPolicy | None = None

    @property
    def few_queries(self) -> bool:
        return self.queries < metrics.FEW_QUERIES

    @property
    def winning_baseline(self) -> tuple[str, float, float] | None:
        """(name, its hit@1, the router's hit@1 it is set against) of the simple baseline
        that routes these queries better than the router by the most: the best LLM per task
        against the router told each query's task, the best single LLM, the per-task table
        reading the task from the text and the router's own kNN vote against the router of
        texts; None for none."""
        if self.offpolicy is not None:
            return None  # the dense figures tie every router on sparse evidence
        routing, base = self.routing, self.baselines
        given = routing.task_given_hit_at_1
        # like against like: the table that reads the true task against the router told it
        candidates = [
            (f"the best single LLM ({base.best_single_llm_id})", base.best_single_llm,
             routing.hit_at_1),
        ]  # fmt: skip
        if self.per_task:  # without tasks, the table is the best single LLM
            candidates.insert(0, ("the best LLM per task (the task given)",
                                  base.best_llm_per_task,
                                  routing.hit_at_1 if given is None else given))  # fmt: skip
        if base.best_llm_per_task_from_text is not None:
            candidates.append(
                ("the best LLM per task (the task read from the text)",
                 base.best_llm_per_task_from_text, routing.hit_at_1)
            )  # fmt: skip
        if base.knn is not None:
            candidates.append(("the kNN vote (the router's own neighbours)", base.knn,
                               routing.hit_at_1))  # fmt: skip
        best = max(candidates, key=lambda c: c[1] - c[2])
        # the router's figures come from float32 P(correct): the same hit@1 can differ by 1e-8
        return best if best[1] - best[2] > 1e-6 else None

    @property
    def winning_floor(self) -> tuple[str, Floor] | None:
        """(name, `Floor`) of the simple predictor whose P(correct) reads these cells better
        than the router's by the most (the lowest log-loss below the router's); None for
        none."""
        better = [(name, f) for name, f in self.correctness.floors.items() if f.gain < -1e-9]
        return min(better, key=lambda pair: pair[1].gain) if better else None

    def as_dict(self) -> dict[str, Any]:
        winner, floor = self.winning_baseline, self.winning_floor
        sparse = self.offpolicy is not None
        return {
            "winning_baseline": None
            if winner is None
            else {"name": winner[0], "hit@1": winner[1], "router_hit@1": winner[2]},
            "winning_floor": None if floor is None else {"name": floor[0], **floor[1].as_dict()},
            "savings": None if self.savings is None else self.savings.as_dict(),
            "artifact": self.artifact,
            "split": self.split,
            "folds": self.folds,
            "queries": self.queries,
            "few_queries": self.few_queries,
            "llms": self.llms,
            # on sparse evidence, hit@1 among the scored LLMs, random and oracle tie every
            # router on the one logged LLM: only the off-policy estimates are given
            "routing": None if sparse else self.routing.as_dict(),
            "correctness": self.correctness.as_dict(),
            "baselines": None if sparse else self.baselines.as_dict(),
            "per_task": {} if sparse else {t: row.as_dict() for t, row in self.per_task.items()},
            "offpolicy": None if self.offpolicy is None else self.offpolicy.as_dict(),
        }
