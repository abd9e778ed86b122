"""Sources: what each import brought, listed and removed whole.

A source is one imported file or folder (`locus.store.ingest.SourceNames` names it from the
path); its scores and its query aliases belong to it. `remove_source` deletes them in one
transaction, with the queries no other source names; `locus import --replace` replaces a
source's scores with a new file's (`StoreImports.write_batch`). An artifact fitted before
either change is stale: its manifest's data checksums no longer match (`Store.checksums`).

    >>> with Store.open(".locus") as store:                              # doctest: +SKIP
    ...     store.sources()[["name", "scores"]]
    ...     store.remove_source("llm3-old")
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select

from locus._lazy import lazy_module
from locus.errors import LocusNotFoundError
from locus.store import schema
from locus.store._core import IN_CHUNK, StoreCore
from locus.store.references import delete_references

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

__all__ = ["StoreSources"]


class StoreSources(StoreCore):
    """`Store.sources`, `Store.has_source`, `Store.remove_source`, `Store.sources_like`."""

    def sources(self) -> pd.DataFrame:
        """One row per source: name, kind (the import format), origin (the file or folder),
        first_imported_at, last_imported_at, llms and scores it holds; sorted by name."""
        src, s = schema.sources.c, schema.scores.c
        counts = (
            select(
                s.source,
                func.count().label("scores"),
                func.count(func.distinct(s.llm)).label("llms"),
            )
            .group_by(s.source)
            .subquery()
        )
        stmt = (
            select(
                src.name,
                src.kind,
                src.origin,
                src.first_imported_at,
                src.last_imported_at,
                func.coalesce(counts.c.llms, 0).label("llms"),
                func.coalesce(counts.c.scores, 0).label("scores"),
            )
            .outerjoin(counts, counts.c.source == src.name)
            .order_by(src.name)
        )
        with self._read() as conn:
            return pd.read_sql(stmt, conn)

    def has_source(self, name: str) -> bool:
        """Whether a source of this name was ever imported (one row read: cheap at any size,
        where `sources` counts every score)."""
        src = schema.sources.c
        with self._read() as conn:
            found = conn.execute(select(src.name).where(src.name == name).limit(1)).first()
        return found is not None

    def sources_like(
        self, llm_ids: Collection[str], query_keys: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The sources that hold exactly the LLMs `llm_ids` (the same set) and score at least
        one of the queries `query_keys` (`schema.query_identity`): what a corrected file under
        a new name may replace. One dict per source (name, origin, llms, scores, shared_queries:
        how many of `query_keys` it scores), sorted by name."""
        s, a, q, llm = schema.scores.c, schema.query_aliases.c, schema.queries.c, schema.llms.c
        wanted = frozenset(llm_ids)
        with self._read() as conn:
            held: dict[str, set[str]] = {}
            pairs = select(s.source, llm.llm_id).join(schema.llms, llm.id == s.llm).distinct()
            for source, llm_id in conn.execute(pairs):
                held.setdefault(str(source), set()).add(str(llm_id))
            same = sorted(name for name, mine in held.items() if mine == wanted)
            if not same:
                return []
            keys = list(dict.fromkeys(query_keys))
            shared: dict[str, int] = dict.fromkeys(same, 0)
            for at in range(0, len(keys), IN_CHUNK):
                stmt = (
                    select(a.source, func.count(func.distinct(q.id)))
                    .join(schema.queries, q.id == a.query)
                    .where(a.source.in_(same), q.query_key.in_(keys[at : at + IN_CHUNK]))
                    .group_by(a.source)
                )
                for source, count in conn.execute(stmt):
                    shared[str(source)] += int(count)
        listed = {str(row["name"]): row for row in self.sources().to_dict("records")}
        return [
            {
                "name": name,
                "origin": str(listed[name]["origin"]),
                "llms": int(listed[name]["llms"]),
                "scores": int(listed[name]["scores"]),
                "shared_queries": shared[name],
            }
            for name in same
            if shared[name] and name in listed
        ]

    def remove_source(self, name: str) -> dict[str, Any]:
        """Delete the source `name`, its scores and its query aliases, and the queries no other
        source names, in one transaction; returns what was removed.

        Raises:
            LocusNotFoundError: no such source (the message lists the sources).
        """
        src, a, s, q = (
            schema.sources.c,
            schema.query_aliases.c,
            schema.scores.c,
            schema.queries.c,
        )
        with self._write() as conn:
            known = [str(n) for n in conn.execute(select(src.name).order_by(src.name)).scalars()]
            if name not in known:
                raise LocusNotFoundError(
                    f"no source {name!r} in this workspace; expected one of "
                    f"{', '.join(known) or 'none'} (see `locus sources`)"
                )
            scores = conn.execute(delete(schema.scores).where(s.source == name)).rowcount
            delete_references(conn, select(a.id).where(a.source == name))
            aliases = conn.execute(delete(schema.query_aliases).where(a.source == name)).rowcount
            named = select(a.query).distinct()
            queries = conn.execute(delete(schema.queries).where(q.id.not_in(named))).rowcount
            conn.execute(delete(schema.sources).where(src.name == name))
            # the skip-unchanged-files records: a removed file must be read again next time
            meta = schema.meta.c
            conn.execute(delete(schema.meta).where(meta.key.like("import_files:%")))
        return {"source": name, "scores": scores, "aliases": aliases, "queries": queries}
