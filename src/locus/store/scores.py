"""Reading scores: the score table, per-LLM summaries and costs, counts.

One (LLM, query) may hold several scores: one per alias (two sources, or two ids of one text
within a source). The rule everywhere here: the cell's score is the **mean** of its scores, its
cost the mean of the costs that are known; each cell counts once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Select, func, select

from locus.data.table import ScoreTable
from locus.errors import LocusNotFoundError
from locus.store import schema
from locus.store._core import StoreCore, raw_row_batches
from locus.store.imports import LLM_METADATA

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
            unknown = sorted(set(llm_ids) - set(self.llm_ids()))
            if unknown:
                raise LocusNotFoundError(
                    f"unknown LLM {unknown[0]!r}; expected one of the workspace's LLMs "
                    "(see `locus llms`)"
                )
            stmt = stmt.join(schema.llms, m.id == s.llm).where(m.llm_id.in_(list(llm_ids)))
        q = schema.queries.c
        with self._read() as conn:
            long = _read_long(conn, stmt)
            if len(long) == 0:
                return ScoreTable(
                    scores=np.zeros((0, 0), dtype=np.float32), llm_ids=(), query_ids=()
                )
            aliases = pd.read_sql(alias_stmt, conn)
            queries = pd.read_sql(
                select(q.id.label("qpk"), q.text_hash, q.query_text, q.task, q.split), conn
            )
        return _build_table(long, aliases, queries, llm_ids)

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


def _read_long(conn: Any, stmt: Select[Any]) -> pd.DataFrame:
    """(llm_id, qpk, score, cost_usd) of every score `stmt` selects (its columns: llm key, qpk,
    score, cost or -1), read through the driver's cursor into numpy a million rows at a time:
    pandas.read_sql built a Python row object per score (17 of 22 s at 7.2 M scores)."""
    parts = [
        np.asarray(rows, dtype=np.float64)
        for rows in raw_row_batches(conn, stmt, 1_000_000, literal_binds=True)
    ]
    values = np.concatenate(parts) if parts else np.zeros((0, 4))
    m = schema.llms.c
    names = dict(conn.execute(select(m.id, m.llm_id)).all())
    keys = values[:, 0].astype(np.int64)
    present = np.unique(keys)
    codes = np.searchsorted(present, keys)
    llm_id = np.asarray([names[int(k)] for k in present], dtype=object)[codes]
    cost = values[:, 3]
    return pd.DataFrame(
        {
            "llm_id": llm_id,
            "qpk": values[:, 1].astype(np.int64),
            "score": values[:, 2],
            "cost_usd": np.where(cost < 0, np.nan, cost),
        }
    )


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


def _build_table(
    long: pd.DataFrame,
    aliases: pd.DataFrame,
    queries: pd.DataFrame,
    llm_order: Sequence[str] | None,
) -> ScoreTable:
    """The ScoreTable of `long` (llm_id, qpk, score, cost_usd; one row per stored score)."""
    long = long.assign(cost_usd=long["cost_usd"].astype(float))
    repeated = long.duplicated(["qpk", "llm_id"], keep=False).to_numpy()
    if repeated.any():
        means = (
            long[repeated]
            .groupby(["qpk", "llm_id"], sort=False)[["score", "cost_usd"]]
            .mean()
            .reset_index()
        )
        long = pd.concat([long[~repeated], means], ignore_index=True)
    # each row's key alias: the first by (source, query_id, text_hash) among those read
    rows = (
        aliases[aliases["qpk"].isin(long["qpk"].unique())]
        .sort_values(["source", "query_id", "text_hash"])
        .drop_duplicates("qpk")
        .merge(queries.drop(columns="text_hash"), on="qpk", how="left")
        .reset_index(drop=True)
    )
    keys = _row_keys(rows)
    llm_ids = list(llm_order) if llm_order is not None else sorted(long["llm_id"].unique())
    at_row = pd.Index(rows["qpk"].to_numpy()).get_indexer(pd.Index(long["qpk"]))
    at_col = pd.Index(llm_ids).get_indexer(pd.Index(long["llm_id"]))
    scores = np.full((len(rows), len(llm_ids)), np.nan, dtype=np.float32)
    scores[at_row, at_col] = long["score"].to_numpy(dtype=np.float32)
    costs = None
    cost_values = long["cost_usd"].to_numpy(dtype=float)
    if not np.isnan(cost_values).all():
        costs = np.full_like(scores, np.nan)
        costs[at_row, at_col] = cost_values.astype(np.float32)

    def column(name: str) -> tuple[str | None, ...]:
        return tuple(None if v is None or v != v else str(v) for v in rows[name].tolist())

    return ScoreTable(
        scores=scores,
        llm_ids=tuple(llm_ids),
        query_ids=tuple(keys),
        text_hashes=tuple(str(h) for h in rows["text_hash"].tolist()),
        query_texts=column("query_text"),
        tasks=column("task"),
        splits=column("split"),
        costs=costs,
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
