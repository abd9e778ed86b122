"""Splits as pure functions: a query's split depends only on (seed, query key).

A hash bucket rather than a shuffle, so adding data never moves an existing query to another split.
The query key is the hash of the query's text when it has one (identical text, same split, whatever
the source), else ``source/query_id``.

    >>> split_of("some query text hash", seed=0) in ("train", "val", "test")
    True
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from locus.errors import LocusInputError

__all__ = [
    "DEFAULT_FRACTIONS",
    "assign_splits",
    "held_out_llms",
    "kfold_splits",
    "split_of",
]

DEFAULT_FRACTIONS = (0.8, 0.1, 0.1)
_NAMES = ("train", "val", "test")


def _unit(seed: int, key: str) -> float:
    """A number in [0, 1) that depends only on (seed, key)."""
    digest = hashlib.sha256(f"{seed}\x1f{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def _check_fractions(fractions: Sequence[float]) -> None:
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-9:
        raise LocusInputError(
            f"split fractions must be three non-negative numbers (train, val, test) summing to 1, "
            f"found {tuple(fractions)}"
        )


def split_of(key: str, *, seed: int = 0, fractions: Sequence[float] = DEFAULT_FRACTIONS) -> str:
    """The split ("train", "val" or "test") of one query key."""
    _check_fractions(fractions)
    u = _unit(seed, key)
    edge = 0.0
    for name, fraction in zip(_NAMES, fractions, strict=True):
        edge += fraction
        if u < edge:
            return name
    return _NAMES[-1]


def assign_splits(
    keys: Sequence[str],
    *,
    seed: int = 0,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    given: Sequence[str | None] | None = None,
) -> np.ndarray:
    """(n,) array of split names; a split `given` by the data wins over the hash bucket."""
    _check_fractions(fractions)
    out = np.array([split_of(k, seed=seed, fractions=fractions) for k in keys], dtype=object)
    if given is not None:
        for i, split in enumerate(given):
            if split is not None:
                out[i] = split
    return out


def kfold_splits(
    keys: Sequence[str], *, folds: int, seed: int = 0, val_share: float = 0.125
) -> list[np.ndarray]:
    """k-fold over queries: `folds` arrays of split names (n,), the f-th testing the queries
    of hash bucket f, so that over the folds every query is tested exactly once; of the other
    queries, `val_share` (by a second hash) are validation, the rest training. A pure function
    of (seed, key), like `split_of`.

    >>> parts = kfold_splits([f"q{i}" for i in range(100)], folds=5)
    >>> sum(int((p == "test").sum()) for p in parts)
    100

    Raises:
        LocusInputError: fewer than 2 folds, or a validation share outside [0, 1).
    """
    if folds < 2:
        raise LocusInputError(f"k-fold needs at least 2 folds, found {folds}")
    if not 0.0 <= val_share < 1.0:
        raise LocusInputError(f"the validation share must lie in [0, 1), found {val_share}")
    bucket = np.array([min(int(_unit(seed, f"fold\x1f{k}") * folds), folds - 1) for k in keys])
    val = np.array([_unit(seed, f"val\x1f{k}") < val_share for k in keys], dtype=bool)
    out = []
    for fold in range(folds):
        names = np.where(val, "val", "train").astype(object)
        names[bucket == fold] = "test"
        out.append(names)
    return out


def held_out_llms(
    llm_ids: Sequence[str],
    *,
    count: int | None = None,
    explicit: Sequence[str] | None = None,
    seed: int = 0,
) -> list[str]:
    """LLMs kept out of training: an explicit list (checked) or `count` chosen by seed.

    The choice is a hash ranking like the query split, so it depends only on (seed, llm_id).
    """
    if explicit is not None:
        unknown = [llm for llm in explicit if llm not in set(llm_ids)]
        if unknown:
            raise LocusInputError(
                f"held-out LLM {unknown[0]!r} is not in the pool; expected one of "
                f"{', '.join(sorted(llm_ids)[:5])}, ..."
            )
        return list(explicit)
    if count is None or count < 0 or count >= len(llm_ids):
        raise LocusInputError(
            f"held-out count must be between 0 and {len(llm_ids) - 1} (pool size - 1), "
            f"found {count}"
        )
    ranked = sorted(llm_ids, key=lambda llm: _unit(seed, f"llm:{llm}"))
    return sorted(ranked[:count])
