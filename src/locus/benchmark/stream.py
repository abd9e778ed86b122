"""The `stream` suite: a production replay on a dense pool, locus against the online bandits.

The stream is the workspace's test queries (those scored by 2 or more LLMs of the fitted
router), in a seeded order, each asked once. A policy picks one LLM per query among those the
pool scored on it (the others are unavailable: their outcome could not be replayed) and sees
only that LLM's outcome (its true score on the query), as a gateway in production does. Every
policy starts from the same evidence, the fit's training and validation queries:

- `locus`: the fitted router (guard included) with outcomes fed back at once
  (`StackedRouter.add_outcomes`), the drift alarm and its discount (`locus.routing.drift`, as
  `locus serve` does by default), and exploration at the suite's share
  (`locus.routing.explore`: a Thompson draw on each candidate's uncertainty);
- `locus-static`: the fitted router alone, no outcomes, no exploration;
- `thompson`: a Beta posterior per LLM (as LiteLLM's auto router keeps per pool), started from
  each LLM's hits and misses on the training evidence (mabwiser's ThompsonSampling);
- `epsilon-greedy`: each LLM's mean, started from the training evidence (mabwiser's
  EpsilonGreedy), and a uniform draw among the available LLMs on the suite's share of
  requests;
- `linucb`: a ridge regression of each LLM's score on the query's text vector (its first 64
  principal components and a constant), started from the training evidence, with an upper
  confidence bound (mabwiser's LinUCB, alpha 1).

Scenarios: `no change`; `swap`, where from request `swap_at` (default 200, or half the
stream where it is shorter) on the LLM the static router sends most of the first `swap_at`
requests to answers as the pool's weakest LLM does (its true scores on the same queries), as
an endpoint changed behind its name; `drift`, the same change coming slowly: each request
after `swap_at` answered as the weakest with a probability rising from 0 to 1 at the end.

Figures per policy, scenario and seed (mean ± sd over seeds): hit@1 over the stream, the
cumulative regret against the oracle (the best available LLM on each query) at its end, the
hindsight best single LLM's mean beside them, each LLM's share of the requests, the mean cost
per request where the pool has costs; on the swap and the drift, the swapped LLM's requests
after `swap_at` and until its share of the next 50 falls under 10% for good, and locus's
alarm delay (in the swapped LLM's outcomes); on no change, locus's false alarms per 10,000
outcomes.

Off-policy estimates against the truth: the `locus` run (exploring) is a log with its
logging probabilities (`Exploration.propensities`); from it the IPS and doubly robust
estimates of the static router's and the best single LLM's hit@1 (`locus.offpolicy`; the best
single: the available LLM of the best training mean) are set beside their true hit@1 on the
same queries, and whether the 95% interval covers it. IPS is unbiased only where the logging
policy could have chosen what the target chooses; locus explores only the plausible LLMs, so
its log has no support for a clearly worse one, and the doubly robust estimate leans on the
router's P(correct) there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus._progress import ProgressFactory, no_progress
from locus.benchmark.stream_bandits import BANDITS, bandit_run
from locus.benchmark.stream_report import summary_of
from locus.errors import LocusInputError

__all__ = ["BANDITS", "POLICIES", "SCENARIOS", "Stream", "load_stream", "run_stream"]

POLICIES = ("locus", "locus-static", *BANDITS)
SCENARIOS = ("no change", "swap", "drift")
WINDOW = 50  # requests over which the swapped LLM's share is read
MIN_REQUESTS = 20  # a stream shorter than this says nothing
SWAP_AT = 200  # the request the swap happens at (half the stream, where that is shorter)
CURVE_POINTS = 200  # points of the first seed's cumulative regret curves (the plot's)


@dataclass(frozen=True)
class Stream:
    """A dense pool as a stream: the queries replayed and the evidence every policy starts from.

    Attributes:
        llm_ids: the fitted router's LLMs, the columns below.
        vectors: (n, d) the replayed queries' text vectors; truth: (n, n_llms) their scores;
            costs: (n, n_llms) their USD, None where the pool has none.
        train_vectors, train_scores: the fit's training and validation queries (NaN: not
            scored), what the bandits are started from.
        load_router: a fresh copy of the fitted router (`StackedRouter`), one per run.
    """

    llm_ids: list[str]
    vectors: NDArray[np.float32]
    truth: NDArray[np.float64]
    costs: NDArray[np.float64] | None
    train_vectors: NDArray[np.float32]
    train_scores: NDArray[np.float64]
    load_router: Callable[[], Any]


def load_stream(store: Any, artifact: str = "default") -> Stream:
    """The stream of a fitted workspace: its test queries that 2 or more LLMs of the artifact's
    router were scored on.

    Raises:
        LocusInputError: fewer than 2 LLMs, or fewer than `MIN_REQUESTS` such queries.
    """
    from locus.pipeline.data import workspace_table
    from locus.pipeline.workspace_router import WorkspaceRouter

    router = WorkspaceRouter(store, artifact, outcomes=False)
    data = workspace_table(store, split_seed=router.manifest.split_seed)
    llm_ids = list(router.llm_ids)
    if len(llm_ids) < 2:
        raise LocusInputError(f"stream: the router has {len(llm_ids)} LLM; expected 2 or more")
    columns = [data.table.llm_index(llm) for llm in llm_ids]
    scores = data.table.scores[:, columns].astype(np.float64)
    test = data.rows("test")
    test = test[(~np.isnan(scores[test])).sum(axis=1) >= 2]
    if len(test) < MIN_REQUESTS:
        raise LocusInputError(
            f"stream: {len(test)} test queries scored by 2 or more LLMs; expected at least "
            f"{MIN_REQUESTS} (a dense pool: each test query scored by several LLMs of the fit)"
        )
    seen = np.concatenate([data.rows("train"), data.rows("val")])
    costs = None if data.table.costs is None else data.table.costs[:, columns][test]
    if costs is not None and np.isnan(costs[~np.isnan(scores[test])]).any():
        costs = None  # a cost is a figure only where every possible pick has one

    def load_router() -> Any:
        return WorkspaceRouter(store, artifact, outcomes=False).router

    return Stream(
        llm_ids=llm_ids,
        vectors=data.vectors[test].astype(np.float32),
        truth=scores[test],
        costs=None if costs is None else costs.astype(np.float64),
        train_vectors=data.vectors[seen].astype(np.float32),
        train_scores=scores[seen],
        load_router=load_router,
    )


@dataclass
class _Run:
    """One policy's replay: the column chosen and the reward seen at each request."""

    chosen: NDArray[np.int64]
    reward: NDArray[np.float64]
    alarm_delay: int | None = None  # locus: the swapped LLM's outcomes until its alarm
    alarms: int = 0  # locus: alarms raised (on no change, all false)
    propensity: NDArray[np.float64] | None = None  # locus: (n, n_llms) logging probabilities
    proba: NDArray[np.float64] | None = None  # locus-static: its P(correct), (n, n_llms)


def _effective_truth(
    truth: NDArray[np.float64],
    swap: tuple[int, int] | None,
    swap_at: int,
    *,
    drift: bool = False,
    seed: int = 0,
) -> NDArray[np.float64]:
    """(n, n_llms) what each LLM answers at each request of the stream (NaN: not available):
    the swapped column answers as the other from `swap_at` on (wrong where the other was not
    scored); with `drift`, each request after `swap_at` with a probability rising linearly
    from 0 to 1 at the stream's end (a slow drift), drawn by `seed`."""
    out = truth.copy()
    if swap is not None:
        after = out[swap_at:, swap[0]]
        taken = np.nan_to_num(truth[swap_at:, swap[1]], nan=0.0)  # unscored: counted wrong
        if drift:
            share = np.linspace(0.0, 1.0, len(after) + 1)[1:]
            moved = np.random.default_rng(seed).random(len(after)) < share
            taken = np.where(moved, taken, after)
        out[swap_at:, swap[0]] = np.where(np.isnan(after), np.nan, taken)
    return out


def _locus_run(
    stream: Stream,
    order: NDArray[np.int64],
    answers: NDArray[np.float64],
    *,
    learn: bool,
    explore: float,
    seed: int,
    swapped: int | None,
    swap_at: int,
) -> _Run:
    from locus.routing.decision import RouteRequest
    from locus.routing.drift import DriftMonitor
    from locus.routing.explore import Exploration

    router = stream.load_router()
    ids = stream.llm_ids
    exploration = Exploration(share=explore if learn else 0.0)
    rng = np.random.default_rng(seed)
    monitor = DriftMonitor()
    n = len(order)
    chosen = np.empty(n, np.int64)
    reward = np.empty(n, np.float64)
    propensity = np.zeros((n, len(ids))) if learn and explore > 0 else None
    proba = None if learn else np.full((n, len(ids)), np.nan)
    alarm_delay, swapped_seen = None, 0
    for t, row in enumerate(order):
        vector = stream.vectors[row][None]
        missing = frozenset(ids[c] for c in np.flatnonzero(np.isnan(answers[t])))
        request = RouteRequest(top=len(ids), unavailable=missing)
        [decision] = router.route(vector, request)
        candidates = decision.ranked  # the router's choice first (the guard's hold)
        columns = np.array([ids.index(c.llm_id) for c in candidates])
        p = np.array([[c.p_correct for c in candidates]])
        sd = np.array([[np.nan if c.uncertainty is None else c.uncertainty for c in candidates]])
        utility = np.array([[c.utility for c in candidates]])
        first = np.zeros(1, np.int64)
        pick = int(exploration.choose(p, sd, rng, utility, first=first)[0])
        column = int(columns[pick])
        y = float(answers[t, column])
        chosen[t], reward[t] = column, y
        if proba is not None:
            proba[t, columns] = p[0]
        if not learn:
            continue
        if propensity is not None:
            logged = exploration.propensities(p, sd, utility, first, seed=seed + t)[0]
            propensity[t, columns] = logged
        llm = ids[column]
        if swapped is not None and column == swapped and t >= swap_at:
            swapped_seen += 1
        raised = monitor.update(llm, min(max(float(p[0, pick]), 0.0), 1.0), y)
        if raised and swapped is not None and column == swapped and alarm_delay is None:
            alarm_delay = swapped_seen if t >= swap_at else -1
        state = monitor.state(llm)
        # on the alarm, its outcomes from before the change go with its evidence of the fit
        earlier = state.outcomes - state.since - 1 if raised else None
        router.add_outcomes(
            llm, vector, np.array([y], np.float32), forget_fit=state.alarm,
            keep_earlier=earlier,
        )  # fmt: skip
    return _Run(chosen, reward, alarm_delay, len(monitor.alarms()), propensity, proba)


def _settled(chosen: NDArray[np.int64], swapped: int, swap_at: int) -> int | None:
    """The swapped LLM's requests after the swap until its share of a window of the next
    `WINDOW` requests falls under 10% and stays there; None where it never does."""
    mine = (chosen[swap_at:] == swapped).astype(float)
    window = min(WINDOW, len(mine))
    shares = np.convolve(mine, np.ones(window), "valid") / window
    above = np.flatnonzero(shares >= 0.1)
    start = 0 if not len(above) else int(above[-1]) + 1
    return int(mine[:start].sum()) if start < len(shares) else None


def _figures(
    run: _Run, answers: NDArray[np.float64], stream: Stream, order: NDArray[np.int64]
) -> dict[str, Any]:
    regret = np.cumsum(np.nanmax(answers, axis=1) - run.reward)
    marks = np.unique(np.linspace(0, len(regret) - 1, CURVE_POINTS).astype(int))
    shares = np.bincount(run.chosen, minlength=len(stream.llm_ids)) / len(run.chosen)
    out: dict[str, Any] = {
        "requests": len(run.reward),
        "hit@1": float(run.reward.mean()),
        "regret": float(regret[-1]),
        "regret_curve": [[int(m) + 1, float(regret[m])] for m in marks],
        "shares": {
            stream.llm_ids[j]: float(shares[j]) for j in np.argsort(-shares) if shares[j] > 0
        },
    }
    if stream.costs is not None:
        out["cost"] = float(stream.costs[order, run.chosen].mean())
    return out


def _offpolicy(
    log: _Run, static: _Run, answers: NDArray[np.float64], best_single: NDArray[np.float64]
) -> dict[str, Any]:
    """The IPS and DR estimates, from the exploring locus run's log, of the static router's
    and the best single LLM's hit@1, beside their truth on the same queries."""
    from locus.offpolicy import doubly_robust, ips

    assert log.propensity is not None and static.proba is not None
    rows = np.arange(len(log.chosen))
    logged = np.full(answers.shape, np.nan)
    logged[rows, log.chosen] = log.reward
    out: dict[str, Any] = {}
    ranked = np.where(np.isnan(answers), -np.inf, best_single[None, :])
    targets = {"locus-static": static.chosen, "best single LLM": np.argmax(ranked, axis=1)}
    for name, choice in targets.items():
        truth = float(answers[rows, choice].mean())
        found: dict[str, Any] = {"truth": truth}
        for method, estimate in (
            ("ips", ips(choice, logged, log.propensity)),
            ("dr", doubly_robust(choice, logged, static.proba, log.propensity)),
        ):
            low, high = estimate.interval
            found[method] = {
                "value": estimate.value,
                "se": estimate.se,
                "interval": [low, high],
                "covers": bool(low <= truth <= high),
            }
        out[name] = found
    return out


def run_stream(
    stream: Stream,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    explore: float = 0.05,
    swap_at: int | None = None,
    policies: Sequence[str] = POLICIES,
    scenarios: Sequence[str] = SCENARIOS,
    progress: ProgressFactory = no_progress,
) -> dict[str, Any]:
    """Replay `stream` under each policy, scenario and seed (the order of the queries, and
    every draw); the suite's figures and their mean ± sd over seeds.

    Raises:
        LocusInputError: an unknown policy or scenario, an exploration share outside [0, 1],
            a swap after the stream's end.
    """
    unknown = [p for p in policies if p not in POLICIES] + [
        s for s in scenarios if s not in SCENARIOS
    ]
    if unknown:
        raise LocusInputError(
            f"stream: unknown {unknown[0]!r}; policies: {', '.join(POLICIES)}; scenarios: "
            f"{', '.join(SCENARIOS)}"
        )
    if not 0 <= explore <= 1:
        raise LocusInputError(f"stream: explore must lie in [0, 1], found {explore}")
    n, ids = len(stream.truth), stream.llm_ids
    swap_at = min(SWAP_AT, n // 2) if swap_at is None else swap_at
    if set(scenarios) - {"no change"} and not 0 < swap_at < n - 10:
        raise LocusInputError(
            f"stream: --swap-at {swap_at} leaves too little stream after it; expected 1 to "
            f"{n - 11} on {n} requests"
        )
    started = time.perf_counter()
    means = np.nanmean(stream.truth, axis=0)
    weakest = int(np.argmin(means))
    first = _locus_run(
        stream, np.arange(min(swap_at, n)), stream.truth, learn=False, explore=0.0, seed=0,
        swapped=None, swap_at=swap_at,
    )  # fmt: skip
    target = int(np.bincount(first.chosen, minlength=len(ids)).argmax())
    training_means = np.nanmean(stream.train_scores, axis=0)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        s: {p: [] for p in policies} for s in scenarios
    }
    offpolicy: list[dict[str, Any]] = []
    total = len(seeds) * len(scenarios) * len(policies)
    with progress("replaying the stream", total=total) as advance:
        for seed in seeds:
            order = np.random.default_rng(seed).permutation(n)
            for scenario in scenarios:
                swap = None if scenario == "no change" else (target, weakest)
                answers = _effective_truth(
                    stream.truth[order], swap, swap_at, drift=scenario == "drift", seed=seed
                )
                done: dict[str, _Run] = {}
                for policy in policies:
                    if policy in BANDITS:
                        run = _Run(
                            *bandit_run(policy, stream, order, answers, explore=explore, seed=seed)
                        )
                    else:
                        run = _locus_run(
                            stream, order, answers, learn=policy == "locus", explore=explore,
                            seed=seed, swapped=None if swap is None else target,
                            swap_at=swap_at,
                        )  # fmt: skip
                    done[policy] = run
                    found = _figures(run, answers, stream, order)
                    found["seed"] = seed
                    if seed != seeds[0]:  # the plot's: the first seed's curve
                        del found["regret_curve"]
                    if swap is not None:
                        found["swapped_requests_after"] = int(
                            (run.chosen[swap_at:] == target).sum()
                        )
                        found["swapped_requests_until_under_10pct"] = _settled(
                            run.chosen, target, swap_at
                        )
                    if policy == "locus":
                        found["alarm_delay"] = run.alarm_delay
                        found["alarms"] = run.alarms
                    runs[scenario][policy].append(found)
                    advance(1)
                if (
                    scenario == "no change"
                    and explore > 0
                    and {"locus", "locus-static"} <= set(done)
                ):
                    estimates = _offpolicy(
                        done["locus"], done["locus-static"], answers, training_means
                    )
                    offpolicy.append({"seed": seed, **estimates})
    hindsight = float(means.max())
    return {
        "suite": "stream",
        "llms": len(ids),
        "requests": n,
        "seeds": list(seeds),
        "explore": explore,
        "swap": {
            "at": swap_at,
            "swapped": ids[target],
            "answers_as": ids[weakest],
            "swapped_mean": float(means[target]),
            "answers_as_mean": float(means[weakest]),
        },
        "hindsight_best_single": {"llm_id": ids[int(np.argmax(means))], "hit@1": hindsight},
        "oracle": float(np.nanmax(stream.truth, axis=1).mean()),
        "summary": summary_of(runs),
        "offpolicy": offpolicy,
        "per_seed": runs,
        "seconds": time.perf_counter() - started,
    }
