"""The task vote (each LLM's rate on the tasks of a query's nearest training queries): its
rates, the kNN router's search for it, its place in the stack, saving and old artifacts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from locus.errors import LocusInputError
from locus.metrics import log_loss
from locus.routing import Evidence, KNNRouter, load_router
from locus.routing.stack import Stack, fit_stack
from locus.routing.task_reader import TaskReader
from locus.routing.task_vote import TASK_K, TaskVote


def test_rates_are_smoothed_per_task_and_queries_without_a_task_vote_the_overall_mean() -> None:
    scores = np.array([[1, 0], [1, np.nan], [0, 1], [0, 1], [1, 1]], dtype=np.float32)
    vote = TaskVote.fit(scores, ("a", "a", "b", "b", None))
    assert vote is not None and vote.names == ("a", "b")
    assert vote.codes.tolist() == [0, 0, 1, 1, 2]
    overall = np.array([3 / 5, 3 / 4])
    np.testing.assert_allclose(vote.rates[0], [(2 + 2 * overall[0]) / 4, (0 + 2 * overall[1]) / 3])
    np.testing.assert_allclose(vote.rates[1], (np.array([0, 2]) + 2 * overall) / 4)
    np.testing.assert_allclose(vote.rates[2], overall)
    # a query whose neighbours are half a, half b; one whose neighbours have no task
    np.testing.assert_allclose(vote.shares(np.array([[0, 2], [4, 4]])), [[0.5, 0.5, 0], [0, 0, 1]])
    np.testing.assert_allclose(vote.proba(np.array([[4, 4]]))[0], overall, rtol=1e-6)
    assert TaskVote.fit(scores, ("a",) * 5) is None  # one task: nothing to tell apart


def _pool(seed: int = 0) -> tuple[Evidence, np.ndarray, tuple[str, ...]]:
    """Three tasks in three regions of the vector space; each LLM good at one of them."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, 12)) * 3
    task = rng.integers(3, size=900)
    vectors = (centres[task] + rng.normal(size=(900, 12))).astype(np.float32)
    skill = np.full((3, 3), 0.3) + 0.6 * np.eye(3)
    scores = (rng.random((900, 3)) < skill[task]).astype(np.float32)
    scores[rng.random(scores.shape) < 0.2] = np.nan
    names = tuple(f"task-{t}" for t in task)
    return Evidence(vectors[:800], scores[:800], ("a", "b", "c"), names[:800]), vectors[800:], names


@pytest.mark.parametrize("search", ["exact", "graph"])
def test_the_knn_router_votes_with_the_tasks_of_the_nearest_training_queries(search: str) -> None:
    train, queries, _ = _pool()
    router = KNNRouter(k=20, search=search).fit(train)
    assert router.has_task_vote
    found = router.votes(queries, [20, 50], tasks=True)
    voted = found.tasks
    assert voted is not None and sorted(found.by_k) == [20, 50]
    np.testing.assert_array_equal(found.by_k[20], router.votes(queries, [20]).by_k[20])
    unit = train.vectors / np.linalg.norm(train.vectors, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    nearest = np.argsort(-(q @ unit.T), axis=1)[:, :TASK_K]
    # the specialist of the region's task has the highest vote
    truth_task = [int(np.bincount(router.task_vote_.codes[row]).argmax()) for row in nearest]
    assert (voted.argmax(axis=1) == np.asarray(truth_task)).mean() > 0.95
    # tasks drawn apart from the vectors: the vote is that of exactly the TASK_K nearest
    mixed = tuple(np.random.default_rng(1).choice(["x", "y", "z"], size=len(train.tasks)))
    router = KNNRouter(k=20, search=search).fit(
        Evidence(train.vectors, train.scores, train.llm_ids, mixed)
    )
    voted = router.votes(queries, [20, 50], tasks=True).tasks
    np.testing.assert_allclose(voted, router.task_vote_.proba(nearest), atol=1e-6)
    without = KNNRouter(k=20).fit(Evidence(train.vectors, train.scores, train.llm_ids))
    assert not without.has_task_vote
    with pytest.raises(LocusInputError, match="without tasks"):
        without.votes(queries, [20], tasks=True)


def test_the_task_vote_is_saved_and_routers_saved_before_it_load_without(tmp_path: Path) -> None:
    train, queries, _ = _pool()
    router = KNNRouter(k=20).fit(train)
    router.save(tmp_path / "knn")
    loaded = load_router(tmp_path / "knn")
    assert isinstance(loaded, KNNRouter) and loaded.has_task_vote
    a, b = loaded.votes(queries, [50], tasks=True), router.votes(queries, [50], tasks=True)
    np.testing.assert_array_equal(a.by_k[50], b.by_k[50])
    assert a.tasks is not None and b.tasks is not None
    np.testing.assert_array_equal(a.tasks, b.tasks)
    description = json.loads((tmp_path / "knn" / "router.json").read_text())
    description.pop("task_names")
    (tmp_path / "knn" / "router.json").write_text(json.dumps(description))
    old = load_router(tmp_path / "knn")
    assert isinstance(old, KNNRouter) and not old.has_task_vote
    # an onboarded LLM (no tasks of its own) votes its mean in every task
    router.add_llm("newcomer", queries[:40], np.r_[np.ones(30), np.zeros(10)])
    voted = router.votes(queries, [20], tasks=True).tasks
    np.testing.assert_allclose(voted[:, -1], 0.75, rtol=1e-6)
    assert len(router.task_vote_.codes) == len(router.vectors_)


def test_the_stack_weighs_the_task_vote_where_it_tells_which_llm() -> None:
    rng = np.random.default_rng(2)
    n, m = 3000, 4
    task = rng.integers(4, size=n)
    skill = np.eye(m)[task] * 2.0 - 1.0  # each LLM good at one task
    truth = (rng.random((n, m)) < 1 / (1 + np.exp(-skill))).astype(float)
    locus = np.zeros((n, m))  # LOCUS knows nothing here
    noise = {50: rng.uniform(0.3, 0.7, (n, m))}  # nor do the kNN votes
    task_votes = 1 / (1 + np.exp(-skill * 0.8))
    stack = fit_stack(locus, noise, truth, ks=(50,), mix_k=50, task_votes=task_votes)
    assert stack.tasks and stack.part_names() == ["locus", "knn50", "tasks"]
    assert stack.deviation_weights[2] > 0.8 > abs(stack.deviation_weights[1])
    routed = stack.logits(locus, noise, task_votes).argmax(axis=1)
    assert (routed == task).mean() > 0.99
    assert Stack.from_dict(stack.as_dict()) == stack
    with pytest.raises(LocusInputError, match="pass the task votes"):
        stack.logits(locus, noise)
    with pytest.raises(LocusInputError, match="needs 3 deviation weights"):
        Stack(ks=(50,), deviation_weights=(1.0, 0.0), mix_weight=1.0, mix_k=50, tasks=True)
    saved_before = {k: v for k, v in stack.as_dict().items() if k != "tasks"}
    saved_before["deviation_weights"] = saved_before["deviation_weights"][:2]
    assert not Stack.from_dict(saved_before).tasks


def test_a_given_task_reads_that_tasks_rates_and_an_unknown_one_the_neighbours() -> None:
    train, queries, _ = _pool()
    router = KNNRouter(k=20).fit(train)
    read = router.votes(queries[:3], [20], tasks=True).tasks
    given = router.votes(
        queries[:3], [20], tasks=True, given_tasks=["task-2", None, "never-seen"]
    ).tasks
    vote = router.task_vote_
    np.testing.assert_array_equal(given[0], vote.rates[vote.names.index("task-2")])
    np.testing.assert_array_equal(given[1:], read[1:])  # not known: read from the text
    assert given[0].argmax() == 2  # c, the specialist of task 2
    with pytest.raises(LocusInputError, match="one per query"):
        vote.given(["task-0"], read)


def _kinds_pool(seed: int = 0) -> tuple[Evidence, Evidence, Evidence]:
    """Tasks that are kinds of request, not topics: each query's vector is mostly its topic
    (8 topics, far apart) and a little its kind (3 kinds, along their own directions), so its
    nearest queries share its topic more often than its kind; each LLM is good at one kind.
    Train, validation and test evidence."""
    rng = np.random.default_rng(seed)
    n, dims = 1500, 64
    topics = rng.normal(size=(8, dims)) * 4.0
    kinds = np.eye(dims)[:3] * 1.5
    topic, kind = rng.integers(8, size=n), rng.integers(3, size=n)
    vectors = (topics[topic] + kinds[kind] + rng.normal(size=(n, dims))).astype(np.float32)
    skill = np.full((3, 3), 0.25) + 0.65 * np.eye(3)
    scores = (rng.random((n, 3)) < skill[kind]).astype(np.float32)
    names = tuple(f"kind-{k}" for k in kind)
    parts = (slice(0, 1000), slice(1000, 1200), slice(1200, n))
    return tuple(  # type: ignore[return-value]
        Evidence(vectors[p], scores[p], ("a", "b", "c"), names[p]) for p in parts
    )


def test_a_classifier_reads_the_task_where_the_nearest_queries_do_not() -> None:
    train, val, test = _kinds_pool()
    router = KNNRouter(k=20).fit(train, val)
    vote = router.task_vote_
    assert vote is not None and vote.reader is not None and vote.reader.share >= 0.5
    plain = KNNRouter(k=20).fit(train)  # no validation queries: the neighbours alone
    assert plain.task_vote_ is not None and plain.task_vote_.reader is None
    truth = np.array([int(t[-1]) for t in test.tasks])
    read = (router.task_shares(test.vectors)[:, :3].argmax(axis=1) == truth).mean()
    by_neighbours = (plain.task_shares(test.vectors)[:, :3].argmax(axis=1) == truth).mean()
    assert read > by_neighbours + 0.08
    # the task vote routes more queries to their kind's LLM, and reads the cells better
    voted = router.votes(test.vectors, [20], tasks=True).tasks
    plain_voted = plain.votes(test.vectors, [20], tasks=True).tasks
    routed, plain_routed = voted.argmax(axis=1), plain_voted.argmax(axis=1)
    assert (routed == truth).mean() > (plain_routed == truth).mean() + 0.08
    assert log_loss(voted, test.scores) < log_loss(plain_voted, test.scores) - 0.01
    # given the task, the table itself, whichever way the text is read
    given = router.votes(test.vectors, [20], tasks=True, given_tasks=test.tasks).tasks
    np.testing.assert_allclose(given, vote.rates[truth])


def test_a_reader_that_reads_no_better_than_the_neighbours_is_not_kept() -> None:
    train, val, _ = _kinds_pool()
    codes = np.array([int(t[-1]) for t in train.tasks])
    val_codes = np.array([int(t[-1]) for t in val.tasks])
    sure = np.eye(4)[val_codes]  # neighbours that name every validation task
    assert TaskReader.fit(train.vectors, codes, 3, val.vectors, val_codes, sure) is None
    vague = np.full((len(val_codes), 4), 0.25)  # neighbours that name none
    reader = TaskReader.fit(train.vectors, codes, 3, val.vectors, val_codes, vague)
    assert reader is not None and reader.share > 0
    # no validation query with a task, or one task: nothing to choose on
    none = np.full(len(val_codes), 3)
    assert TaskReader.fit(train.vectors, codes, 3, val.vectors, none, vague) is None
    one = np.zeros_like(codes)
    assert TaskReader.fit(train.vectors, one, 3, val.vectors, val_codes, vague) is None


def test_the_reader_is_saved_with_the_router(tmp_path: Path) -> None:
    train, val, test = _kinds_pool(1)
    router = KNNRouter(k=20).fit(train, val)
    assert router.task_vote_ is not None and router.task_vote_.reader is not None
    router.save(tmp_path / "knn")
    loaded = load_router(tmp_path / "knn")
    assert isinstance(loaded, KNNRouter) and loaded.task_vote_ is not None
    saved, kept = loaded.task_vote_.reader, router.task_vote_.reader
    assert saved is not None and saved.share == kept.share
    np.testing.assert_array_equal(saved.weights, kept.weights)
    np.testing.assert_array_equal(saved.bias, kept.bias)
    np.testing.assert_array_equal(
        loaded.votes(test.vectors, [20], tasks=True).tasks,
        router.votes(test.vectors, [20], tasks=True).tasks,
    )
    # an onboarded LLM joins the vote; the reader stays, and reads the others' tasks alike
    before = router.votes(test.vectors, [20], tasks=True).tasks
    router.add_llm("newcomer", test.vectors[:40], np.r_[np.ones(30), np.zeros(10)])
    assert router.task_vote_.reader is kept
    after = router.votes(test.vectors, [20], tasks=True).tasks
    np.testing.assert_allclose(after[:, :3], before, rtol=1e-6)
