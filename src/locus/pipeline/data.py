"""The encodable part of a workspace as arrays: score table, query vectors, hash split.

>>> data = workspace_table(store)                                   # doctest: +SKIP
>>> data.table.scores.shape, data.vectors.shape, data.rows("test")[:3]  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from locus.data.splits import assign_splits
from locus.data.table import ScoreTable
from locus.errors import LocusInputError
from locus.store import Store

__all__ = ["WorkspaceTable", "workspace_table"]


@dataclass(frozen=True)
class WorkspaceTable:
    """Score table of every query with text, its cached vectors and its split.

    Attributes:
        table: (n_queries, n_llms) scores.
        vectors: (n_queries, dq) query vectors of `encoder`, row-aligned with `table`.
        splits: (n_queries,) "train" / "val" / "test".
        encoder: the text encoder's name.
    """

    table: ScoreTable
    vectors: np.ndarray
    splits: np.ndarray
    encoder: str

    def rows(self, split: str) -> np.ndarray:
        """Row indices of one split."""
        return np.flatnonzero(self.splits == split)

    def with_splits(self, splits: np.ndarray) -> WorkspaceTable:
        """The same table and vectors under other splits (n_queries,), e.g. one k-fold's.

        Raises:
            LocusInputError: a splits array of another length.
        """
        if len(splits) != len(self.splits):
            raise LocusInputError(
                f"splits for {len(splits):,} queries; the table has {len(self.splits):,}"
            )
        return replace(self, splits=np.asarray(splits, dtype=object))

    def subsample(self, n_queries: int, seed: int) -> WorkspaceTable:
        """`n_queries` queries drawn at random (by `seed`), each split in proportion, so a
        small pool keeps the large one's train / validation / test shares.

        Raises:
            LocusInputError: `n_queries` below 10 or above the table's queries.
        """
        total = len(self.splits)
        if not 10 <= n_queries <= total:
            raise LocusInputError(
                f"a subsample of {n_queries:,} queries: expected 10 to {total:,} (the pool's)"
            )
        rng = np.random.default_rng([seed, n_queries])
        names = sorted(set(self.splits.tolist()))
        counts = {name: len(self.rows(name)) for name in names}
        # largest remainder, so the shares add up to exactly n_queries
        exact = {name: n_queries * counts[name] / total for name in names}
        take = {name: int(exact[name]) for name in names}
        for name in sorted(names, key=lambda s: exact[s] - take[s], reverse=True):
            if sum(take.values()) == n_queries:
                break
            take[name] += 1
        rows = np.sort(
            np.concatenate(
                [rng.choice(self.rows(name), take[name], replace=False) for name in names]
            )
        )
        return WorkspaceTable(
            table=self.table.select_queries(rows),
            vectors=self.vectors[rows],
            splits=self.splits[rows],
            encoder=self.encoder,
        )


def workspace_table(
    store: Store, *, split_seed: int = 0, llm_ids: Sequence[str] | None = None
) -> WorkspaceTable:
    """Score table of every query that has text, its cached vectors and its split.

    With `llm_ids`, only those LLMs' columns and the queries they were scored on are read (a
    query's split depends only on its text, so it is the same either way).

    Raises:
        LocusInputError: empty workspace, or queries not encoded yet (run `locus encode`).
    """
    encoder = store.text_encoder
    if encoder is None:
        raise LocusInputError(
            f"workspace {store.location}: queries are not encoded yet; run `locus encode` first"
        )
    table = store.score_table(llm_ids=llm_ids)
    if table.n_llms == 0:
        raise LocusInputError(
            f"workspace {store.location}: no scores; import evaluation results first"
        )
    has_text = np.array([h != "" for h in table.text_hashes], dtype=bool)
    if not has_text.any() and llm_ids is None:
        raise LocusInputError(
            f"workspace {store.location}: no query has text; LOCUS needs query texts (import "
            "with query_text or --queries)"
        )
    table = table.select_queries(has_text)
    vectors = store.get_vectors(encoder, list(table.text_hashes))
    splits = assign_splits(list(table.text_hashes), seed=split_seed, given=list(table.splits))
    return WorkspaceTable(table=table, vectors=vectors, splits=splits, encoder=encoder)
