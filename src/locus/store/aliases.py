"""Query identities and aliases of an import: which query each of a batch's queries is.

Each (source, query_id, text_hash) of a file is an alias; it points at the query identity
`schema.query_identity` names: the normalised text, shared by every source, or
(namespace, query_id) without text. `write_aliases` adds the identities and aliases a batch
brings, inside the import's transaction.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, bindparam, select

from locus._lazy import lazy_module
from locus.data.batch import ImportBatch
from locus.errors import LocusConflictError
from locus.store import schema
from locus.store._core import CHUNK, IN_CHUNK

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

__all__ = ["write_aliases"]

logger = logging.getLogger("locus.store")


def write_aliases(
    conn: Connection, batch: ImportBatch
) -> tuple[int, int, dict[tuple[str, str], int]]:
    """Add the batch's new query identities and aliases.

    A new identity takes its text and its first non-null task and split from the batch; a
    stored identity without a task (split) takes the batch's; a stored one that has another is
    kept (and logged), the alias keeps its own.

    Returns:
        (new queries, new aliases, (query_id, text_hash) -> alias id for every alias of the
        batch's source).

    Raises:
        LocusConflictError: a query without text that this source imported under another
            namespace.
    """
    aliases = _batch_aliases(batch)
    stored = _stored_aliases(conn, batch.source)
    aliases = aliases.merge(stored, on=["query_id", "text_hash"], how="left")
    known = aliases["alias"].notna().to_numpy()
    _check_namespaces(aliases[known], batch)
    fresh = aliases[~known]
    new_queries, query_pk = _insert_queries(conn, fresh, batch.origin)
    _insert_aliases(conn, batch.source, fresh, query_pk)
    return new_queries, len(fresh), _alias_keys(conn, batch.source)


def _batch_aliases(batch: ImportBatch) -> pd.DataFrame:
    """The batch's queries with their identity: query_id, text_hash, query_text, task, split,
    query_key (in file order)."""
    aliases = batch.queries[["query_id", "text_hash", "query_text", "task", "split"]].copy()
    aliases["query_key"] = [
        schema.query_identity(text_hash, batch.namespace, query_id)
        for query_id, text_hash in zip(aliases["query_id"], aliases["text_hash"], strict=True)
    ]
    return aliases


def _stored_aliases(conn: Connection, source: str) -> pd.DataFrame:
    """The source's stored aliases: query_id, text_hash, alias, stored_key."""
    a, q = schema.query_aliases.c, schema.queries.c
    return pd.read_sql(
        select(a.query_id, a.text_hash, a.id.label("alias"), q.query_key.label("stored_key"))
        .join(schema.queries, q.id == a.query)
        .where(a.source == source),
        conn,
    )


def _check_namespaces(known: pd.DataFrame, batch: ImportBatch) -> None:
    """A query without text keeps the namespace its source first imported it in."""
    moved = known[known["query_key"] != known["stored_key"]]
    if not len(moved):
        return
    first = moved.iloc[0]
    stored_key = str(first["stored_key"])
    stored_namespace = json.loads(stored_key)[0] if stored_key.startswith("[") else stored_key
    raise LocusConflictError(
        f"{batch.origin}: query {first['query_id']!r} of source {batch.source!r} has no text and "
        f"is stored in namespace {stored_namespace!r}, found namespace {batch.namespace!r} "
        f"({len(moved)} such queries); expected the namespace the source was first imported "
        f"with; pass --namespace {stored_namespace}, or import under another --source"
    )


def _query_rows(conn: Connection, keys: list[str]) -> pd.DataFrame:
    """Stored queries among `keys`: query_key, id, task, split."""
    q = schema.queries.c
    rows = [
        tuple(row)
        for start in range(0, len(keys), IN_CHUNK)
        for row in conn.execute(
            select(q.query_key, q.id, q.task, q.split).where(
                q.query_key.in_(keys[start : start + IN_CHUNK])
            )
        )
    ]
    return pd.DataFrame(rows, columns=["query_key", "id", "task", "split"], dtype=object)


def _insert_queries(
    conn: Connection, fresh: pd.DataFrame, origin: str
) -> tuple[int, dict[str, int]]:
    """Add the query identities of the new aliases that the store lacks; fill in a stored
    query's task / split where it has none. Returns (new queries, query_key -> queries.id)."""
    if not len(fresh):
        return 0, {}
    # GroupBy.first takes the first non-null value of each column
    wanted = fresh.groupby("query_key", sort=False)[
        ["text_hash", "query_text", "task", "split"]
    ].first()
    stored = _query_rows(conn, wanted.index.tolist())
    stored_by_key = stored.set_index("query_key")
    for field in ("task", "split"):
        _fill_missing(conn, field, wanted[field], stored_by_key, fresh, origin)
    missing = wanted[~wanted.index.isin(stored_by_key.index)]
    rows = [
        {
            "query_key": key,
            "text_hash": record["text_hash"],
            "query_text": _none(record["query_text"]),
            "task": _none(record["task"]),
            "split": _none(record["split"]),
        }
        for key, record in zip(missing.index, missing.to_dict("records"), strict=True)
    ]
    for start in range(0, len(rows), CHUNK):
        conn.execute(schema.queries.insert(), rows[start : start + CHUNK])
    keys = dict(zip(stored["query_key"], stored["id"].astype(int), strict=True))
    if rows:
        added = _query_rows(conn, missing.index.tolist())
        keys.update(zip(added["query_key"], added["id"].astype(int), strict=True))
    return len(rows), keys


def _fill_missing(
    conn: Connection,
    field: str,
    given: pd.Series,
    stored: pd.DataFrame,
    fresh: pd.DataFrame,
    origin: str,
) -> None:
    """Give stored queries without `field` the batch's value; log where they already differ."""
    both = stored[[field, "id"]].join(given.rename("given"), how="inner")
    has_given = both["given"].notna()
    fill = both[has_given & both[field].isna()]
    if len(fill):
        q = schema.queries.c
        conn.execute(
            schema.queries.update()
            .where(q.id == bindparam("pk"))
            .values({field: bindparam("value")}),
            [
                {"pk": int(pk), "value": value}
                for pk, value in zip(fill["id"], fill["given"], strict=True)
            ],
        )
    # another value than the query's: a stored one, or an earlier alias's in this file
    values: dict[str, set[object]] = {}
    for key, value in stored[field].dropna().items():
        values.setdefault(str(key), set()).add(value)
    for key, value in zip(fresh["query_key"], fresh[field], strict=True):
        if _none(value) is not None:
            values.setdefault(key, set()).add(value)
    differing = sum(len(seen) > 1 for seen in values.values())
    if differing:
        logger.warning(
            "%s: %d queries have a %s here other than the one first seen for the same query; "
            "kept the first for the query, each source's own on its alias",
            origin,
            differing,
            field,
        )


def _insert_aliases(
    conn: Connection, source: str, fresh: pd.DataFrame, query_pk: dict[str, int]
) -> None:
    rows = [
        {
            "source": source,
            "query_id": record["query_id"],
            "text_hash": record["text_hash"],
            "query": query_pk[record["query_key"]],
            "task": _none(record["task"]),
            "split": _none(record["split"]),
        }
        for record in fresh.to_dict("records")
    ]
    for start in range(0, len(rows), CHUNK):
        conn.execute(schema.query_aliases.insert(), rows[start : start + CHUNK])


def _alias_keys(conn: Connection, source: str) -> dict[tuple[str, str], int]:
    a = schema.query_aliases.c
    rows = conn.execute(select(a.query_id, a.text_hash, a.id).where(a.source == source)).all()
    return {(query_id, text_hash): pk for query_id, text_hash, pk in rows}


def _none(value: object) -> Any:
    """NaN / None -> None (pandas turns missing object cells into either)."""
    return None if value is None or value != value else value
