"""Splits are a pure function of (seed, query key)."""

from __future__ import annotations

from collections import Counter

import pytest

from locus.data.splits import assign_splits, held_out_llms, split_of
from locus.errors import LocusInputError


def test_fractions_close_to_80_10_10() -> None:
    counts = Counter(assign_splits([f"query-{i}" for i in range(20_000)], seed=0))
    assert abs(counts["train"] / 20_000 - 0.8) < 0.01
    assert abs(counts["val"] / 20_000 - 0.1) < 0.01
    assert abs(counts["test"] / 20_000 - 0.1) < 0.01


def test_adding_keys_never_moves_existing_ones() -> None:
    keys = [f"k{i}" for i in range(500)]
    before = assign_splits(keys, seed=3)
    after = assign_splits([*keys, *(f"new{i}" for i in range(500))], seed=3)
    assert list(after[:500]) == list(before)


def test_seed_changes_assignment_and_given_split_wins() -> None:
    keys = [f"k{i}" for i in range(200)]
    assert list(assign_splits(keys, seed=0)) != list(assign_splits(keys, seed=1))
    given = assign_splits(["k0", "k1"], seed=0, given=["test", None])
    assert given[0] == "test" and given[1] == split_of("k1", seed=0)


def test_bad_fractions_rejected() -> None:
    with pytest.raises(LocusInputError, match="summing to 1"):
        split_of("k", fractions=(0.5, 0.5, 0.5))


def test_held_out_llms_seeded_and_checked() -> None:
    pool = [f"llm-{i}" for i in range(20)]
    chosen = held_out_llms(pool, count=4, seed=1)
    assert len(chosen) == 4 and set(chosen) <= set(pool)
    assert chosen == held_out_llms(list(reversed(pool)), count=4, seed=1)
    assert held_out_llms(pool, explicit=["llm-3"]) == ["llm-3"]
    with pytest.raises(LocusInputError, match="not in the pool"):
        held_out_llms(pool, explicit=["gpt-9"])
    with pytest.raises(LocusInputError, match="between 0 and 19"):
        held_out_llms(pool, count=20)
