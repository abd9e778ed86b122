"""Writing imports: `Store.write_batch` turns one `ImportBatch` into queries, aliases and scores.

Each of a file's queries is kept as an *alias*, (source, query_id, text_hash), pointing at its
query *identity* (`schema.query_identity`): the normalised text, shared by every source, or
(namespace, query_id) for a query without text (see `locus.store.aliases`). Scores are keyed by
(LLM, alias), so every score is kept exactly as imported; two sources (or two ids of one text)
that score one (LLM, query) differently are both kept, counted in
`ImportReport.disagreeing_scores`, and averaged by `Store.score_table`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, and_, delete, func, select, tuple_

from locus._lazy import lazy_module
from locus._progress import ProgressFactory, no_progress
from locus.data.batch import ImportBatch
from locus.errors import LocusConflictError
from locus.store import schema
from locus.store._core import CHUNK, IN_CHUNK, StoreCore, llm_keys, now, upsert
from locus.store.aliases import write_aliases
from locus.store.references import delete_references, write_references
from locus.store.score_writes import insert_scores, replace_scores

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

__all__ = ["LLM_METADATA", "ImportReport", "StoreImports"]

logger = logging.getLogger("locus.store")

LLM_METADATA = (
    "display_name",
    "family",
    "params_b",
    "price_in_per_mtok",
    "price_out_per_mtok",
    "cost_per_query",
    "endpoint",
)


@dataclass(frozen=True)
class ImportReport:
    """What one import changed. `changed` is False when the data was already there.

    Counts "in_file" are the file's own: `queries_in_file` counts its distinct
    (query_id, text_hash). `new_queries` counts query identities the store did not hold yet;
    `new_aliases` the file's (source, query_id, text_hash) it did not hold (a text already known
    from another source is a new alias of an existing query). `disagreeing_scores` counts the
    scores this import wrote that differ from a score another alias (another source, or another
    id of the same text) holds for the same (LLM, query): both are kept; `Store.score_table`
    gives their mean.
    """

    source: str
    origin: str
    llms_in_file: int
    queries_in_file: int
    scores_in_file: int
    new_llms: int
    new_queries: int
    new_scores: int
    replaced_scores: int
    unchanged_scores: int
    new_aliases: int = 0
    disagreeing_scores: int = 0
    removed_scores: int = 0
    references: int = 0

    @property
    def changed(self) -> bool:
        return bool(
            self.new_llms
            or self.new_queries
            or self.new_aliases
            or self.new_scores
            or self.replaced_scores
            or self.removed_scores
            or self.references
        )

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "changed": self.changed}


class StoreImports(StoreCore):
    """`Store.write_batch`: one import, one transaction."""

    def write_batch(
        self,
        batch: ImportBatch,
        *,
        kind: str,
        replace: bool = False,
        whole_source: bool = False,
        progress: ProgressFactory = no_progress,
    ) -> ImportReport:
        """Write one import in one transaction.

        Each of the batch's queries becomes (or already is) an alias of the query with its text,
        whatever source imported that text first, or, without text, of the query with its id in
        `batch.namespace`. A query's task and split are the first non-null ones seen; a later
        import that gives another keeps it on its own alias (and is logged).

        Scores already present with the same value are left alone, so re-importing changes
        nothing. Scores are kept per (LLM, alias): another source scoring the same query never
        overwrites them (see `ImportReport.disagreeing_scores`). With `replace`, differing
        scores are overwritten; with `whole_source` too, the batch replaces its source whole:
        the source's scores the batch no longer holds are removed (with the aliases and queries
        left without any). `locus import --replace` does both; a service post for one LLM
        (a source shared by every LLM posted to) only overwrites.

        Raises:
            LocusConflictError: a different score for an existing (LLM, alias) without
                `replace=True`, or a query without text that this source imported under another
                namespace; then nothing is written.
        """
        return self.write_batches([batch], kind=kind, replace=replace,
                                  whole_source=whole_source, progress=progress)  # fmt: skip

    def write_batches(
        self,
        batches: Iterable[ImportBatch],
        *,
        kind: str,
        replace: bool = False,
        whole_source: bool = False,
        progress: ProgressFactory = no_progress,
    ) -> ImportReport:
        """`write_batch` for an import read in parts (`iter_import_table`): the batches, all of
        one source, are drawn one at a time and written in **one** transaction, so memory stays
        bounded by a batch while the import still lands whole or not at all. A later batch that
        scores an (LLM, query) an earlier one scored differently is a conflict (as against the
        store); with `replace`, the later score wins."""
        stamp = now()
        totals: dict[str, int] = dict.fromkeys(_COUNTS, 0)
        del totals["queries_in_file"]  # the distinct aliases of the whole file, at the end
        llms: set[str] = set()
        held = _Cells()  # every (LLM, alias) the import holds
        first: ImportBatch | None = None
        with self._write() as conn, progress("writing scores", total=None) as advance:
            for batch in batches:
                if first is None:
                    first = batch
                    _upsert_source(conn, batch, kind, stamp)
                elif batch.source != first.source:
                    raise ValueError("write_batches: every batch must have one source")
                counts, keys = _write_part(conn, batch, stamp, replace)
                for name in totals:
                    totals[name] += counts[name]
                llms.update(batch.llms["llm_id"])
                held.add(*keys)
                advance(batch.n_scores)
            if first is None:
                raise ValueError("write_batches: no batch")
            if replace and whole_source:
                totals["removed_scores"] = _remove_absent(conn, first.source, held)
        if totals["disagreeing_scores"]:
            logger.warning(
                "%s: %d score(s) differ from the score another source (or another id of the same "
                "text) holds for the same (LLM, query); both are kept, the score table uses "
                "their mean",
                first.origin,
                totals["disagreeing_scores"],
            )
        return ImportReport(
            source=first.source,
            origin=first.origin,
            llms_in_file=len(llms),
            queries_in_file=held.aliases(),
            scores_in_file=held.count(),
            **totals,
        )


_COUNTS = (
    "queries_in_file", "new_llms", "new_queries", "new_scores", "replaced_scores",
    "unchanged_scores", "new_aliases", "disagreeing_scores", "removed_scores", "references",
)  # fmt: skip


def _write_part(
    conn: Connection, batch: ImportBatch, stamp: str, replace: bool
) -> tuple[dict[str, int], tuple[np.ndarray, np.ndarray]]:
    """One batch inside the import's transaction: its counts, and the (LLM keys, alias keys)
    of its scores. Existing scores are read for the batch's own aliases only."""
    new_llms = _insert_llms(conn, batch.llms, stamp)
    new_queries, new_aliases, alias_pk = write_aliases(conn, batch)
    references = write_references(conn, batch, alias_pk)
    incoming = batch.scores.copy()
    incoming["llm"] = incoming["llm_id"].map(llm_keys(conn, batch.llms["llm_id"].tolist()))
    incoming["llm"] = incoming["llm"].astype("int64")
    incoming["alias"] = np.asarray(
        [alias_pk[key] for key in zip(incoming["query_id"], incoming["text_hash"], strict=True)],
        dtype=np.int64,
    )
    aliases = np.unique(incoming["alias"].to_numpy()).tolist()
    s = schema.scores.c
    existing = pd.concat(
        [
            pd.read_sql(
                select(s.llm, s.alias, s.score).where(
                    s.source == batch.source, s.alias.in_(aliases[at : at + IN_CHUNK])
                ),
                conn,
            )
            for at in range(0, len(aliases), IN_CHUNK)
        ]
        or [pd.DataFrame({"llm": [], "alias": [], "score": []})]
    )
    merged = incoming.merge(
        existing.rename(columns={"score": "old_score"}).astype({"llm": "int64", "alias": "int64"}),
        on=["llm", "alias"],
        how="left",
    )
    is_new = merged["old_score"].isna().to_numpy()
    differs = ~is_new & ~np.isclose(
        merged["score"].to_numpy(float), merged["old_score"].to_numpy(float), atol=1e-12
    )
    if differs.any() and not replace:
        first = merged[differs].iloc[0]
        raise LocusConflictError(
            f"{batch.origin}: {int(differs.sum())} score(s) differ from the store (or from an "
            f"earlier part of this file), e.g. LLM {first['llm_id']!r} on query "
            f"{first['query_id']!r} (source {batch.source!r}): stored {first['old_score']:g}, "
            f"file {first['score']:g}; expected the same value on re-import; pass --replace to "
            "overwrite, or import under another --source to keep both"
        )
    to_insert = merged[is_new]
    to_replace = merged[differs]
    insert_scores(conn, to_insert, batch.source, stamp, lambda n: None)
    if len(to_replace):
        replace_scores(conn, to_replace, batch.source, stamp, lambda n: None)
    written = pd.concat([to_insert, to_replace])
    disagreeing = _disagreeing_scores(conn, written, aliases) if len(written) else 0
    counts = {
        "queries_in_file": batch.n_queries, "new_llms": new_llms, "new_queries": new_queries,
        "new_scores": len(to_insert), "replaced_scores": len(to_replace),
        "unchanged_scores": int((~is_new & ~differs).sum()), "new_aliases": new_aliases,
        "disagreeing_scores": disagreeing, "removed_scores": 0, "references": references,
    }  # fmt: skip
    return counts, (incoming["llm"].to_numpy(np.int64), incoming["alias"].to_numpy(np.int64))


class _Cells:
    """A set of (LLM key, alias key) cells as one boolean row over alias keys per LLM: a few
    bytes per cell whatever the import's size (80 M cells as sorted int64 keys peaked at 6 GB
    in np.unique)."""

    def __init__(self) -> None:
        self.rows: dict[int, np.ndarray] = {}

    def add(self, llms: np.ndarray, aliases: np.ndarray) -> None:
        for llm, mine in _by_llm(llms, aliases):
            row = self.rows.get(llm, np.zeros(0, dtype=bool))
            top = int(mine.max()) + 1
            if top > len(row):
                row = np.concatenate([row, np.zeros(max(top, 2 * len(row)) - len(row), bool)])
            row[mine] = True
            self.rows[llm] = row

    def contains(self, llms: np.ndarray, aliases: np.ndarray) -> np.ndarray:
        out = np.zeros(len(llms), dtype=bool)
        if not len(llms):
            return out
        order = np.argsort(llms, kind="stable")
        for (llm, mine), at in zip(
            _by_llm(llms, aliases), np.split(order, _starts(llms[order])), strict=True
        ):
            row = self.rows.get(llm)
            if row is not None:
                inside = mine < len(row)
                out[at[inside]] = row[mine[inside]]
        return out

    def count(self) -> int:
        return int(sum(int(row.sum()) for row in self.rows.values()))

    def aliases(self) -> int:
        if not self.rows:
            return 0
        width = max(len(row) for row in self.rows.values())
        seen = np.zeros(width, dtype=bool)
        for row in self.rows.values():
            seen[: len(row)] |= row
        return int(seen.sum())


def _starts(sorted_llms: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.diff(sorted_llms)) + 1


def _by_llm(llms: np.ndarray, aliases: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(LLM key, its alias keys) per LLM, in key order: one sort, not a mask per LLM."""
    if not len(llms):
        return []
    order = np.argsort(llms, kind="stable")
    keys = llms[order]
    starts = _starts(keys)
    groups = np.split(aliases[order], starts)
    return [(int(keys[i]), group) for i, group in zip([0, *starts], groups, strict=True)]


def _remove_absent(conn: Connection, source: str, held: _Cells) -> int:
    """Delete the `source`'s stored scores whose (LLM, alias) `held` lacks, then its aliases
    and the queries left without a score or alias; the count deleted."""
    s, a, q = schema.scores.c, schema.query_aliases.c, schema.queries.c
    stored = np.asarray(
        conn.execute(select(s.llm, s.alias).where(s.source == source)).all(), dtype=np.int64
    ).reshape(-1, 2)
    gone = stored[~held.contains(stored[:, 0], stored[:, 1])]
    if not len(gone):
        return 0
    pairs = [(int(llm), int(alias)) for llm, alias in gone]
    for start in range(0, len(pairs), CHUNK):
        chunk = pairs[start : start + CHUNK]
        conn.execute(
            delete(schema.scores).where(s.source == source, tuple_(s.llm, s.alias).in_(chunk))
        )
    scored = select(s.alias).where(s.source == source).distinct()
    unscored = select(a.id).where(a.source == source, a.id.not_in(scored))
    delete_references(conn, unscored)
    conn.execute(delete(schema.query_aliases).where(a.source == source, a.id.not_in(scored)))
    conn.execute(delete(schema.queries).where(q.id.not_in(select(a.query).distinct())))
    return len(pairs)


def _upsert_source(conn: Connection, batch: ImportBatch, kind: str, stamp: str) -> None:
    stmt = upsert(conn, schema.sources).values(
        name=batch.source,
        kind=kind,
        origin=batch.origin,
        first_imported_at=stamp,
        last_imported_at=stamp,
    )
    # a source is its path's: the latest import says where it came from and when
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["name"],
            set_={
                "kind": stmt.excluded.kind,
                "origin": stmt.excluded.origin,
                "last_imported_at": stmt.excluded.last_imported_at,
            },
        )
    )


def _insert_llms(conn: Connection, llms: pd.DataFrame, stamp: str) -> int:
    before = conn.execute(select(func.count()).select_from(schema.llms)).scalar_one()
    rows = []
    for record in llms.to_dict("records"):
        row: dict[str, Any] = {"llm_id": record["llm_id"], "created_at": stamp}
        for column in LLM_METADATA:
            value = record.get(column)
            row[column] = None if value is None or value != value else value
        rows.append(row)
    if rows:
        conn.execute(
            upsert(conn, schema.llms).on_conflict_do_nothing(index_elements=["llm_id"]), rows
        )
    after = conn.execute(select(func.count()).select_from(schema.llms)).scalar_one()
    return int(after - before)


def _disagreeing_scores(conn: Connection, incoming: pd.DataFrame, aliases: list[int]) -> int:
    """How many of `incoming` (llm, alias, score; its aliases `aliases`) differ from a score
    that another alias of the same query holds for the same LLM."""
    mine, other = schema.query_aliases.alias("mine"), schema.query_aliases.alias("other")
    theirs = schema.scores.alias("theirs")
    stmt = (
        select(theirs.c.llm, mine.c.id.label("alias"), theirs.c.score.label("other_score"))
        .select_from(mine)
        .join(other, and_(other.c.query == mine.c.query, other.c.id != mine.c.id))
        .join(theirs, theirs.c.alias == other.c.id)
    )
    others = pd.concat(
        [
            pd.read_sql(stmt.where(mine.c.id.in_(aliases[at : at + IN_CHUNK])), conn)
            for at in range(0, len(aliases), IN_CHUNK)
        ]
        or [pd.DataFrame({"llm": [], "alias": [], "other_score": []})]
    )
    if not len(others):
        return 0
    pairs = incoming[["llm", "alias", "score"]].merge(others, on=["llm", "alias"])
    differ = ~np.isclose(
        pairs["score"].to_numpy(float), pairs["other_score"].to_numpy(float), atol=1e-12
    )
    return len(pairs.loc[differ, ["llm", "alias"]].drop_duplicates())
