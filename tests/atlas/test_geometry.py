"""The atlas's numpy core on planted pools whose answers are known by construction."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from locus.atlas import (
    agreement_matrix,
    budget_cover,
    choose_threshold,
    choose_weight,
    distance_matrix,
    draw_fingerprints,
    family_agreement,
    geometry_report,
    hierarchical,
    identify,
    k_center,
    k_medoids,
    kmeans,
    nearest,
    neighbours_kept,
    portfolio_accuracy,
    predicted_agreement,
    project,
    proxy_retention,
)
from locus.atlas.agreement import agreements, pair_threshold, shared_matches
from locus.atlas.clusters import best_k
from locus.atlas.fingerprint import fingerprint_report, profile_loglik, task_rates
from locus.atlas.portfolio import random_budget_portfolios, random_portfolios
from locus.atlas.search import capability_recall, parse_profile, synthesise_evidence
from locus.errors import LocusInputError

GROUPS = 4
PER_GROUP = 5


def planted_embeddings(seed: int = 0, spread: float = 0.15) -> tuple[np.ndarray, list[int]]:
    """GROUPS tight groups of PER_GROUP LLMs around far-apart centres (dim 16)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(GROUPS, 16)) * 3
    groups = [g for g in range(GROUPS) for _ in range(PER_GROUP)]
    points = centres[groups] + spread * rng.normal(size=(len(groups), 16))
    return points, groups


def planted_scores(seed: int = 0, queries: int = 400) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Scores where LLMs of one group share a per-query answer pattern (agreement ~0.9 inside
    a group), plus the P(correct) a good predictor would give."""
    rng = np.random.default_rng(seed)
    groups = [g for g in range(GROUPS) for _ in range(PER_GROUP)]
    skill = rng.uniform(0.2, 0.9, size=(queries, GROUPS))  # (n_queries, groups)
    pattern = rng.random((queries, GROUPS)) < skill
    flips = rng.random((queries, len(groups))) < 0.05
    scores = np.where(flips, ~pattern[:, groups], pattern[:, groups]).astype(np.float64)
    proba = np.clip(skill[:, groups] + 0.02 * rng.normal(size=scores.shape), 0.01, 0.99)
    return scores, proba, groups


def test_distances_and_nearest_neighbours_stay_in_the_group() -> None:
    points, groups = planted_embeddings()
    for metric in ("euclidean", "cosine"):
        d = distance_matrix(points, metric)
        assert d.shape == (20, 20) and np.allclose(d, d.T) and np.allclose(np.diag(d), 0)
        for i in range(len(points)):
            [j] = nearest(d, i, 1)
            assert groups[j] == groups[i]
    with pytest.raises(LocusInputError, match="expected one of"):
        distance_matrix(points, "manhattan")
    d = distance_matrix(points)
    allowed = np.array([g != 0 for g in groups])
    assert all(groups[j] != 0 for j in nearest(d, 0, 3, allowed=allowed))


def test_agreement_counts_only_shared_queries() -> None:
    scores = np.array([[1, 1, np.nan], [0, 1, 1], [1, 0, 1], [0, 0, np.nan]], dtype=float)
    agreement, shared = agreement_matrix(scores)
    assert shared.tolist() == [[4, 4, 2], [4, 4, 2], [2, 2, 2]]
    assert agreement[0, 1] == pytest.approx(0.5)  # rows 0 and 3 agree, 1 and 2 do not
    assert agreement[0, 2] == pytest.approx(0.5)  # rows 1, 2 shared: 0 vs 1, 1 vs 1
    graded = np.array([[0.2, 0.6], [1.0, 1.0]])
    assert agreement_matrix(graded)[0][0, 1] == pytest.approx(0.8)  # 1 - mean |a - b|


def test_distance_tracks_disagreement_on_a_planted_pool() -> None:
    points, _ = planted_embeddings()
    scores, _, _ = planted_scores()
    agreement, shared = agreement_matrix(scores)
    report = geometry_report(distance_matrix(points), agreement, shared)
    assert report.pairs == 190
    # two levels (twins, strangers): Pearson sees it best; ranks among strangers are noise
    assert report.pearson > 0.8 and report.spearman > 0.35 and report.kendall > 0.25
    curve = report.neighbour_agreement
    assert len(curve) == 19
    assert curve[0] > 0.85 > report.mean_agreement  # inside the group vs any pair
    assert curve[0] > curve[-1]
    # shuffled embeddings no longer track it: the test can fail
    shuffled = np.random.default_rng(1).permutation(points)
    assert geometry_report(distance_matrix(shuffled), agreement, shared).pearson < 0.5


def test_clusters_recover_the_planted_groups() -> None:
    points, groups = planted_embeddings()
    names = [f"family-{g}" for g in groups]
    for clustering in (hierarchical(points, k=GROUPS), kmeans(points, GROUPS)):
        assert clustering.k == GROUPS
        assert family_agreement(clustering.labels, names) == pytest.approx(1.0)
    assert best_k(points, metric="euclidean") == GROUPS
    cut = hierarchical(points, threshold=1.5, metric="euclidean")
    assert family_agreement(cut.labels, names) == pytest.approx(1.0)
    assert cut.linkage is not None and cut.linkage.shape == (19, 4)
    unknown: list[str | None] = [None] * 10 + names[10:]
    assert family_agreement(cut.labels, unknown) == pytest.approx(1.0)
    with pytest.raises(LocusInputError, match="exactly one"):
        hierarchical(points)
    with pytest.raises(LocusInputError, match="expected 1 to 20"):
        kmeans(points, 21)


def test_projections_keep_the_groups_together() -> None:
    points, _ = planted_embeddings()
    for method in ("pca", "tsne"):
        xy = project(points, method)
        assert xy.shape == (20, 2) and np.abs(xy).max() == pytest.approx(1.0)
        assert neighbours_kept(points, xy, k=4, metric="euclidean") > 0.9
        assert np.array_equal(xy, project(points, method))  # seeded
    with pytest.raises(LocusInputError, match="expected one of"):
        project(points, "umap")


def test_k_center_covers_every_group_before_repeating_one() -> None:
    points, groups = planted_embeddings()
    d = distance_matrix(points)
    for first in (None, 0, 7, 19):
        picked = k_center(d, GROUPS + 2, first=first)
        assert sorted(groups[i] for i in picked[:GROUPS]) == list(range(GROUPS))
        assert len(set(picked)) == len(picked)
    medoids = k_medoids(d, GROUPS)
    assert sorted(groups[i] for i in medoids) == list(range(GROUPS))
    anchored = k_medoids(d, GROUPS, fixed=[7])
    assert 7 in anchored and sorted(groups[i] for i in anchored) == list(range(GROUPS))
    # each medoid is its group's most central member
    for m in medoids:
        members = [i for i, g in enumerate(groups) if g == groups[m]]
        assert m == members[int(np.argmin(d[np.ix_(members, members)].sum(axis=1)))]


def test_budget_cover_respects_the_budget_and_says_when_nothing_fits() -> None:
    points, groups = planted_embeddings()
    d = distance_matrix(points)
    costs = np.array([10.0 if i % PER_GROUP == 0 else 100.0 for i in range(20)])
    chosen = budget_cover(d, costs, 40.0)
    assert chosen.spent <= 40.0
    assert sorted(groups[i] for i in chosen.members) == list(range(GROUPS))  # the cheap ones
    assert all(costs[i] == 10.0 for i in chosen.members)
    tight = budget_cover(d, costs, 25.0)
    assert tight.spent <= 25.0 and len(tight.members) == 2
    assert tight.coverage > chosen.coverage
    around = budget_cover(d, costs, 110.0, first=3)  # an expensive first pick, then cheap ones
    assert around.members[0] == 3 and around.spent <= 110.0 and len(around.members) == 2
    scores, proba, _ = planted_scores()
    mean, sd, size = random_budget_portfolios(proba, scores, costs, 40.0, draws=20)
    assert 1 <= size <= 4 and 0 < mean < 1 and sd >= 0
    with pytest.raises(LocusInputError, match="no LLM fits a budget of 5"):
        budget_cover(d, costs, 5.0)
    with pytest.raises(LocusInputError, match="no LLM has a cost"):
        budget_cover(d, np.full(20, np.nan), 5.0)


def test_a_covering_portfolio_routes_like_the_pool_and_beats_random_ones() -> None:
    points, _ = planted_embeddings()
    scores, proba, _ = planted_scores()
    full = portfolio_accuracy(proba, scores, range(20))
    covering = portfolio_accuracy(proba, scores, k_center(distance_matrix(points), GROUPS))
    assert covering >= full - 0.03
    mean, sd = random_portfolios(proba, scores, GROUPS, draws=50)
    assert covering > mean and sd > 0
    one_group = portfolio_accuracy(proba, scores, [0, 1, 2, 3])
    assert one_group < covering - 0.05
    with pytest.raises(LocusInputError, match="at least one"):
        portfolio_accuracy(proba, scores, [])


def test_proxy_retention_with_group_twins_is_high() -> None:
    points, _ = planted_embeddings()
    scores, proba, groups = planted_scores()
    retention = proxy_retention(proba, scores, distance_matrix(points))
    assert retention.queries == 400
    assert retention.nearest_retention > 0.9  # a twin answers alike
    assert 0 < retention.next_best_retention <= 1.2
    assert retention.as_dict()["better"] in ("nearest", "next-best")
    # a far LLM as the "nearest" loses much more: the measure can fail
    far = -distance_matrix(points)
    assert proxy_retention(proba, scores, far).nearest_retention < retention.nearest_retention
    agree = predicted_agreement(proba)
    same = [(i, j) for i in range(20) for j in range(20) if i != j and groups[i] == groups[j]]
    other = [(i, j) for i in range(20) for j in range(20) if groups[i] != groups[j]]
    assert np.mean([agree[p] for p in same]) > np.mean([agree[p] for p in other])


def _skill_embedder(vectors_by_task: np.ndarray) -> object:
    """A real substitute for the LLM encoder: an LLM's embedding is its mean score per task
    (the task read off the query vector's nearest task centre)."""

    def embed(evidence: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        out = []
        for vectors, scores in evidence:
            task = np.argmax(vectors @ vectors_by_task.T, axis=1)
            out.append([scores[task == t].mean() if (task == t).any() else 0.5 for t in range(3)])
        return np.asarray(out)

    return embed


def _skill_pool(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """300 queries of 3 tasks; 6 LLMs with distinct per-task skills (two are twins)."""
    rng = np.random.default_rng(seed)
    centres = np.eye(3, 8)
    tasks = np.repeat(np.arange(3), 100)
    vectors = centres[tasks] + 0.05 * rng.normal(size=(300, 8))
    skills = np.array(
        [[0.9, 0.1, 0.5], [0.1, 0.9, 0.5], [0.5, 0.5, 0.9], [0.9, 0.9, 0.1], [0.3, 0.3, 0.3],
         [0.9, 0.1, 0.5]]
    )  # fmt: skip
    scores = (rng.random((300, 6)) < skills[:, tasks].T).astype(np.float32)
    return vectors.astype(np.float32), scores, tasks, centres


def test_fingerprints_match_planted_twins_and_reject_the_others() -> None:
    vectors, scores, tasks, centres = _skill_pool()
    embed = _skill_embedder(centres)
    ids = ["a", "b", "c", "d", "e"]  # five distinct LLMs; "a-twin" (column 5) is a's twin
    calibration = draw_fingerprints(scores[:, :5], vectors, tasks, ids, embed, k=64, seed=0)  # type: ignore[arg-type]
    weight = choose_weight(calibration)
    same, different = calibration.same_and_different(weight)
    threshold = choose_threshold(same, different)
    assert np.median(same) < threshold < different.min()  # no stranger within: 1% cap
    evaluation = draw_fingerprints(scores[:, :5], vectors, tasks, ids, embed, k=64, seed=1)  # type: ignore[arg-type]
    report = fingerprint_report(evaluation, weight, threshold)
    assert report["identification"] == 1.0 and report["true_match"] >= 0.8
    assert report["false_match"] <= 1 / 20
    # a's twin, from scores none of the references saw, is called a and nothing else
    rows = evaluation.probe_rows[0]
    probe = embed([(vectors[rows], scores[rows, 5])])[0]  # type: ignore[operator]
    values = evaluation.score_probe(probe, tasks[rows], scores[rows, 5], weight)
    matches = identify(values, ids, threshold, top=3)
    assert matches[0].llm_id == "a" and matches[0].same
    assert not any(m.same for m in matches[1:])
    with pytest.raises(LocusInputError, match="at least 2 LLMs"):
        draw_fingerprints(scores, vectors, tasks, [*ids, "a-twin"], embed, k=200, seed=0)  # type: ignore[arg-type]


def test_the_per_task_likelihood_identifies_where_the_embedding_is_blind() -> None:
    """An encoder that embeds every LLM alike carries no identity: the weight chosen on the
    calibration draw drops it and the per-task likelihood alone finds each LLM."""
    vectors, scores, tasks, _ = _skill_pool()

    def blind(evidence: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        return np.ones((len(evidence), 4)) + 1e-3 * np.arange(len(evidence))[:, None]

    ids = list("abcde")
    calibration = draw_fingerprints(scores[:, :5], vectors, tasks, ids, blind, k=64, seed=0)
    assert calibration.identification(float("inf")) <= 0.4  # the embedding alone: chance
    weight = choose_weight(calibration)
    assert weight == 0.0
    evaluation = draw_fingerprints(scores[:, :5], vectors, tasks, ids, blind, k=64, seed=1)
    assert evaluation.identification(weight) == 1.0
    # graded scores (a judge's preference) are read as fractional successes
    graded = np.clip(scores[:, :5] * 0.8 + 0.1, 0, 1)
    draw = draw_fingerprints(graded, vectors, tasks, ids, blind, k=64, seed=2)
    assert draw.identification(0.0) == 1.0
    assert task_rates(graded, tasks, 3).shape == (5, 3)
    assert profile_loglik(task_rates(graded, tasks, 3), tasks[:4], graded[:4, 0]).shape == (5,)


def test_shared_queries_are_compared_with_actual_scores() -> None:
    rng = np.random.default_rng(0)
    pool = rng.random((120, 8)).round(1)  # 8 LLMs with graded scores on 120 queries
    pool[:, 7] = np.clip(pool[:, 6] + rng.normal(0, 0.02, 120), 0, 1)  # 6 and 7: near twins
    pool[:60, 3] = np.nan  # LLM 3 scored half the queries
    ids = [f"llm-{j}" for j in range(8)]
    matches, threshold = shared_matches(pool[:, 2], pool, ids, top=3)  # its own scores
    assert matches[0].llm_id == "llm-2" and matches[0].agreement == pytest.approx(1.0)
    assert matches[0].same and not matches[1].same
    assert threshold == pytest.approx(pair_threshold(pool)) and threshold < 0.99
    # a re-run that differs on a tenth of the queries is still found first
    rerun = pool[:, 4].copy()
    rerun[::10] = 1.0 - rerun[::10]
    assert shared_matches(rerun, pool, ids, top=1)[0][0].llm_id == "llm-4"
    # twins in the pool: a re-run of one is nearest to the pair, and no verdict can tell
    # which (its agreement with its own LLM is below the twins' with each other)
    rerun = np.clip(pool[:, 6] + rng.normal(0, 0.03, 120), 0, 1)
    twin, _ = shared_matches(rerun, pool, ids, top=2)
    assert {m.llm_id for m in twin} == {"llm-6", "llm-7"} and not twin[0].same
    # too few shared queries: no agreement, listed last
    few = np.full(120, np.nan)
    few[60:70] = pool[60:70, 3]
    agree, counts = agreements(few, pool)
    assert np.isnan(agree).all() and counts[3] == 10
    last, _ = shared_matches(pool[:, 0], np.where(np.arange(120)[:, None] < 100, pool, np.nan), ids)
    assert last[0].llm_id == "llm-0" and last[0].shared == 100


def test_threshold_separates_same_from_different() -> None:
    # at 0.225: 2 of 3 same within, both different beyond (balanced accuracy 0.83)
    same, different = np.array([0.1, 0.2, 0.3]), np.array([0.25, 0.8])
    assert choose_threshold(same, different, max_false_match=None) == pytest.approx(0.225)
    # at most 1 in 4 strangers called the same: the largest threshold with one of them inside
    same, different = np.array([0.1, 0.2, 0.3, 0.6]), np.array([0.25, 0.7, 0.8, 0.9])
    assert choose_threshold(same, different, max_false_match=0.25) == pytest.approx(0.65)
    assert choose_threshold(same, different, max_false_match=0.0) == pytest.approx(0.225)
    assert choose_threshold(np.array([0.1, 0.2]), np.array([0.5, 0.6])) == pytest.approx(0.35)
    with pytest.raises(LocusInputError):
        choose_threshold(np.array([]), np.array([1.0]))


def test_capability_search_retrieves_the_planted_specialist() -> None:
    vectors, scores, tasks, centres = _skill_pool()
    embed = _skill_embedder(centres)
    names = np.array(["math", "law", "code"])[tasks]
    references = embed([(vectors, scores[:, j]) for j in range(5)])  # type: ignore[operator]
    rows, synthetic = synthesise_evidence(
        {"math": 0.1, "law": 0.9, "code": 0.5}, names, 600, seed=0
    )
    assert len(rows) == 600 and synthetic[names[rows] == "law"].mean() == pytest.approx(0.9)
    uneven = np.array(["math"] * 30 + ["law"] * 10)
    pool_rows, _ = synthesise_evidence({"math": 0.5, "law": 0.5}, uneven, 100, seed=0)
    equal_rows, _ = synthesise_evidence(
        {"math": 0.5, "law": 0.5}, uneven, 100, seed=0, shares_by="equal"
    )
    assert (uneven[pool_rows] == "law").sum() == 25 and (uneven[equal_rows] == "law").sum() == 50
    probe = embed([(vectors[rows], synthetic)])[0]  # type: ignore[operator]
    assert np.argmin(np.linalg.norm(references - probe, axis=1)) == 1  # "b", the law specialist
    profiles = [
        {t: float(scores[names == t, j].mean()) for t in ("math", "law", "code")} for j in range(5)
    ]
    recall = capability_recall(profiles, names, vectors, references, embed, n=600, ks=(1, 2))  # type: ignore[arg-type]
    assert recall["recall"]["1"] == pytest.approx(1.0)
    assert parse_profile("math=0.8, law=0.3", ["math", "law"]) == {"math": 0.8, "law": 0.3}
    for bad, message in [
        ("physics=0.5", "the pool's tasks are: law, math"),
        ("math=1.5", "rate in"),
        ("math", "rate in"),
        (" , ", "empty profile"),
    ]:
        with pytest.raises(LocusInputError, match=message):
            parse_profile(bad, ["math", "law"])


def test_neighbours_kept_is_not_trivially_whole_on_a_small_pool() -> None:
    """On 8 LLMs a neighbourhood of 7 is the whole pool: any map would keep 100%. The size
    measured is at most half the others, so a map that scrambles the pool shows it."""
    from locus.atlas.projection import neighbour_k

    assert [neighbour_k(n) for n in (1, 2, 3, 8, 21, 29)] == [0, 1, 1, 3, 10, 10]
    rng = np.random.default_rng(0)
    points = rng.normal(size=(8, 16))
    scrambled = rng.normal(size=(8, 2))
    assert neighbours_kept(points, scrambled, k=10, metric="euclidean") < 0.9
    assert neighbours_kept(points, points, k=10, metric="euclidean") == 1.0


def test_a_retention_above_everything_is_said_plainly() -> None:
    from locus.cli.atlas_commands import _kept_words

    assert _kept_words(0.951) == "keeps 95.1%"
    assert _kept_words(1.051) == (
        "the stand-ins score 5.1% higher than the routed LLMs on these queries: the router's "
        "own choices are not the best here"
    )


def test_the_png_map_names_every_llm_without_overlap_in_the_page_colours() -> None:
    """The issue's pool on the PNG: every LLM named beside its point or numbered (its number
    keyed to its name at the side), no two labels overlapping, none outside the map; the
    colours are the page's legend, the numbers the page's."""
    from matplotlib.colors import to_rgb

    from locus.atlas.html import atlas_html
    from locus.atlas.plots import llm_numbers, map_figure
    from locus.palette import family_colour
    from tests.test_atlas_html import MMLU_PRO_FAMILIES, embedded_payload, pool_payload

    payload = embedded_payload(atlas_html(pool_payload(MMLU_PRO_FAMILIES)))
    ids = [llm["llm_id"] for llm in payload["llms"]]
    coords = np.array([payload["projections"]["t-SNE"][llm] for llm in ids])
    families = [llm["family"] for llm in payload["llms"]]
    accuracy = np.array([llm["accuracy"] for llm in payload["llms"]])
    colours = payload["colours"]["family"]
    figure = map_figure(coords, ids, families, accuracy, colours=colours, llm_ids=ids)
    try:
        axis, key = figure.axes
        renderer = figure.canvas.get_renderer()
        frame = axis.get_window_extent(renderer)
        # the labels beside points (the line under the map is placed on the axes' frame)
        labels = [t for t in axis.texts if t.get_transform() is not axis.transAxes]
        boxes = [t.get_window_extent(renderer) for t in labels]
        assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[:i] if a.overlaps(b)], (
            "labels overlap"
        )
        assert all(frame.contains(b.x0, b.y0) and frame.contains(b.x1, b.y1) for b in boxes)
        numbers = dict(zip(ids, llm_numbers(ids), strict=True))
        texts = {t.get_text() for t in labels}
        named = texts & set(ids)
        numbered = {llm for llm, n in numbers.items() if str(n) in texts}
        assert named | numbered == set(ids)
        keyed = " ".join(t.get_text() for t in key.texts)
        assert all(f"{numbers[llm]}  {llm}" in keyed for llm in numbered - named)
        drawn = {
            tuple(np.round(c.get_facecolor()[0][:3], 3))
            for c in axis.collections
            if len(c.get_offsets())
        }
        expected = {tuple(np.round(to_rgb(family_colour(f)), 3)) for f in set(families)}
        assert drawn == expected
    finally:
        from locus._plotting import pyplot

        pyplot().close(figure)


def test_map_numbers_are_the_lists_natural_order() -> None:
    from locus.atlas.plots import llm_numbers

    names = ["Yi-34B", "yi-6b", "Llama-2-13b", "Llama-2-7b", "llama-2-70b"]
    assert llm_numbers(names) == [5, 4, 2, 1, 3]
