"""Training on a planted pool: determinism, routing quality, onboarding of unseen LLMs."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

from locus.errors import LocusInputError
from locus.nn import NetworkConfig, TrainingConfig, TrainingResult, embed, train

if TYPE_CHECKING:
    from tests.nn.conftest import PlantedPool

MakeConfig = Callable[..., TrainingConfig]


def routing_accuracy(logits: np.ndarray, scores: np.ndarray) -> float:
    observed = ~np.isnan(scores)
    chosen = np.where(observed, logits, -np.inf).argmax(axis=1)
    return float(scores[np.arange(len(chosen)), chosen].mean())


def test_config_round_trips_and_rejects_unknown_fields() -> None:
    config = TrainingConfig(anchors=256, seed=3)
    assert TrainingConfig.from_dict(config.to_dict()) == config
    with pytest.raises(LocusInputError, match="unknown TrainingConfig fields"):
        TrainingConfig.from_dict({"anchor": 10})
    flat = {**config.to_dict(), **config.network.to_dict()}  # format-1 artifacts were flat
    del flat["network"]
    assert TrainingConfig.from_dict(flat) == config
    with pytest.raises(LocusInputError, match="divisible"):
        NetworkConfig(dim=30, heads=4)
    with pytest.raises(LocusInputError, match="min_evidence"):
        TrainingConfig(min_evidence=64, anchors=32)
    with pytest.raises(LocusInputError, match="llms_per_step"):
        TrainingConfig(llms_per_step=0)


def test_rejects_bad_inputs(planted_pool: PlantedPool, make_config: MakeConfig) -> None:
    pool = planted_pool
    args = (pool.query_vectors, pool.scores, pool.train_idx, pool.val_idx, make_config())
    with pytest.raises(LocusInputError, match="share"):
        train(pool.query_vectors, pool.scores, pool.train_idx, pool.train_idx[:5], make_config())
    bad_scores = pool.scores.copy()
    bad_scores[0, 0] = 2.0
    with pytest.raises(LocusInputError, match=r"\[0, 1\]"):
        train(args[0], bad_scores, *args[2:])
    unobserved = pool.scores.copy()
    unobserved[pool.train_idx, 4] = np.nan
    with pytest.raises(LocusInputError, match=r"LLM columns \[4\]"):
        train(args[0], unobserved, *args[2:])
    with pytest.raises(LocusInputError, match="rows of query_vectors"):
        train(args[0], pool.scores[:-1], *args[2:])


def test_same_seed_gives_identical_weights(
    planted_pool: PlantedPool, make_config: MakeConfig
) -> None:
    pool = planted_pool
    global_state = torch.random.get_rng_state()

    def run(seed: int) -> TrainingResult:
        config = make_config(max_steps=15, eval_every=5, seed=seed)
        return train(pool.query_vectors, pool.scores, pool.train_idx, pool.val_idx, config)

    first, second, other = run(0), run(0), run(1)
    for name, tensor in first.encoder.state_dict().items():
        assert torch.equal(tensor, second.encoder.state_dict()[name]), name
    for name, tensor in first.predictor.state_dict().items():
        assert torch.equal(tensor, second.predictor.state_dict()[name]), name
    np.testing.assert_array_equal(first.llm_embeddings, second.llm_embeddings)
    assert not torch.equal(first.encoder.token.weight, other.encoder.token.weight)
    assert torch.equal(torch.random.get_rng_state(), global_state)  # caller's RNG untouched


def test_trains_with_deterministic_algorithms_on_two_threads_and_restores_the_mode(
    planted_pool: PlantedPool, make_config: MakeConfig
) -> None:
    """On more than one thread the backward of indexing by a tensor accumulates in a
    thread-dependent order unless torch's deterministic algorithms are on: they are while
    training (seen from the progress callback), and the caller's setting comes back after."""
    pool = planted_pool
    modes: list[bool] = []
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:

        def run() -> TrainingResult:
            return train(
                pool.query_vectors, pool.scores, pool.train_idx, pool.val_idx,
                make_config(max_steps=8, eval_every=4),
                progress=lambda *_: modes.append(torch.are_deterministic_algorithms_enabled()),
            )  # fmt: skip

        first, second = run(), run()
    finally:
        torch.set_num_threads(previous)
    assert modes and all(modes)
    assert not torch.are_deterministic_algorithms_enabled()
    np.testing.assert_array_equal(first.llm_embeddings, second.llm_embeddings)


def test_result_is_consistent(planted_pool: PlantedPool, trained: TrainingResult) -> None:
    pool = planted_pool
    assert not trained.encoder.training and not trained.predictor.training
    assert trained.llm_embeddings.shape == (pool.scores.shape[1], trained.config.network.dim)
    assert trained.history and {"step", "loss", "val_routing_accuracy"} <= set(trained.history[0])
    assert trained.best_step in [record["step"] for record in trained.history]
    train_rows = set(pool.train_idx.tolist())
    for llm, rows in enumerate(trained.anchor_query_idx):
        assert 0 < len(rows) <= trained.config.anchors
        assert set(rows.tolist()) <= train_rows
        assert not np.isnan(pool.scores[rows, llm]).any()
    again = embed(
        trained.encoder, pool.query_vectors[trained.anchor_query_idx[0]],
        pool.scores[trained.anchor_query_idx[0], 0],
    )  # fmt: skip
    assert np.abs(again - trained.llm_embeddings[0]).max() < 1e-5


def test_query_standardisation_uses_training_queries_only(
    planted_pool: PlantedPool, trained: TrainingResult, make_config: MakeConfig
) -> None:
    pool = planted_pool
    train_vectors = pool.query_vectors[pool.train_idx].astype(np.float64)
    mean = train_vectors.mean(axis=0)
    rms = np.sqrt(np.mean(np.square(train_vectors - mean)))
    for network in (trained.encoder, trained.predictor):
        assert np.allclose(network.standardize.shift.numpy(), mean, atol=1e-6)
        assert float(network.standardize.scale) == pytest.approx(rms, rel=1e-5)
    # moving the validation and test queries changes nothing; without the option: the identity
    moved = pool.query_vectors.copy()
    held_out = np.setdiff1d(np.arange(len(moved)), pool.train_idx)
    moved[held_out] += 3.0
    config = make_config(max_steps=2, eval_every=2)
    result = train(moved, pool.scores, pool.train_idx, pool.val_idx, config)
    assert np.allclose(result.encoder.standardize.shift.numpy(), mean, atol=1e-6)
    raw = train(
        pool.query_vectors, pool.scores, pool.train_idx, pool.val_idx,
        make_config(max_steps=2, eval_every=2, standardise_queries=False),
    )  # fmt: skip
    assert not raw.encoder.standardize.shift.any() and float(raw.predictor.standardize.scale) == 1


def test_routing_beats_the_best_single_llm(
    planted_pool: PlantedPool, trained: TrainingResult
) -> None:
    assert _gain_over_best_single(trained, planted_pool) > 0.15


def _gain_over_best_single(result: TrainingResult, pool: PlantedPool) -> float:
    """Test routing accuracy of the trained networks minus the best single LLM's."""
    test_scores = pool.scores[pool.test_idx]
    with torch.no_grad():
        logits = result.predictor.score_matrix(
            torch.from_numpy(result.llm_embeddings),
            torch.from_numpy(pool.query_vectors[pool.test_idx]),
        ).numpy()
    best_single = float(np.nanmean(test_scores, axis=0).max())
    return routing_accuracy(logits, test_scores) - best_single


def test_unseen_llm_lands_nearest_its_own_group(
    planted_pool: PlantedPool, trained: TrainingResult
) -> None:
    pool = planted_pool
    group_means = np.stack(
        [trained.llm_embeddings[pool.groups == g].mean(axis=0) for g in range(3)]
    )  # (3, d)
    rng = np.random.default_rng(11)
    for column, group in enumerate(pool.held_out_groups):
        rows = rng.choice(pool.train_idx, size=64, replace=False)
        z = embed(trained.encoder, pool.query_vectors[rows], pool.held_out_scores[rows, column])
        distances = np.linalg.norm(group_means - z, axis=1)
        assert distances.argmin() == group, distances


def test_progress_is_reported(planted_pool: PlantedPool, make_config: MakeConfig) -> None:
    pool = planted_pool
    calls: list[tuple[int, int, dict[str, float]]] = []
    train(
        pool.query_vectors, pool.scores, pool.train_idx, pool.val_idx,
        make_config(max_steps=6, eval_every=3), progress=lambda *call: calls.append(call),
    )  # fmt: skip
    assert [step for step, _, _ in calls] == [1, 2, 3, 4, 5, 6]
    assert all(total == 6 for _, total, _ in calls)
    assert "loss" in calls[0][2] and "val_routing_accuracy" in calls[-1][2]
    assert 0 <= calls[-1][2]["checks_left"] <= 3  # patience 3 in the small config


def test_a_small_pool_trains_for_its_passes_over_the_cells(
    planted_pool: PlantedPool, make_config: MakeConfig
) -> None:
    """The schedule is at most `max_passes` passes over the training cells: a pool of a few
    hundred cells is learned in a few dozen steps, not the full schedule; None keeps it."""
    pool = planted_pool
    cells = int((~np.isnan(pool.scores[pool.train_idx])).sum())
    config = make_config(max_steps=300, eval_every=10, patience=100, max_passes=2.0)
    steps = config.schedule_steps(cells, pool.scores.shape[1])
    assert 25 <= steps < 300
    calls: list[int] = []
    train(
        pool.query_vectors, pool.scores, pool.train_idx, pool.val_idx, config,
        progress=lambda step, total, info: calls.append(total),
    )  # fmt: skip
    assert len(calls) == steps and set(calls) == {steps}
    assert make_config(max_steps=300, max_passes=None).schedule_steps(cells, 3) == 300
    with pytest.raises(LocusInputError, match="max_passes"):
        make_config(max_passes=0.0)


def test_trains_without_validation_queries(
    planted_pool: PlantedPool, make_config: MakeConfig
) -> None:
    pool = planted_pool
    result = train(
        pool.query_vectors, pool.scores, pool.train_idx, pool.val_idx[:0],
        make_config(max_steps=4, eval_every=2),
    )  # fmt: skip
    assert result.best_step == 4
    assert np.isnan(result.history[-1]["val_routing_accuracy"])


def test_validation_routing_only_picks_evaluated_llms() -> None:
    from locus.nn.checks import validation_metrics

    logits = np.array([[5.0, 1.0, -1.0], [2.0, 3.0, 0.0], [1.0, 1.0, 1.0]], dtype=np.float32)
    scores = np.array(
        [[np.nan, 1.0, 0.0], [1.0, 0.0, np.nan], [np.nan, np.nan, np.nan]], dtype=np.float32
    )
    routing, correctness, log_loss = validation_metrics(logits, scores)
    # query 0: LLM 0 not evaluated -> LLM 1 (score 1); query 1: LLM 1 (score 0); query 2 skipped
    assert routing == 0.5
    # evaluated cells: (0,1) 1>0 & 1 ok, (0,2) -1<0 & 0 ok, (1,0) ok, (1,1) 3>0 but 0 wrong
    assert correctness == 0.75
    # mean BCE over the four evaluated cells: -log sigmoid(1), -log sigmoid(1), -log sigmoid(2),
    # -log(1 - sigmoid(3)) = softplus(-1), softplus(-1), softplus(-2), softplus(3)
    expected = np.mean(np.log1p(np.exp([-1.0, -1.0, -2.0, 3.0])))
    assert log_loss == pytest.approx(expected, rel=1e-6)


def test_equal_routing_accuracy_goes_to_lower_log_loss() -> None:
    from locus.nn.checks import better

    assert better((0.72, 0.70), (0.71, 0.50))  # routing first
    assert better((0.71, 0.49), (0.71, 0.50))  # tie -> lower log-loss
    assert not better((0.71, 0.51), (0.71, 0.50))
    assert not better((0.70, 0.10), (0.71, 0.50))


def _train_on_scripted_validations(
    pool: PlantedPool,
    config: TrainingConfig,
    monkeypatch: pytest.MonkeyPatch,
    script: list[tuple[float, float]],
) -> TrainingResult:
    """Train with validation checks that return the scripted (routing, log-loss) in turn."""
    import locus.nn.training as training

    checks = iter(script)

    def scripted(logits: np.ndarray, scores: np.ndarray) -> tuple[float, float, float]:
        routing, log_loss = next(checks)
        return routing, 0.5, log_loss

    monkeypatch.setattr(training, "validation_metrics", scripted)
    return train(pool.query_vectors, pool.scores, pool.train_idx, pool.val_idx, config)


def test_ties_keep_the_lowest_log_loss_and_patience_counts_routing_gains(
    planted_pool: PlantedPool, make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Scripted validations: routing gains at evaluations 1 and 2, then flat; log-loss falls
    # until evaluation 4, then rises. Patience 3 stops after evaluation 5 (3 without a gain).
    config = make_config(
        max_steps=100, eval_every=2, patience=3, select_on="routing", stop_on="routing"
    )
    script = [(0.5, 0.70), (0.6, 0.69), (0.6, 0.60), (0.6, 0.55), (0.6, 0.58), (0.6, 0.50)]
    result = _train_on_scripted_validations(planted_pool, config, monkeypatch, script)
    assert [h["step"] for h in result.history] == [2, 4, 6, 8, 10]
    assert result.best_step == 8  # same routing as steps 4 and 6, lowest log-loss
    assert result.history[-1]["val_log_loss"] == 0.58


def test_selecting_on_log_loss_keeps_its_minimum_and_stops_when_it_rises(
    planted_pool: PlantedPool, make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Routing accuracy keeps creeping up; log-loss is lowest at evaluation 2 and rises after.
    # Selecting on log-loss keeps step 4 and stops 3 evaluations later, routing gains or not.
    config = make_config(
        max_steps=100, eval_every=2, patience=3, select_on="log_loss", stop_on="log_loss"
    )
    script = [(0.5, 0.70), (0.6, 0.60), (0.61, 0.62), (0.62, 0.65), (0.63, 0.66), (0.7, 0.5)]
    result = _train_on_scripted_validations(planted_pool, config, monkeypatch, script)
    assert [h["step"] for h in result.history] == [2, 4, 6, 8, 10]
    assert result.best_step == 4


def test_selecting_the_final_step_keeps_the_last_weights_whatever_validation_says(
    planted_pool: PlantedPool, make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(
        max_steps=8, eval_every=2, patience=10, select_on="final", lr_schedule="cosine"
    )
    script = [(0.9, 0.40), (0.5, 0.70), (0.4, 0.80), (0.3, 0.90)]  # best first, worse after
    result = _train_on_scripted_validations(planted_pool, config, monkeypatch, script)
    assert [h["step"] for h in result.history] == [2, 4, 6, 8]
    assert result.best_step == 8
    with pytest.raises(LocusInputError, match="select_on"):
        TrainingConfig(select_on="best")
    with pytest.raises(LocusInputError, match="stop_on"):
        TrainingConfig(stop_on="final")


def test_more_evidence_never_moves_a_planted_llm_away_from_its_group(
    planted_pool: PlantedPool, trained: TrainingResult
) -> None:
    """Held-out LLMs embedded from n = 16 ... all 900 scores (7x the 128 anchors the encoder
    was trained on): each stays nearest its own group's centroid, and the embeddings converge on
    the all-scores one."""
    pool = planted_pool
    centroids = np.stack(
        [trained.llm_embeddings[pool.groups == g].mean(axis=0) for g in range(3)]
    )  # (3, d)
    bound = trained.config.anchors
    rng = np.random.default_rng(0)
    for column, group in enumerate(pool.held_out_groups):
        order = rng.permutation(len(pool.query_vectors))
        vectors, scores = pool.query_vectors[order], pool.held_out_scores[order, column]
        sizes = [32, 64, 128, 256, 512, len(order)]
        z = np.stack(
            [embed(trained.encoder, vectors[:n], scores[:n], max_evidence=bound) for n in sizes]
        )
        distances = np.linalg.norm(z[:, None, :] - centroids[None], axis=2)  # (n_sizes, 3)
        assert (distances.argmin(axis=1) == group).all(), distances
        others = np.delete(distances, group, axis=1).min(axis=1)
        # from the anchor count on, well inside its group: under 1/10 of the way to another
        assert (distances[2:, group] < 0.1 * others[2:]).all(), distances
        cosine = 1 - (z @ z[-1]) / (np.linalg.norm(z, axis=1) * np.linalg.norm(z[-1]))
        assert cosine[-2] < cosine[0], cosine  # 512 scores are closer to all than 32 are


def test_default_keeps_the_best_routing_step_and_stops_on_log_loss(
    planted_pool: PlantedPool, make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # log-loss is lowest at check 1, where routing has not separated the LLMs yet (0.5); routing
    # peaks at check 3. Patience 3 on log-loss stops after check 4; the kept step is check 3's.
    config = make_config(max_steps=100, eval_every=2, patience=3)
    assert (config.select_on, config.stop_on) == ("routing", "log_loss")
    script = [(0.5, 0.60), (0.6, 0.62), (0.7, 0.63), (0.65, 0.64), (0.9, 0.5)]
    result = _train_on_scripted_validations(planted_pool, config, monkeypatch, script)
    assert [h["step"] for h in result.history] == [2, 4, 6, 8]
    assert result.best_step == 6


def test_max_evidence_caps_training_sets_and_becomes_the_evidence_bound(
    planted_pool: PlantedPool, make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    import locus.nn.training as training

    sizes: list[int] = []
    original = training._log_uniform_size

    def recording(low: int, high: int, rng: np.random.Generator) -> int:
        size = original(low, high, rng)
        sizes.append(size)
        return size

    monkeypatch.setattr(training, "_log_uniform_size", recording)
    pool = planted_pool
    config = make_config(max_steps=6, eval_every=3, max_evidence=24)
    result = train(pool.query_vectors, pool.scores, pool.train_idx, pool.val_idx, config)
    assert sizes and max(sizes) <= 24 and min(sizes) >= config.min_evidence
    assert config.evidence_bound == 24 and make_config().evidence_bound == make_config().anchors
    assert result.llm_embeddings.shape[0] == pool.scores.shape[1]  # anchors embedded in chunks
    with pytest.raises(Exception, match="max_evidence"):
        make_config(max_evidence=4)  # below min_evidence


def test_listwise_loss_matches_a_per_query_softmax() -> None:
    from locus.nn.losses import listwise_loss

    rng = np.random.default_rng(3)
    n_llms, n_rows = 5, 9
    positions = [rng.choice(n_rows, size=rng.integers(3, 8), replace=False) for _ in range(n_llms)]
    scores = [rng.choice([0.0, 0.5, 1.0], size=len(p)).astype(np.float32) for p in positions]
    width = max(len(p) for p in positions)
    logits = torch.randn(n_llms, width, dtype=torch.float32)
    groups = [np.array([3, 0]), np.array([1, 4, 2])]
    ranked = [(group, logits[group]) for group in groups]
    got = listwise_loss(ranked, positions, scores, n_rows=n_rows, device=torch.device("cpu"))

    per_query = []
    for query in range(n_rows):
        cells = [
            (float(logits[llm, list(positions[llm]).index(query)]), float(scores[llm][k]))
            for llm in range(n_llms)
            for k, row in enumerate(positions[llm])
            if row == query
        ]
        if len(cells) < 2 or len({y for _, y in cells}) < 2:
            continue  # one LLM, or all the same score: no ranking signal
        z = np.array([c[0] for c in cells])
        y = np.array([c[1] for c in cells])
        log_p = z - np.log(np.exp(z).sum())
        per_query.append(-(y / y.sum() * log_p).sum())
    assert per_query, "the draw must hold informative queries"
    assert float(got) == pytest.approx(float(np.mean(per_query)), rel=1e-5)


def test_listwise_loss_is_zero_without_informative_queries() -> None:
    from locus.nn.losses import listwise_loss

    positions = [np.array([0, 1]), np.array([0, 1])]
    scores = [np.array([1.0, 0.0], np.float32), np.array([1.0, 0.0], np.float32)]
    logits = torch.randn(2, 2)
    got = listwise_loss(
        [(np.array([0, 1]), logits)], positions, scores, n_rows=2, device=torch.device("cpu")
    )
    assert float(got) == 0.0


def test_ranking_objective_trains_and_routes_the_specialists(
    planted_pool: PlantedPool, make_config: MakeConfig
) -> None:
    pool = planted_pool
    result = train(
        pool.query_vectors,
        pool.scores,
        pool.train_idx,
        pool.val_idx,
        make_config(ranking_weight=1.0, max_steps=200),
    )
    assert TrainingConfig.from_dict(result.config.to_dict()).ranking_weight == 1.0
    assert _gain_over_best_single(result, pool) > 0.15
    with pytest.raises(LocusInputError, match="ranking_weight"):
        TrainingConfig(ranking_weight=-1.0)


def test_learning_rate_schedules() -> None:
    from locus.nn.optim import lr_factor

    constant = TrainingConfig(max_steps=100, warmup_steps=4, lr_schedule="constant")
    assert [lr_factor(s, constant) for s in (1, 4, 5, 100)] == [0.2, 0.8, 1.0, 1.0]
    short = TrainingConfig(max_steps=3, warmup_steps=10, lr_schedule="constant")
    assert [lr_factor(s, short) for s in (1, 2, 3)] == [pytest.approx(1 / 3), 2 / 3, 1.0]
    cosine = TrainingConfig(max_steps=100, warmup_steps=0, lr_schedule="cosine")
    factors = [lr_factor(s, cosine) for s in range(1, 101)]
    assert factors[0] == pytest.approx(1.0, abs=1e-3)
    assert all(a > b for a, b in itertools.pairwise(factors))  # decays throughout
    assert 0.0 < factors[-1] < 1e-3
    with pytest.raises(LocusInputError, match="lr_schedule"):
        TrainingConfig(lr_schedule="linear")
    with pytest.raises(LocusInputError, match="warmup_steps"):
        TrainingConfig(warmup_steps=-1)
