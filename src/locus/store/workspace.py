"""`Store`: a workspace directory holding `locus.db` (SQLite, WAL) and `artifacts/`.

This module and `schema.py` are the only code that speaks SQL. Every write is one transaction:
an import either lands whole or changes nothing, and readers in other processes keep seeing the
last committed state while a write runs (SQLite WAL).

    >>> from locus.store import Store
    >>> with Store.open("/tmp/locus-doc-ws") as store:
    ...     store.counts()["llms"] >= 0
    True
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, Engine, create_engine, event, func, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError

from locus._progress import ProgressFactory, no_progress
from locus.data.batch import ImportBatch
from locus.data.table import ScoreTable
from locus.errors import LocusConflictError, LocusNotFoundError, LocusStoreError
from locus.store import schema
from locus.store.schema import SCHEMA_VERSION

__all__ = ["DEFAULT_WORKSPACE", "ImportReport", "Store", "resolve_workspace"]

DEFAULT_WORKSPACE = ".locus"
DB_NAME = "locus.db"
_CHUNK = 20_000
_LLM_METADATA = (
    "display_name",
    "family",
    "params_b",
    "price_in_per_mtok",
    "price_out_per_mtok",
    "cost_per_query",
    "endpoint",
)


def resolve_workspace(path: str | os.PathLike[str] | None) -> Path:
    """The workspace directory: `path`, else `$LOCUS_WORKSPACE`, else `./.locus`."""
    if path is not None and str(path) != "":
        return Path(path)
    return Path(os.environ.get("LOCUS_WORKSPACE") or DEFAULT_WORKSPACE)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class ImportReport:
    """What one import changed. `changed` is False when the data was already there."""

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

    @property
    def changed(self) -> bool:
        return bool(self.new_llms or self.new_queries or self.new_scores or self.replaced_scores)

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "changed": self.changed}


class Store:
    """The workspace store. Open with `Store.open(path)`; use as a context manager.

    Args (of `open`):
        path: workspace directory (created if absent, unless `create=False`).
        create: create the directory and database when missing.
    """

    def __init__(self, workspace: Path, engine: Engine) -> None:
        self.workspace = workspace
        self._engine = engine

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *, create: bool = True) -> Store:
        workspace = resolve_workspace(path)
        if workspace.exists() and not workspace.is_dir():
            raise LocusStoreError(
                f"workspace {workspace}: expected a directory, found a file; pass another "
                "--workspace (or set LOCUS_WORKSPACE) or move the file away"
            )
        db_path = workspace / DB_NAME
        if not db_path.exists():
            if not create:
                raise LocusStoreError(
                    f"workspace {workspace}: no {DB_NAME} there; import data first "
                    "(locus import ...) or pass the right --workspace"
                )
            try:
                workspace.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise LocusStoreError(
                    f"workspace {workspace}: cannot create the directory ({error.strerror}); "
                    "pass a writable --workspace"
                ) from error
        engine = create_engine(f"sqlite:///{db_path}", future=True)
        _configure_sqlite(engine)
        store = cls(workspace, engine)
        try:
            store._initialise()
        except DBAPIError as error:
            engine.dispose()
            raise LocusStoreError(
                f"workspace {workspace}: {DB_NAME} is not a locus database or is damaged "
                f"({error.orig}); pass another --workspace"
            ) from error
        return store

    def _initialise(self) -> None:
        # Read first: opening an existing workspace must not wait for a running import's lock.
        with self._read() as conn:
            version = None
            if conn.dialect.has_table(conn, "meta"):
                version = conn.execute(
                    select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
                ).scalar()
        if version is not None and int(version) == SCHEMA_VERSION:
            return
        with self._write() as conn:
            schema.metadata.create_all(conn)
            row = conn.execute(
                select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
            ).first()
            if row is None:
                conn.execute(
                    schema.meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION))
                )
                conn.execute(schema.meta.insert().values(key="created_at", value=_now()))
            elif int(row[0]) > SCHEMA_VERSION:
                raise LocusStoreError(
                    f"workspace {self.workspace}: schema version {row[0]} was written by a newer "
                    f"locus; this one reads up to {SCHEMA_VERSION}; upgrade locus"
                )

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def artifacts_dir(self) -> Path:
        return self.workspace / "artifacts"

    @property
    def db_path(self) -> Path:
        return self.workspace / DB_NAME

    # -- transactions ----------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """One write transaction, taken with BEGIN IMMEDIATE so writers queue instead of failing."""
        with self._engine.connect() as conn:
            conn.info["begin"] = "BEGIN IMMEDIATE"
            try:
                with conn.begin():
                    yield conn
            finally:
                conn.info.pop("begin", None)

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._engine.connect() as conn, conn.begin():
            yield conn

    # -- imports ---------------------------------------------------------------------------

    def write_batch(
        self,
        batch: ImportBatch,
        *,
        kind: str,
        replace: bool = False,
        progress: ProgressFactory = no_progress,
    ) -> ImportReport:
        """Write one import in one transaction.

        Scores already present with the same value are left alone, so re-importing changes
        nothing. A different score for an existing (LLM, query, source) raises
        `LocusConflictError` unless `replace=True`; then nothing is written.
        """
        now = _now()
        with self._write() as conn:
            self._upsert_source(conn, batch, kind, now)
            new_llms = self._insert_llms(conn, batch.llms, now)
            new_queries = self._insert_queries(conn, batch)
            llm_pk = self._llm_keys(conn, batch.llms["llm_id"].tolist())
            query_pk = self._query_keys(conn, batch.source)

            incoming = batch.scores.copy()
            incoming["llm"] = incoming["llm_id"].map(llm_pk).astype("int64")
            incoming["query"] = [
                query_pk[key]
                for key in zip(incoming["query_id"], incoming["text_hash"], strict=True)
            ]
            existing = pd.read_sql(
                select(schema.scores.c.llm, schema.scores.c.query, schema.scores.c.score).where(
                    schema.scores.c.source == batch.source
                ),
                conn,
            )
            merged = incoming.merge(
                existing.rename(columns={"score": "old_score"}), on=["llm", "query"], how="left"
            )
            is_new = merged["old_score"].isna().to_numpy()
            differs = ~is_new & ~np.isclose(
                merged["score"].to_numpy(float), merged["old_score"].to_numpy(float), atol=1e-12
            )
            if differs.any() and not replace:
                first = merged[differs].iloc[0]
                raise LocusConflictError(
                    f"{batch.origin}: {int(differs.sum())} score(s) differ from the store, e.g. "
                    f"LLM {first['llm_id']!r} on query {first['query_id']!r} (source "
                    f"{batch.source!r}): stored {first['old_score']:g}, file {first['score']:g}; "
                    "expected the same value on re-import; pass --replace to overwrite, or "
                    "import under another --source"
                )
            to_insert = merged[is_new]
            to_replace = merged[differs]
            total = len(to_insert) + len(to_replace)
            with progress(f"writing {total:,} scores", total=total) as advance:
                self._insert_scores(conn, to_insert, batch.source, now, advance)
                if len(to_replace):
                    self._replace_scores(conn, to_replace, batch.source, now, advance)
        return ImportReport(
            source=batch.source,
            origin=batch.origin,
            llms_in_file=batch.n_llms,
            queries_in_file=batch.n_queries,
            scores_in_file=batch.n_scores,
            new_llms=new_llms,
            new_queries=new_queries,
            new_scores=len(to_insert),
            replaced_scores=len(to_replace),
            unchanged_scores=int((~is_new & ~differs).sum()),
        )

    def _upsert_source(self, conn: Connection, batch: ImportBatch, kind: str, now: str) -> None:
        table = schema.sources
        stmt = sqlite_insert(table).values(
            name=batch.source,
            kind=kind,
            origin=batch.origin,
            first_imported_at=now,
            last_imported_at=now,
        )
        conn.execute(stmt.on_conflict_do_nothing(index_elements=["name"]))

    def _insert_llms(self, conn: Connection, llms: pd.DataFrame, now: str) -> int:
        before = conn.execute(select(func.count()).select_from(schema.llms)).scalar_one()
        rows = []
        for record in llms.to_dict("records"):
            row: dict[str, Any] = {"llm_id": record["llm_id"], "created_at": now}
            for column in _LLM_METADATA:
                value = record.get(column)
                row[column] = None if value is None or value != value else value
            rows.append(row)
        if rows:
            conn.execute(
                sqlite_insert(schema.llms).on_conflict_do_nothing(index_elements=["llm_id"]), rows
            )
        after = conn.execute(select(func.count()).select_from(schema.llms)).scalar_one()
        return int(after - before)

    def _insert_queries(self, conn: Connection, batch: ImportBatch) -> int:
        before = conn.execute(select(func.count()).select_from(schema.queries)).scalar_one()
        rows = [
            {
                "source": batch.source,
                "query_id": r["query_id"],
                "text_hash": r["text_hash"],
                "query_text": r["query_text"],
                "task": r["task"],
                "split": r["split"],
            }
            for r in batch.queries.to_dict("records")
        ]
        stmt = sqlite_insert(schema.queries).on_conflict_do_nothing(
            index_elements=["source", "query_id", "text_hash"]
        )
        for start in range(0, len(rows), _CHUNK):
            conn.execute(stmt, rows[start : start + _CHUNK])
        after = conn.execute(select(func.count()).select_from(schema.queries)).scalar_one()
        return int(after - before)

    def _llm_keys(self, conn: Connection, llm_ids: Sequence[str]) -> dict[str, int]:
        rows = conn.execute(select(schema.llms.c.llm_id, schema.llms.c.id)).all()
        wanted = set(llm_ids)
        return {llm_id: pk for llm_id, pk in rows if llm_id in wanted}

    def _query_keys(self, conn: Connection, source: str) -> dict[tuple[str, str], int]:
        q = schema.queries.c
        rows = conn.execute(select(q.query_id, q.text_hash, q.id).where(q.source == source)).all()
        return {(query_id, text_hash): pk for query_id, text_hash, pk in rows}

    def _insert_scores(
        self, conn: Connection, rows: pd.DataFrame, source: str, now: str, advance: Any
    ) -> None:
        records = _score_records(rows, source, now)
        for start in range(0, len(records), _CHUNK):
            chunk = records[start : start + _CHUNK]
            conn.execute(schema.scores.insert(), chunk)
            advance(len(chunk))

    def _replace_scores(
        self, conn: Connection, rows: pd.DataFrame, source: str, now: str, advance: Any
    ) -> None:
        records = _score_records(rows, source, now)
        stmt = sqlite_insert(schema.scores)
        stmt = stmt.on_conflict_do_update(
            index_elements=["llm", "query", "source"],
            set_={
                "score": stmt.excluded.score,
                "cost_usd": stmt.excluded.cost_usd,
                "latency_ms": stmt.excluded.latency_ms,
                "imported_at": stmt.excluded.imported_at,
            },
        )
        for start in range(0, len(records), _CHUNK):
            chunk = records[start : start + _CHUNK]
            conn.execute(stmt, chunk)
            advance(len(chunk))

    # -- reading ---------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Row counts: llms, queries, scores, sources, query_vectors, llm_embeddings."""
        tables = {
            "llms": schema.llms,
            "queries": schema.queries,
            "scores": schema.scores,
            "sources": schema.sources,
            "query_vectors": schema.query_vectors,
            "llm_embeddings": schema.llm_embeddings,
        }
        with self._read() as conn:
            return {
                name: int(conn.execute(select(func.count()).select_from(t)).scalar_one())
                for name, t in tables.items()
            }

    def checksums(self) -> dict[str, str]:
        """sha256 of the content of the llms, queries and scores tables (timestamps excluded).

        Two stores holding the same data have the same checksums, whatever order it came in.
        """
        q, s, m = schema.queries.c, schema.scores.c, schema.llms.c
        statements = {
            "llms": select(m.llm_id, *[m[c] for c in _LLM_METADATA]).order_by(m.llm_id),
            "queries": select(q.source, q.query_id, q.text_hash, q.task, q.split).order_by(
                q.source, q.query_id, q.text_hash
            ),
            "scores": select(
                m.llm_id, q.source, q.query_id, q.text_hash, s.score, s.cost_usd, s.latency_ms
            )
            .join(schema.llms, schema.llms.c.id == s.llm)
            .join(schema.queries, schema.queries.c.id == s.query)
            .order_by(m.llm_id, q.source, q.query_id, q.text_hash),
        }
        out = {}
        with self._read() as conn:
            for name, stmt in statements.items():
                digest = hashlib.sha256()
                for row in conn.execute(stmt):
                    digest.update(json.dumps(list(row), default=str).encode())
                    digest.update(b"\n")
                out[name] = digest.hexdigest()
        return out

    def sources(self) -> pd.DataFrame:
        with self._read() as conn:
            return pd.read_sql(select(schema.sources).order_by(schema.sources.c.name), conn)

    def llm_ids(self) -> list[str]:
        with self._read() as conn:
            return list(
                conn.execute(select(schema.llms.c.llm_id).order_by(schema.llms.c.llm_id)).scalars()
            )

    def llm_summary(self) -> pd.DataFrame:
        """One row per LLM: llm_id, queries scored, mean score, tasks, best task and its mean."""
        m, s, q = schema.llms.c, schema.scores.c, schema.queries.c
        stmt = (
            select(m.llm_id, q.task, func.count().label("n"), func.sum(s.score).label("total"))
            .select_from(schema.llms)
            .join(schema.scores, s.llm == m.id, isouter=True)
            .join(schema.queries, q.id == s.query, isouter=True)
            .group_by(m.llm_id, q.task)
        )
        with self._read() as conn:
            per_task = pd.read_sql(stmt, conn)
        rows = []
        for llm_id, group in per_task.groupby("llm_id", sort=True):
            n = int(group["n"].sum()) if group["total"].notna().any() else 0
            total = float(group["total"].fillna(0).sum())
            tasks = group[group["task"].notna() & (group["n"] > 0)]
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

        Query keys are `query_id`, with `@<8 hex of text hash>` appended where one id carries
        several texts, and `<source>/` prepended when several sources are read.
        """
        m, s, q = schema.llms.c, schema.scores.c, schema.queries.c
        stmt = (
            select(
                m.llm_id,
                q.id.label("qpk"),
                q.source,
                q.query_id,
                q.text_hash,
                q.query_text,
                q.task,
                q.split,
                s.score,
                s.cost_usd,
            )
            .join(schema.llms, m.id == s.llm)
            .join(schema.queries, q.id == s.query)
        )
        if sources is not None:
            stmt = stmt.where(q.source.in_(list(sources)))
        if llm_ids is not None:
            unknown = sorted(set(llm_ids) - set(self.llm_ids()))
            if unknown:
                raise LocusNotFoundError(
                    f"unknown LLM {unknown[0]!r}; expected one of the workspace's LLMs "
                    "(see `locus llms`)"
                )
            stmt = stmt.where(m.llm_id.in_(list(llm_ids)))
        with self._read() as conn:
            long = pd.read_sql(stmt, conn)
        return ScoreTable.from_long_store_rows(long, llm_order=llm_ids)

    # -- LLM embeddings --------------------------------------------------------------------

    def replace_embeddings(
        self,
        artifact: str,
        llm_ids: Sequence[str],
        vectors: np.ndarray,
        evidence_counts: Sequence[int] | np.ndarray,
        *,
        only: bool = False,
    ) -> None:
        """Store LLM embeddings (n, dim) of `artifact` in one transaction.

        With `only=False` the artifact's stored set becomes exactly these LLMs (after a fit);
        with `only=True` just these LLMs are inserted or updated (onboarding).
        """
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        if vectors.ndim != 2 or not len(vectors) == len(llm_ids) == len(evidence_counts):
            raise ValueError(
                f"expected ({len(llm_ids)}, dim) vectors and {len(llm_ids)} counts, found "
                f"{vectors.shape} and {len(evidence_counts)}"
            )
        now = _now()
        e = schema.llm_embeddings.c
        with self._write() as conn:
            keys = self._llm_keys(conn, list(llm_ids))
            missing = [llm for llm in llm_ids if llm not in keys]
            if missing:
                raise LocusNotFoundError(f"unknown LLM {missing[0]!r}; import its scores first")
            if not only:
                conn.execute(schema.llm_embeddings.delete().where(e.artifact == artifact))
            rows = [
                {
                    "artifact": artifact,
                    "llm": keys[llm],
                    "evidence_count": int(count),
                    "dim": int(vectors.shape[1]),
                    "vector": vectors[i].tobytes(),
                    "computed_at": now,
                }
                for i, (llm, count) in enumerate(zip(llm_ids, evidence_counts, strict=True))
            ]
            stmt = sqlite_insert(schema.llm_embeddings)
            stmt = stmt.on_conflict_do_update(
                index_elements=["artifact", "llm"],
                set_={
                    "evidence_count": stmt.excluded.evidence_count,
                    "dim": stmt.excluded.dim,
                    "vector": stmt.excluded.vector,
                    "computed_at": stmt.excluded.computed_at,
                },
            )
            if rows:
                conn.execute(stmt, rows)

    def embeddings(self, artifact: str) -> tuple[list[str], np.ndarray, list[int]]:
        """(llm_ids, embeddings (n, dim) float32, evidence counts) stored for `artifact`."""
        e, m = schema.llm_embeddings.c, schema.llms.c
        stmt = (
            select(m.llm_id, e.evidence_count, e.vector)
            .join(schema.llms, m.id == e.llm)
            .where(e.artifact == artifact)
            .order_by(m.llm_id)
        )
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32), []
        vectors = np.stack([np.frombuffer(blob, dtype="<f4") for _, _, blob in rows])
        return [r[0] for r in rows], vectors.astype(np.float32), [int(r[1]) for r in rows]

    def llm_costs(self) -> dict[str, float]:
        """Mean observed cost per query (USD) of each LLM that has costs."""
        m, s = schema.llms.c, schema.scores.c
        stmt = (
            select(m.llm_id, func.avg(s.cost_usd))
            .join(schema.scores, s.llm == m.id)
            .where(s.cost_usd.is_not(None))
            .group_by(m.llm_id)
        )
        with self._read() as conn:
            return {llm: float(cost) for llm, cost in conn.execute(stmt).all()}

    # -- query vectors ---------------------------------------------------------------------

    def texts_without_vectors(self, encoder: str) -> list[tuple[str, str]]:
        """(text_hash, text) of every distinct query text with no vector for `encoder`."""
        q, v = schema.queries.c, schema.query_vectors.c
        have = select(v.text_hash).where(v.encoder == encoder)
        stmt = (
            select(q.text_hash, func.min(q.query_text))
            .where(q.text_hash != "", q.text_hash.not_in(have))
            .group_by(q.text_hash)
            .order_by(q.text_hash)
        )
        with self._read() as conn:
            return [(h, t) for h, t in conn.execute(stmt).all()]

    def put_vectors(self, encoder: str, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Store query vectors (n, dim) float32 for `encoder`, one transaction."""
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        if vectors.ndim != 2 or len(vectors) != len(hashes):
            raise ValueError(
                f"expected vectors of shape ({len(hashes)}, dim), found {vectors.shape}"
            )
        dim = int(vectors.shape[1])
        rows = [
            {"encoder": encoder, "text_hash": h, "dim": dim, "vector": vectors[i].tobytes()}
            for i, h in enumerate(hashes)
        ]
        stmt = sqlite_insert(schema.query_vectors).on_conflict_do_nothing(
            index_elements=["encoder", "text_hash"]
        )
        with self._write() as conn:
            conn.execute(stmt, rows)

    def get_vectors(self, encoder: str, hashes: Sequence[str]) -> np.ndarray:
        """Query vectors (len(hashes), dim) float32 in the order of `hashes`.

        Raises:
            LocusNotFoundError: some text has no vector for this encoder (run `locus encode`).
        """
        v = schema.query_vectors.c
        found: dict[str, np.ndarray] = {}
        wanted = list(dict.fromkeys(hashes))
        with self._read() as conn:
            for start in range(0, len(wanted), 900):
                part = wanted[start : start + 900]
                for h, blob in conn.execute(
                    select(v.text_hash, v.vector).where(v.encoder == encoder, v.text_hash.in_(part))
                ):
                    found[h] = np.frombuffer(blob, dtype="<f4")
        missing = [h for h in wanted if h not in found]
        if missing:
            raise LocusNotFoundError(
                f"{len(missing)} query text(s) have no vector for text encoder {encoder!r}; "
                "run `locus encode` first"
            )
        if not hashes:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[h] for h in hashes]).astype(np.float32)

    def vector_dim(self, encoder: str) -> int:
        """Dimension of the stored vectors of `encoder` (0 if none)."""
        v = schema.query_vectors.c
        with self._read() as conn:
            dim = conn.execute(select(v.dim).where(v.encoder == encoder).limit(1)).scalar()
        return int(dim or 0)

    def get_meta(self, key: str) -> str | None:
        with self._read() as conn:
            return conn.execute(
                select(schema.meta.c.value).where(schema.meta.c.key == key)
            ).scalar()

    def set_meta(self, key: str, value: str) -> None:
        stmt = sqlite_insert(schema.meta).values(key=key, value=value)
        stmt = stmt.on_conflict_do_update(index_elements=["key"], set_={"value": value})
        with self._write() as conn:
            conn.execute(stmt)

    @property
    def text_encoder(self) -> str | None:
        """Name of the text encoder the workspace's queries were encoded with (None: not yet)."""
        return self.get_meta("text_encoder")

    def vector_count(self, encoder: str) -> int:
        v = schema.query_vectors.c
        with self._read() as conn:
            return int(
                conn.execute(
                    select(func.count())
                    .select_from(schema.query_vectors)
                    .where(v.encoder == encoder)
                ).scalar_one()
            )


def _score_records(rows: pd.DataFrame, source: str, now: str) -> list[dict[str, Any]]:
    cost = rows["cost_usd"].to_numpy(float)
    latency = rows["latency_ms"].to_numpy(float)
    return [
        {
            "llm": int(llm),
            "query": int(query),
            "source": source,
            "score": float(score),
            "cost_usd": None if np.isnan(c) else float(c),
            "latency_ms": None if np.isnan(lat) else float(lat),
            "imported_at": now,
        }
        for llm, query, score, c, lat in zip(
            rows["llm"].to_numpy(),
            rows["query"].to_numpy(),
            rows["score"].to_numpy(float),
            cost,
            latency,
            strict=True,
        )
    ]


def _configure_sqlite(engine: Engine) -> None:
    """WAL, foreign keys, a busy timeout, and transactions that SQLite (not pysqlite) begins."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = 60000")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql(conn.info.get("begin", "BEGIN"))
