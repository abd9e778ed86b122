"""Planted data for the network tests: LLM groups with known per-task skill."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from numpy.typing import NDArray

from locus.nn import NetworkConfig, TrainingConfig, TrainingResult, train

N_TASKS = 3
QUERY_DIM = 32


@dataclass(frozen=True)
class PlantedPool:
    """Queries from 3 tasks; LLM group g answers task g well and the others badly.

    query_vectors (n_queries, dq); scores (n_queries, n_llms) with NaN gaps; held_out_scores
    (n_queries, 3): one extra LLM per group, never seen in training.
    """

    query_vectors: NDArray[np.float32]
    tasks: NDArray[np.int64]
    scores: NDArray[np.float32]
    groups: NDArray[np.int64]
    held_out_scores: NDArray[np.float32]
    held_out_groups: NDArray[np.int64]
    train_idx: NDArray[np.int64]
    val_idx: NDArray[np.int64]
    test_idx: NDArray[np.int64]


def make_planted_pool(
    seed: int = 0, queries_per_task: int = 300, llms_per_group: int = 8
) -> PlantedPool:
    rng = np.random.default_rng(seed)
    centroids = rng.normal(0.0, 1.0, (N_TASKS, QUERY_DIM))
    tasks = rng.permutation(np.repeat(np.arange(N_TASKS), queries_per_task))
    vectors = centroids[tasks] + rng.normal(0.0, 0.5, (len(tasks), QUERY_DIM))

    def sample(groups: NDArray[np.int64]) -> NDArray[np.float32]:
        skill = np.where(np.arange(N_TASKS)[:, None] == groups[None, :], 0.9, 0.25)  # (task, llm)
        skill = np.clip(skill + rng.uniform(-0.05, 0.05, skill.shape), 0.0, 1.0)
        return (rng.random((len(tasks), len(groups))) < skill[tasks]).astype(np.float32)

    groups = np.repeat(np.arange(N_TASKS), llms_per_group)
    scores = sample(groups)
    scores[rng.random(scores.shape) < 0.1] = np.nan  # not every LLM saw every query
    held_out_groups = np.arange(N_TASKS)
    order = rng.permutation(len(tasks))
    n_train, n_val = int(0.6 * len(tasks)), int(0.2 * len(tasks))
    return PlantedPool(
        query_vectors=vectors.astype(np.float32),
        tasks=tasks,
        scores=scores,
        groups=groups,
        held_out_scores=sample(held_out_groups),
        held_out_groups=held_out_groups,
        train_idx=np.sort(order[:n_train]),
        val_idx=np.sort(order[n_train : n_train + n_val]),
        test_idx=np.sort(order[n_train + n_val :]),
    )


def small_config(**overrides: object) -> TrainingConfig:
    """A network small enough to train in seconds on 2 CPU cores."""
    network = NetworkConfig(
        dim=32, inducing_points=8, heads=2, feed_forward=64, predictor_hidden=32
    )
    values: dict[str, object] = dict(
        network=network, min_evidence=8, anchors=128, llms_per_step=8, targets_per_llm=64,
        micro_batches=2,
        encoder_lr=1e-3, predictor_lr=2e-3, max_steps=300, eval_every=50, patience=3, seed=0,
        max_passes=None,  # the tests' schedules are their own, whatever their pools' size
    )  # fmt: skip
    values.update(overrides)
    return TrainingConfig(**values)  # type: ignore[arg-type]


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Run the network tests on one intra-op thread, then restore the setting.

    These networks are tiny; with 2 threads on a 2-core machine that is also running anything
    else, OpenMP barriers wait on descheduled threads and the suite ran 30x slower (381 s vs 11 s).
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


# Tests reach the helpers through fixtures only: importing conftest by name depends on the
# import mode and on which other conftest.py files exist.


@pytest.fixture(scope="session")
def make_config() -> Callable[..., TrainingConfig]:
    """`small_config` as a fixture: make_config(max_steps=10) -> TrainingConfig."""
    return small_config


@pytest.fixture(scope="session")
def planted_pool() -> PlantedPool:
    return make_planted_pool()


@pytest.fixture(scope="session")
def trained(planted_pool: PlantedPool) -> TrainingResult:
    """The small network trained once on the planted pool (~5 s), shared by several tests."""
    pool = planted_pool
    return train(pool.query_vectors, pool.scores, pool.train_idx, pool.val_idx, small_config())
