"""The evidence floor: on a small pool the stack and guard are chosen out of fold and follow the
LLMs' own per-task and neighbour scores; an LLM onboarded since the fit joins those votes,
weighed against LOCUS by its number of scores; a newcomer better beyond noise becomes the
guard's default."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.routing import Evidence, KNNRouter, StackedRouter
from locus.routing.cross_fit import fold_of, out_of_fold_votes
from locus.routing.guard import Guard, rechosen_default
from locus.routing.locus_router import LogitRouter
from locus.routing.task_vote import TaskVote

TASKS = ("math", "law", "code", "general")
# the specialists of the small pool, and a small LLM: P(correct) per task
SKILL = {
    "math-llm": (0.92, 0.40, 0.55, 0.50),
    "law-llm": (0.35, 0.90, 0.30, 0.55),
    "coder-llm": (0.55, 0.30, 0.93, 0.45),
    "small-llm": (0.35, 0.45, 0.40, 0.55),
}
BEST = {task: max(SKILL, key=lambda llm: SKILL[llm][t]) for t, task in enumerate(TASKS)}


class LevelsOnly(LogitRouter):
    """A LOCUS that learnt each LLM's level and nothing of which query suits which LLM: the
    networks' state on a pool of a few hundred queries."""

    def __init__(self, levels: dict[str, float]) -> None:
        self.levels = dict(levels)

    @property
    def llm_ids(self) -> Sequence[str]:  # type: ignore[override]
        return list(self.levels)

    def predict_logits(self, query_vectors: NDArray[np.float32]) -> NDArray[Any]:
        p = np.array(list(self.levels.values()))
        return np.tile(np.log(p / (1 - p)), (len(query_vectors), 1))


def _queries(n: int, rng: np.random.Generator) -> tuple[NDArray[np.float32], list[str]]:
    """n queries, the four tasks in turn, each task a region of a 16-d space."""
    centres = np.random.default_rng(99).normal(size=(len(TASKS), 16)) * 2.5
    task = np.arange(n) % len(TASKS)
    vectors = centres[task] + rng.normal(size=(n, 16))
    return vectors.astype(np.float32), [TASKS[t] for t in task]


def _scores(tasks: list[str], llms: Sequence[str], rng: np.random.Generator) -> NDArray[np.float32]:
    p = np.array([[SKILL[llm][TASKS.index(t)] for llm in llms] for t in tasks])
    return (rng.random(p.shape) < p).astype(np.float32)


def _small_pool(n: int = 200, seed: int = 0) -> tuple[Evidence, Evidence, LevelsOnly]:
    """The issue's pool: 4 LLMs x `n` queries, split 90/10 into training and validation."""
    rng = np.random.default_rng(seed)
    vectors, tasks = _queries(n, rng)
    llms = tuple(SKILL)
    scores = _scores(tasks, llms, rng)
    cut = int(0.9 * n)
    train = Evidence(vectors[:cut], scores[:cut], llms, tuple(tasks[:cut]))
    val = Evidence(vectors[cut:], scores[cut:], llms, tuple(tasks[cut:]))
    levels = {llm: float(np.mean(SKILL[llm])) for llm in llms}
    return train, val, LevelsOnly(levels)


def test_out_of_fold_votes_never_read_the_query_itself() -> None:
    rng = np.random.default_rng(1)
    vectors, tasks = _queries(60, rng)
    scores = _scores(tasks, tuple(SKILL), rng)
    evidence = Evidence(vectors, scores, tuple(SKILL), tuple(tasks))
    votes, task_votes = out_of_fold_votes(evidence, [5, 500])
    fold = fold_of(60)
    assert sorted(np.bincount(fold).tolist()) == [12] * 5
    for query in (0, 17, 59):  # by hand: a kNN router over the other folds' queries only
        rest = fold != fold[query]
        knn = KNNRouter(k=5).fit(Evidence(vectors[rest], scores[rest], tuple(SKILL)))
        np.testing.assert_allclose(
            votes[5][query], knn.predict_proba(vectors[query : query + 1])[0]
        )
        np.testing.assert_allclose(votes[500][query], scores[rest].mean(axis=0), rtol=1e-6)
        with_tasks = KNNRouter(k=5).fit(
            Evidence(vectors[rest], scores[rest], tuple(SKILL), tuple(np.array(tasks)[rest]))
        )
        own = with_tasks.votes(vectors[query : query + 1], [5, 500], tasks=True).tasks[0]
        assert task_votes is not None
        np.testing.assert_allclose(task_votes[query], own, rtol=1e-6)
    with pytest.raises(LocusInputError, match="5 folds need at least 5 queries"):
        fold_of(3)


def test_a_small_pool_routes_by_its_per_task_scores_not_by_the_best_single_llm() -> None:
    train, val, locus = _small_pool()
    router = StackedRouter.fit(locus, train, val)
    assert router.stack is not None and router.stack.tasks and router.guard is not None
    assert not router.guard.always_default  # 20 validation queries alone chose "always one"
    assert router.guard.validation["queries"] == train.n_queries + val.n_queries
    rng = np.random.default_rng(7)
    vectors, tasks = _queries(400, rng)
    chosen = [d.llm_id for d in router.route(vectors, top=1)]
    specialist = [(llm, t) for llm, t in zip(chosen, tasks, strict=True) if t != "general"]
    agree = np.mean([llm == BEST[t] for llm, t in specialist])
    assert agree >= 0.95  # the per-task table's choice, where one LLM is clearly best
    # the expected hit@1 of those choices, against the per-task table and the best single LLM
    routed = np.mean([SKILL[llm][TASKS.index(t)] for llm, t in zip(chosen, tasks, strict=True)])
    per_task = np.mean([SKILL[BEST[t]][TASKS.index(t)] for t in tasks])
    best_single = max(np.mean(skill) for skill in SKILL.values())
    assert routed >= per_task - 0.02 and routed > best_single + 0.2


def test_told_the_task_the_router_routes_as_the_per_task_table_where_the_text_cannot() -> None:
    """Maths and code questions that read alike (one region of the vector space): from the
    text, the router can only guess between the two specialists; told each query's task
    (`locus route --task`), it routes as the per-task table, which reads the true task."""
    rng = np.random.default_rng(3)

    def alike(n: int) -> tuple[NDArray[np.float32], list[str]]:
        vectors, tasks = _queries(n, rng)
        maths = vectors[[t == "math" for t in tasks]]
        code = np.flatnonzero([t == "code" for t in tasks])
        vectors[code] = maths[: len(code)] + rng.normal(size=(len(code), 16)) * 0.3
        return vectors.astype(np.float32), tasks

    vectors, tasks = alike(400)
    scores = _scores(tasks, tuple(SKILL), rng)
    train = Evidence(vectors[:360], scores[:360], tuple(SKILL), tuple(tasks[:360]))
    val = Evidence(vectors[360:], scores[360:], tuple(SKILL), tuple(tasks[360:]))
    router = StackedRouter.fit(_small_pool()[2], train, val)
    queries, truth = alike(400)
    per_task = np.mean([SKILL[BEST[t]][TASKS.index(t)] for t in truth])

    def routed(decisions: list[Any]) -> float:
        return float(
            np.mean(
                [SKILL[d.llm_id][TASKS.index(t)] for d, t in zip(decisions, truth, strict=True)]
            )
        )

    from_text = routed(router.route(queries, top=1))
    told = routed(router.route(queries, top=1, tasks=truth))
    assert told >= per_task - 0.02 and told > from_text + 0.05, (told, from_text, per_task)
    # a task the fit never saw is read from the text, as without one
    unknown = router.route(queries[:8], top=1, tasks=["astrology"] * 8)
    assert [d.llm_id for d in unknown] == [d.llm_id for d in router.route(queries[:8], top=1)]


def test_without_locus_its_deviation_weight_stays_zero() -> None:
    train, val, locus = _small_pool()
    router = StackedRouter.fit(locus, train, val, use_locus=False)
    assert router.stack is not None and router.stack.deviation_weights[0] == 0.0
    assert router.stack.mix_weight == 0.0
    # a pool where some LLM has fewer than 50 training scores: the same, by default
    few = Evidence(train.vectors, train.scores.copy(), train.llm_ids, train.tasks)
    few.scores[40:, 3] = np.nan  # small-llm scored on 40 training queries
    tiny = StackedRouter.fit(locus, few, val)
    assert tiny.stack is not None and tiny.stack.deviation_weights[0] == 0.0


def _newcomer_pool() -> tuple[StackedRouter, LevelsOnly]:
    """A fitted pool of three LLMs (no math specialist); LOCUS's pool holds a fourth, a math
    specialist onboarded since the fit, whose level LOCUS under-rates."""
    train, val, _ = _small_pool(400, seed=3)
    keep = [1, 2, 3]  # math-llm is the newcomer
    ids = tuple(train.llm_ids[j] for j in keep)
    train, val = (Evidence(e.vectors, e.scores[:, keep], ids, e.tasks) for e in (train, val))
    locus = LevelsOnly({llm: float(np.mean(SKILL[llm])) for llm in ids})
    router = StackedRouter.fit(locus, train, val)
    locus.levels["math-llm"] = 0.40  # LOCUS's prior for the newcomer: below its 0.59
    return router, locus


def test_a_newcomer_joins_the_votes_weighed_by_its_number_of_scores() -> None:
    router, _ = _newcomer_pool()
    rng = np.random.default_rng(11)
    math_vectors, _ = _queries(400, rng)
    math_vectors = math_vectors[::4]  # 100 maths queries
    before = router.predict_proba(math_vectors)[:, -1].mean()
    others = router.predict_proba(math_vectors)[:, :-1]
    assert [d.llm_id for d in router.route(math_vectors, top=1)].count("math-llm") == 0
    probes, probe_tasks = _queries(64, rng)  # 16 per task, scored as the specialist
    scores = _scores(probe_tasks, ["math-llm"], rng)[:, 0]
    router.join("math-llm", probes, scores, probe_tasks)
    assert router.joined == {"math-llm": 64}
    after = router.predict_proba(math_vectors)[:, -1]
    # joining moves no other LLM's P(correct): the level and the deviations' means are the
    # fitted LLMs', the newcomer's rows never take a task voter's place
    np.testing.assert_allclose(router.predict_proba(math_vectors)[:, :-1], others, atol=1e-6)
    chosen = [d.llm_id for d in router.route(math_vectors, top=1)]
    assert after.mean() > before + 0.1 and chosen.count("math-llm") >= 90
    # the posterior of its kNN votes lies between LOCUS's prior and the votes alone, by the
    # scores' number: read through a stack where those votes count (this pool's own, chosen by
    # cross-validation, reads the task vote alone: its truth is per task)
    assert router.stack is not None
    stack = replace(router.stack, deviation_weights=(0.0, 0.5, 0.5, 1.0))

    def newcomer_with(strength: float) -> float:
        read = StackedRouter(router.locus, router.knn, stack, router.guard, prior_strength=strength)
        read.joined = dict(router.joined)
        return float(read.predict_proba(math_vectors)[:, -1].mean())

    assert newcomer_with(1e6) < newcomer_with(router.prior_strength) < newcomer_with(0.0)
    router.join("math-llm", probes, scores)  # known already: nothing changes
    assert router.joined == {"math-llm": 64}
    with pytest.raises(LocusInputError, match="not in LOCUS's pool"):
        router.join("unknown-llm", probes, scores)


def test_a_newcomer_better_beyond_noise_becomes_the_default() -> None:
    guard = Guard("old", margin=0.05)
    rng = np.random.default_rng(5)
    old = (rng.random(128) < 0.5).astype(float)
    better = np.maximum(old, rng.random(128) < 0.6)  # right wherever the old one is, and more
    assert rechosen_default(guard, "new", better, old).default == "new"
    level = np.where(rng.random(128) < 0.5, old, 1 - old)  # as good on average
    assert rechosen_default(guard, "new", level, old) is guard
    assert rechosen_default(guard, "new", better[:10], old[:10]) is guard  # too few pairs
    rechosen = rechosen_default(guard, "new", better, old)
    assert rechosen.margin == 0.05 and rechosen.validation["rechosen_from"] == "old"


def test_a_newcomers_task_rates_come_from_its_own_tasks() -> None:
    scores = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=np.float32)
    vote = TaskVote.fit(scores, ("maths", "maths", "law", "law"))
    assert vote is not None
    joined = vote.with_llm(
        np.array([1, 1, 1, 0], np.float32), 4, ["maths", "maths", "maths", "law"]
    )
    mean = 0.75
    np.testing.assert_allclose(
        joined.rates[:, -1], [(0 + 2 * mean) / 3, (3 + 2 * mean) / 5, mean], rtol=1e-6
    )  # names are sorted: law, maths
    assert (joined.codes[-4:] == len(vote.names)).all()  # its rows vote no task
    untasked = vote.with_llm(np.array([1, 0], np.float32), 2)
    np.testing.assert_allclose(untasked.rates[:, -1], 0.5)


def test_a_newcomer_joined_again_is_read_from_its_new_scores() -> None:
    """Production outcomes: the newcomer turns out wrong on maths; joined again, its votes
    follow the new scores at once, and no other LLM's P(correct) moves."""
    router, _ = _newcomer_pool()
    rng = np.random.default_rng(12)
    probes, probe_tasks = _queries(64, rng)
    scores = _scores(probe_tasks, ["math-llm"], rng)[:, 0]
    router.join("math-llm", probes, scores, probe_tasks)
    maths = _queries(400, rng)[0][::4]
    others = router.predict_proba(maths)[:, :-1]
    first = router.predict_proba(maths)[:, -1].mean()
    wrong = np.where(np.array(probe_tasks) == "math", 0.0, scores).astype(np.float32)
    router.join("math-llm", probes, wrong, probe_tasks)
    assert router.joined == {"math-llm": 64} and router.knn is not None
    assert router.knn.llm_ids.count("math-llm") == 1
    assert router.predict_proba(maths)[:, -1].mean() < first - 0.2
    np.testing.assert_allclose(router.predict_proba(maths)[:, :-1], others, atol=1e-6)
    with pytest.raises(LocusInputError, match="not in the router"):
        router.knn.add_llm("nobody", probes, scores, replace=True)


def test_every_prediction_carries_an_uncertainty_that_shrinks_with_evidence() -> None:
    router, _ = _newcomer_pool()
    rng = np.random.default_rng(13)
    maths = _queries(40, rng)[0][::4]

    def spread(llm: str) -> float:
        [decision] = router.route(maths[:1], top=len(router.llm_ids), guarded=False)
        [candidate] = [c for c in decision.ranked if c.llm_id == llm]
        assert candidate.uncertainty is not None
        p = candidate.p_correct
        n = router.evidence_counts()[list(router.llm_ids).index(llm)]
        assert candidate.uncertainty == pytest.approx(np.sqrt(p * (1 - p) / (n + 1)))
        return candidate.uncertainty / np.sqrt(p * (1 - p))  # per unit of Bernoulli spread

    alone = spread("math-llm")  # LOCUS's prediction alone: worth `prior_strength` scores
    assert router.evidence_counts()[-1] == router.prior_strength
    assert spread("law-llm") < alone  # an LLM of the fit: its votes read up to 500 scores
    probes, probe_tasks = _queries(200, rng)
    router.join("math-llm", probes, _scores(probe_tasks, ["math-llm"], rng)[:, 0], probe_tasks)
    assert spread("math-llm") < alone / 2
    [decision] = router.route(maths[:1])
    assert decision.uncertainty == decision.ranked[0].uncertainty
    assert decision.as_dict()["uncertainty"] == decision.uncertainty


def test_a_newcomer_joined_again_and_again_keeps_one_row_per_query() -> None:
    """Outcomes re-read after every batch: the kNN router's rows grow with the newcomer's
    distinct queries, not with the number of re-reads, and its P(correct) is the one a router
    joined once with the same scores gives."""
    router, _ = _newcomer_pool()
    assert router.knn is not None
    fitted_rows = len(router.knn.vectors_)
    rng = np.random.default_rng(14)
    queries, tasks = _queries(160, rng)
    scores = _scores(tasks, ["math-llm"], rng)[:, 0]
    for end in range(32, 161, 16):  # 32 probes, then 16 outcomes at a time, in shuffled order
        order = rng.permutation(end)
        router.join("math-llm", queries[order], scores[order], [tasks[i] for i in order])
    assert len(router.knn.vectors_) == fitted_rows + 160
    once, _ = _newcomer_pool()
    once.join("math-llm", queries, scores, tasks)
    probe = _queries(40, rng)[0]
    np.testing.assert_allclose(router.predict_proba(probe), once.predict_proba(probe), atol=1e-6)
    # a query it is no longer scored on becomes a row no LLM is scored on
    router.join("math-llm", queries[:100], scores[:100], tasks[:100])
    assert len(router.knn.vectors_) == fitted_rows + 160
    assert int((~np.isnan(router.knn.scores_[:, -1])).sum()) == 100


def test_a_small_pool_reads_its_level_and_a_named_task_from_its_per_task_rates() -> None:
    """On a pool of a few hundred queries the stack's level reads the task vote (a vote of a
    few neighbours read it far worse), LOCUS gets no share its validation queries do not show
    it earns (here it knows each LLM's level and nothing else), and told a query's task, every
    LLM's P(correct) is within 0.04 of the per-task table's: the weights, pulled towards the
    task vote alone, read a named task's rates as the table does (a weaker pull had read a
    specialist planted at 0.92 at 0.99)."""
    train, val, locus = _small_pool(400, seed=2)
    router = StackedRouter.fit(locus, train, val)
    stack, knn = router.stack, router.knn
    assert stack is not None and knn is not None and knn.task_vote_ is not None
    assert stack.level == "tasks"
    assert stack.mix_weight == 0.0 and stack.deviation_weights[0] == 0.0
    vectors, tasks = _queries(200, np.random.default_rng(7))
    told = router.predict_proba_given_tasks(vectors, tasks)
    columns = [list(knn.llm_ids).index(llm) for llm in router.llm_ids]
    table = knn.task_vote_.given(tasks, np.zeros((len(tasks), len(columns)), np.float32))
    assert np.abs(told - table[:, columns]).max() < 0.04
    # from the text, the level is still the task vote's: each LLM's mean P(correct) per task
    # within 0.05 of the table's
    from_text = router.predict_proba(vectors)
    for task in TASKS:
        rows = np.array(tasks) == task
        gap = from_text[rows].mean(axis=0) - table[rows][:, columns].mean(axis=0)
        assert np.abs(gap).max() < 0.05, (task, gap)


class Peeks(LogitRouter):
    """A LOCUS that knows every query's outcomes (logit +1 where an LLM is right, -1 where
    not): what validation would show of networks that earn their say."""

    def __init__(self, vectors: NDArray[np.float32], scores: NDArray[np.float32]) -> None:
        self.ids = tuple(SKILL)
        self.known = {row.tobytes(): s for row, s in zip(vectors, scores, strict=True)}

    @property
    def llm_ids(self) -> Sequence[str]:  # type: ignore[override]
        return list(self.ids)

    def predict_logits(self, query_vectors: NDArray[np.float32]) -> NDArray[Any]:
        rows = [self.known.get(np.asarray(v, np.float32).tobytes()) for v in query_vectors]
        return np.array([2.0 * r - 1.0 if r is not None else np.zeros(len(self.ids))
                         for r in rows])  # fmt: skip


def test_locus_gets_its_share_of_a_small_pool_where_validation_shows_it_earns_one() -> None:
    """The rule that keeps LOCUS out of a small pool unless its validation queries show a gain
    of 2 standard errors lets in a LOCUS that earns it."""
    train, val, _ = _small_pool(400, seed=2)
    peeks = Peeks(np.concatenate([train.vectors, val.vectors]),
                  np.concatenate([train.scores, val.scores]))  # fmt: skip
    stack = StackedRouter.fit(peeks, train, val).stack
    assert stack is not None and stack.deviation_weights[0] > 0.0, stack
    uninformed = StackedRouter.fit(_small_pool(400, seed=2)[2], train, val).stack
    assert uninformed is not None and uninformed.deviation_weights[0] == 0.0


def test_a_small_pool_without_tasks_reads_the_vote_of_the_k_that_reads_it_best() -> None:
    """Without tasks, a small pool's level and the pull on its weights read the kNN vote of
    the k whose out-of-fold log-loss is the lowest (the regional vote of 500 neighbours is
    every LLM's overall mean on a pool of 200 queries; the k that routes best, 5 or 10
    neighbours, is noise as a probability)."""
    from locus.routing.stack import knn_logits

    train, val, locus = _small_pool(200, seed=3)
    train, val = (Evidence(e.vectors, e.scores, e.llm_ids) for e in (train, val))
    stack = StackedRouter.fit(locus, train, val).stack
    assert stack is not None and not stack.tasks and stack.level == "knn"
    both = train.joined(val)
    votes, _ = out_of_fold_votes(both, sorted({*KNNRouter().k_candidates, 50, 500}))
    truth = both.scores.astype(np.float64)

    def loss(k: int) -> float:
        z = knn_logits(votes[k], k)
        return float(np.mean(np.logaddexp(0.0, z) - truth * z))

    best = min(votes, key=lambda k: (loss(k), k))
    assert stack.mix_k == best and best in stack.ks, (stack, {k: loss(k) for k in votes})
    assert loss(best) < loss(500) and loss(best) < loss(5)
