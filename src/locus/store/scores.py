"""Reading scores: the score table, per-LLM summaries and costs, counts.

One (LLM, query) may hold several scores: one per alias (two sources, or two ids of one text
within a source). The rule everywhere here: the cell's score is the **mean** of its scores, its
cost the mean of the costs that are known; each cell counts once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Select, func, select

from locus._lazy import lazy_module
from locus.data.table import ScoreTable
from locus.errors import LocusNotFoundError, did_you_mean
from locus.store import schema
from locus.store._core import StoreCore, raw_row_batches
from locus.store.imports import LLM_METADATA

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

__all__ = ["StoreScores"]

# two scores of one (LLM, query) farther apart than this disagree
_TOLERANCE = 1e-12


class StoreScores(StoreCore):
    """The reading side of scores: `score_table`, `llm_summary`, `llm_costs`, `counts`, ..."""

    def counts(self) -> dict[str, int]:
        """Row counts: llms, queries (query identities), query_aliases (each source's
        (query_id, text_hash)), scores, sources, query_vectors, llm_embeddings; and
        disagreeing_cells (`disagreeing_cells()`)."""
        tables = {
            "llms": schema.llms,
            "queries": schema.queries,
            "query_aliases": schema.query_aliases,
            "scores": schema.scores,
            "sources": schema.sources,
            "query_vectors": schema.query_vectors,
            "llm_embeddings": schema.llm_embeddings,
        }
        with self._read() as conn:
            out = {
                name: int(conn.execute(select(func.count()).select_from(t)).scalar_one())
                for name, t in tables.items()
            }
            out["disagreeing_cells"] = int(conn.execute(_disagreeing_cells()).scalar_one())
        return out

    def scores_in_order(self, source: str) -> pd.DataFrame:
        """Every score of `source` in the order it was written (by its import time, then as
        written): llm_id, text_hash, score, imported_at. What a sequential test of outcomes
        reads (`locus outcomes`)."""
        m, a, s = schema.llms.c, schema.query_aliases.c, schema.scores.c
        stmt = (
            select(m.llm_id, a.text_hash, s.score, s.imported_at)
            .select_from(
                schema.scores.join(schema.llms, m.id == s.llm).join(
                    schema.query_aliases, a.id == s.alias
                )
            )
            .where(s.source == source)
            .order_by(s.imported_at, a.id)
        )
        with self._read() as conn:
            return pd.read_sql(stmt, conn)

    def cell_counts(self, max_scores: int | None = None) -> tuple[int, int, int] | None:
        """(queries scored by some LLM, LLMs with a score, scored (LLM, query) cells), each
        cell once whatever its sources: how much the LLMs share their queries
        (`locus.offpolicy.Overlap.from_counts`). None where the store holds more than
        `max_scores` scores (counting them scans every one)."""
        if max_scores is not None:
            with self._read() as conn:
                total = conn.execute(select(func.count()).select_from(schema.scores)).scalar_one()
            if int(total) > max_scores:
                return None
        s, a = schema.scores.c, schema.query_aliases.c
        cells = (
            select(s.llm, a.query)
            .select_from(schema.scores.join(schema.query_aliases, s.alias == a.id))
            .distinct()
            .subquery()
        )
        stmt = select(
            func.count(func.distinct(cells.c.query)),
            func.count(func.distinct(cells.c.llm)),
            func.count(),
        ).select_from(cells)
        with self._read() as conn:
            queries, llms, found = conn.execute(stmt).one()
        return int(queries), int(llms), int(found)

    def disagreeing_cells(self) -> int:
        """How many (LLM, query) cells hold scores that differ (from two sources, or from two
        ids of one text). All are kept; `score_table` gives their mean."""
        with self._read() as conn:
            return int(conn.execute(_disagreeing_cells()).scalar_one())

    def llm_ids(self) -> list[str]:
        """Every LLM of the store, sorted."""
        with self._read() as conn:
            return list(
                conn.execute(select(schema.llms.c.llm_id).order_by(schema.llms.c.llm_id)).scalars()
            )

    def llm_metadata(self) -> dict[str, dict[str, Any]]:
        """Each LLM's metadata (display name, family, parameters in billions, prices,
        endpoint), with only the fields that are set: {llm_id: {field: value}}."""
        m = schema.llms.c
        stmt = select(m.llm_id, *[m[c] for c in LLM_METADATA]).order_by(m.llm_id)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return {
            row[0]: {
                name: value
                for name, value in zip(LLM_METADATA, row[1:], strict=True)
                if value is not None
            }
            for row in rows
        }

    def llm_summary(self) -> pd.DataFrame:
        """One row per LLM: llm_id, queries scored, mean score, tasks, best task and its mean.

        Each (LLM, query) counts once, with the mean of its scores; a query's task is the first
        one seen for it.
        """
        m, q = schema.llms.c, schema.queries.c
        cells = _cells().subquery("cells")
        # inner joins: an outer join to the aggregated cells would rescan them once per LLM
        stmt = (
            select(
                m.llm_id,
                q.task,
                func.count().label("n"),
                func.sum(cells.c.score).label("total"),
            )
            .select_from(cells)
            .join(schema.llms, m.id == cells.c.llm)
            .join(schema.queries, q.id == cells.c.query)
            .group_by(m.llm_id, q.task)
        )
        with self._read() as conn:
            per_task = pd.read_sql(stmt, conn)
        groups = dict(tuple(per_task.groupby("llm_id", sort=True)))
        rows = []
        for llm_id in self.llm_ids():
            group = groups.get(llm_id, per_task.iloc[:0])
            n = int(group["n"].sum())
            total = float(group["total"].sum())
            tasks = group[group["task"].notna()]
            best_task, best_mean = None, None
            if len(tasks):
                means = tasks["total"] / tasks["n"]
                best = int(np.argmax(means.to_numpy()))
                best_task = str(tasks["task"].iloc[best])
                best_mean = float(means.iloc[best])
            rows.append(
                {
                    "llm_id": llm_id,
                    "queries_scored": n,
                    "accuracy": total / n if n else None,
                    "tasks": len(tasks),
                    "best_task": best_task,
                    "best_task_accuracy": best_mean,
                }
            )
        return pd.DataFrame(
            rows,
            columns=[
                "llm_id",
                "queries_scored",
                "accuracy",
                "tasks",
                "best_task",
                "best_task_accuracy",
            ],
        )

    def score_table(
        self, *, sources: Sequence[str] | None = None, llm_ids: Sequence[str] | None = None
    ) -> ScoreTable:
        """The dense (n_queries, n_llms) score table of the store (NaN = not evaluated).

        One row per query identity: the same text from any source is one row, scored by every
        LLM any source scored it for. A cell with several scores (two sources, or two ids of one
        text) holds their mean; its cost is the mean of the known costs.

        Args:
            sources: read only the scores these sources imported (default: all).
            llm_ids: these LLMs' columns, in this order (default: all, sorted); rows are the
                queries they were scored on.

        Row keys (`query_ids`) are the query's id in its first source (alphabetically), made
        unique only where two rows would share one: `<source>/` prepended where the id is used
        by several sources, `@<8 hex of text hash>` appended where one source gives the id
        several texts. Rows are sorted by (source, query_id, text_hash) of that alias. Task and
        split are the first seen for the query.

        Raises:
            LocusNotFoundError: an LLM of `llm_ids` is not in the store.
        """
        m, a, s = schema.llms.c, schema.query_aliases.c, schema.scores.c
        stmt = select(s.llm, a.query.label("qpk"), s.score, func.coalesce(s.cost_usd, -1.0)).join(
            schema.query_aliases, a.id == s.alias
        )
        alias_stmt = select(a.query.label("qpk"), a.source, a.query_id, a.text_hash)
        if sources is not None:
            stmt = stmt.where(s.source.in_(list(sources)))
            alias_stmt = alias_stmt.where(a.source.in_(list(sources)))
        if llm_ids is not None:
            known = self.llm_ids()
            unknown = sorted(set(llm_ids) - set(known))
            if unknown:
                raise LocusNotFoundError(
                    f"unknown LLM {unknown[0]!r}{did_you_mean(unknown[0], known)}; expected one "
                    "of the workspace's LLMs (see `locus llms`)"
                )
            stmt = stmt.join(schema.llms, m.id == s.llm).where(m.llm_id.in_(list(llm_ids)))
        q = schema.queries.c
        with self._read() as conn:
            aliases = pd.read_sql(alias_stmt, conn)
            names = dict(conn.execute(select(m.id, m.llm_id)).all())
            cells = _read_cells(conn, stmt, aliases, names, llm_ids)
            if cells is None:
                return ScoreTable(
                    scores=np.zeros((0, 0), dtype=np.float32), llm_ids=(), query_ids=()
                )
            queries = pd.read_sql(
                select(q.id.label("qpk"), q.text_hash, q.query_text, q.task, q.split), conn
            )
        return _build_table(cells, aliases, queries)

    def llm_costs(self) -> dict[str, float]:
        """Mean observed cost per query (USD) of each LLM that has costs (each (LLM, query)
        counts once, with the mean of its known costs)."""
        m, a, s = schema.llms.c, schema.query_aliases.c, schema.scores.c
        cells = (
            select(s.llm, a.query, func.avg(s.cost_usd).label("cost"))
            .join(schema.query_aliases, a.id == s.alias)
            .where(s.cost_usd.is_not(None))
            .group_by(s.llm, a.query)
            .subquery("cells")
        )
        stmt = (
            select(m.llm_id, func.avg(cells.c.cost))
            .join(cells, cells.c.llm == m.id)
            .group_by(m.llm_id)
        )
        with self._read() as conn:
            return {llm: float(cost) for llm, cost in conn.execute(stmt).all()}


@dataclass
class _ReadCells:
    """Every score a read selected, in a dense array over all the candidate rows (the queries
    of the aliases read, by primary key) and columns (the LLMs read)."""

    qpks: NDArray[np.int64]  # (n_candidate_rows,) sorted query keys
    llm_ids: list[str]  # (n_columns,)
    scores: NDArray[np.float32]  # (n_candidate_rows, n_columns), NaN = none
    costs: NDArray[np.float32] | None
    keep_empty_columns: bool  # the caller named the LLMs: their columns stay, scored or not


def _read_cells(
    conn: Any,
    stmt: Select[Any],
    aliases: pd.DataFrame,
    names: dict[int, str],
    llm_order: Sequence[str] | None,
) -> _ReadCells | None:
    """The scores `stmt` selects (its columns: llm key, qpk, score, cost or -1), written
    straight into the dense table a million at a time (None when there is none). A cell
    several aliases of one query scored holds the mean of their scores and of their known
    costs. Reading into a long table first (a Python object per score, then pandas) peaked at
    12.6 GB for 80 M scores whose table is 0.4 GB."""
    qpks = np.unique(aliases["qpk"].to_numpy(dtype=np.int64))
    # only a query with several aliases can have several scores from one LLM
    counts = aliases["qpk"].value_counts()
    several = np.isin(qpks, counts.index[counts.to_numpy() > 1].to_numpy(dtype=np.int64))
    if llm_order is not None:
        by_name = {name: pk for pk, name in names.items()}
        llm_ids = list(llm_order)
        keys = [by_name[name] for name in llm_ids]
    else:
        keys = sorted(names, key=lambda pk: names[pk])
        llm_ids = [names[pk] for pk in keys]
    column_of = np.full(max(names, default=0) + 1, -1, dtype=np.int64)
    column_of[np.asarray(keys, dtype=np.int64)] = np.arange(len(keys))
    scores = np.full((len(qpks), len(keys)), np.nan, dtype=np.float32)
    costs: NDArray[np.float32] | None = None
    shared: list[NDArray[np.float64]] = []
    read = 0
    for rows in raw_row_batches(conn, stmt, 1_000_000, literal_binds=True):
        values = np.asarray(rows, dtype=np.float64)
        read += len(values)
        row = np.searchsorted(qpks, values[:, 1].astype(np.int64))
        column = column_of[values[:, 0].astype(np.int64)]
        cost = np.where(values[:, 3] < 0, np.nan, values[:, 3])
        repeated = several[row]
        if repeated.any():
            shared.append(np.column_stack([row, column, values[:, 2], cost])[repeated])
        alone = ~repeated
        row, column, cost = row[alone], column[alone], cost[alone]
        scores[row, column] = values[alone, 2]
        if costs is None and not np.isnan(cost).all():
            costs = np.full_like(scores, np.nan)
        if costs is not None:
            costs[row, column] = cost
    if read == 0:
        return None
    if shared:
        both = np.concatenate(shared)
        means = (
            pd.DataFrame(both, columns=["row", "column", "score", "cost"])
            .groupby(["row", "column"], sort=False)[["score", "cost"]]
            .mean()
            .reset_index()
        )
        row = means["row"].to_numpy(dtype=np.int64)
        column = means["column"].to_numpy(dtype=np.int64)
        scores[row, column] = means["score"].to_numpy()
        cost = means["cost"].to_numpy(dtype=np.float64)
        if costs is None and not np.isnan(cost).all():
            costs = np.full_like(scores, np.nan)
        if costs is not None:
            costs[row, column] = cost
    return _ReadCells(qpks, llm_ids, scores, costs, keep_empty_columns=llm_order is not None)


def _cells() -> Select[Any]:
    """(llm, query, score): one row per (LLM, query), the mean of its scores."""
    a, s = schema.query_aliases.c, schema.scores.c
    return (
        select(s.llm, a.query, func.avg(s.score).label("score"))
        .join(schema.query_aliases, a.id == s.alias)
        .group_by(s.llm, a.query)
    )


def _disagreeing_cells() -> Select[Any]:
    """count of (LLM, query) whose scores differ; only queries with several aliases can."""
    a, s = schema.query_aliases.c, schema.scores.c
    shared = select(a.query).group_by(a.query).having(func.count() > 1)
    cells = (
        select(s.llm, a.query)
        .join(schema.query_aliases, a.id == s.alias)
        .where(a.query.in_(shared))
        .group_by(s.llm, a.query)
        .having(func.max(s.score) - func.min(s.score) > _TOLERANCE)
        .subquery("disagreeing")
    )
    return select(func.count()).select_from(cells)


def _build_table(cells: _ReadCells, aliases: pd.DataFrame, queries: pd.DataFrame) -> ScoreTable:
    """The ScoreTable of the cells read: the rows that hold a score, keyed and in order."""
    scored = ~np.isnan(cells.scores)
    present = cells.qpks[scored.any(axis=1)]
    columns = np.arange(len(cells.llm_ids))
    if not cells.keep_empty_columns:
        columns = np.flatnonzero(scored.any(axis=0))
    del scored
    # each row's key alias: the first by (source, query_id, text_hash) among those read
    rows = (
        aliases[aliases["qpk"].isin(present)]
        .sort_values(["source", "query_id", "text_hash"])
        .drop_duplicates("qpk")
        .merge(queries.drop(columns="text_hash"), on="qpk", how="left")
        .reset_index(drop=True)
    )
    keys = _row_keys(rows)
    at = np.ix_(np.searchsorted(cells.qpks, rows["qpk"].to_numpy(dtype=np.int64)), columns)

    def column(name: str) -> tuple[str | None, ...]:
        return tuple(None if v is None or v != v else str(v) for v in rows[name].tolist())

    return ScoreTable(
        scores=cells.scores[at],
        llm_ids=tuple(cells.llm_ids[c] for c in columns),
        query_ids=tuple(keys),
        text_hashes=tuple(str(h) for h in rows["text_hash"].tolist()),
        query_texts=column("query_text"),
        tasks=column("task"),
        splits=column("split"),
        costs=None if cells.costs is None else cells.costs[at],
    )


def _row_keys(rows: pd.DataFrame) -> list[str]:
    """A unique, readable key per row from its key alias (source, query_id, text_hash).

    The alias's `query_id`; where rows share it, `<source>/` when they come from several
    sources and `@<hash8>` (`@notext`) when one source gives the id several texts; a `#<n>`
    suffix settles anything still shared (an id that reads like another's derived key).
    """
    ids = rows["query_id"].astype(str)
    shared = ids.duplicated(keep=False).to_numpy()
    sources = rows.groupby("query_id")["source"].transform("nunique").to_numpy()
    texts = rows.groupby(["source", "query_id"])["text_hash"].transform("size").to_numpy()
    keys = []
    for i, (source, query_id, text_hash) in enumerate(
        zip(rows["source"], ids, rows["text_hash"], strict=True)
    ):
        key = query_id
        if shared[i] and texts[i] > 1:
            key = f"{key}@{str(text_hash)[:8] or 'notext'}"
        if shared[i] and sources[i] > 1:
            key = f"{source}/{key}"
        keys.append(key)
    qpks = rows["qpk"].tolist()
    while True:
        seen = Counter(keys)
        clashing = [i for i, key in enumerate(keys) if seen[key] > 1]
        if not clashing:
            return keys
        for i in clashing:
            keys[i] = f"{keys[i]}#{qpks[i]}"
