"""Reference answers and probe answers.

- A query's reference answer (and the grader that scores a model's answer against it) is kept
  per alias: each source keeps the answer it gave (`write_references`, inside an import's
  transaction). `StoreReferences.references` reads them by text hash: a query with several
  references takes its first source's (alphabetically).
- `probe_answers` keeps what an endpoint answered to each probe `locus onboard` sent, written
  the moment the answer arrives (one short transaction each), so a crash loses no paid answer
  and a re-run asks only what is missing.
- `canary_answers` keeps each LLM's answers to the canary probes (`locus.pipeline.canary`): its
  baseline, and its latest check, compared with it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, bindparam, delete, select

from locus._lazy import lazy_module
from locus.data.batch import ImportBatch
from locus.store import schema
from locus.store._core import CHUNK, IN_CHUNK, StoreCore, now

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

__all__ = ["CANARY_ROUNDS", "ProbeAnswer", "Reference", "StoreReferences", "write_references"]

# an LLM's answers to the canary probes: the ones it is compared with, and its latest
CANARY_ROUNDS = ("baseline", "latest")


@dataclass(frozen=True)
class Reference:
    """A query's reference answer and the grader (`locus.data.graders.GRADERS`) to score with."""

    answer: str
    grader: str


@dataclass(frozen=True)
class ProbeAnswer:
    """What an endpoint answered to one probe: its text, its grade (None: unreadable), the
    model that answered upstream, tokens, cost (USD, where prices are known) and latency."""

    llm_id: str
    text_hash: str
    answer: str
    score: float | None
    upstream_model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None


def write_references(
    conn: Connection, batch: ImportBatch, alias_pk: Mapping[tuple[str, str], int]
) -> int:
    """Keep the batch's reference answers on its aliases (new ones added, changed ones
    replaced); returns how many were written."""
    if "reference" not in batch.queries.columns:
        return 0
    given = batch.queries.dropna(subset=["reference"])
    if not len(given):
        return 0
    wanted = {
        alias_pk[(query_id, text_hash)]: (str(answer), str(grader))
        for query_id, text_hash, answer, grader in zip(
            given["query_id"], given["text_hash"], given["reference"], given["grader"],
            strict=True,
        )
    }  # fmt: skip
    r = schema.query_references.c
    keys = list(wanted)
    stored = {
        alias: (answer, grader)
        for start in range(0, len(keys), IN_CHUNK)
        for alias, answer, grader in conn.execute(
            select(r.alias, r.answer, r.grader).where(r.alias.in_(keys[start : start + IN_CHUNK]))
        )
    }
    fresh = [
        {"alias": alias, "answer": answer, "grader": grader}
        for alias, (answer, grader) in wanted.items()
        if alias not in stored
    ]
    changed = [
        {"pk": alias, "answer": answer, "grader": grader}
        for alias, (answer, grader) in wanted.items()
        if alias in stored and stored[alias] != (answer, grader)
    ]
    for start in range(0, len(fresh), CHUNK):
        conn.execute(schema.query_references.insert(), fresh[start : start + CHUNK])
    if changed:
        conn.execute(
            schema.query_references.update()
            .where(r.alias == bindparam("pk"))
            .values(answer=bindparam("answer"), grader=bindparam("grader")),
            changed,
        )
    return len(fresh) + len(changed)


def delete_references(conn: Connection, aliases: Any) -> None:
    """Delete the references of the aliases `aliases` selects (before the aliases go)."""
    r = schema.query_references.c
    conn.execute(delete(schema.query_references).where(r.alias.in_(aliases)))


class StoreReferences(StoreCore):
    """`references`, `reference_count`, `put_probe_answer`, `probe_answers`,
    `query_texts`, `put_canary_answers`, `canary_answers`."""

    def references(self, text_hashes: Collection[str] | None = None) -> dict[str, Reference]:
        """{text_hash: Reference} of the queries with a reference answer (among `text_hashes`,
        default all); a query several sources answer takes its first source's."""
        r, a = schema.query_references.c, schema.query_aliases.c
        stmt = (
            select(a.text_hash, a.source, r.answer, r.grader)
            .join(schema.query_aliases, a.id == r.alias)
            .where(a.text_hash != "")
        )
        with self._read() as conn:
            if text_hashes is None:
                rows = pd.read_sql(stmt, conn)
            else:
                wanted = list(text_hashes)
                rows = pd.concat(
                    [
                        pd.read_sql(stmt.where(a.text_hash.in_(wanted[s : s + IN_CHUNK])), conn)
                        for s in range(0, len(wanted), IN_CHUNK)
                    ]
                    or [pd.DataFrame(columns=["text_hash", "source", "answer", "grader"])]
                )
        rows = rows.sort_values(["text_hash", "source"]).drop_duplicates("text_hash")
        return {
            str(h): Reference(str(answer), str(grader))
            for h, answer, grader in zip(
                rows["text_hash"], rows["answer"], rows["grader"], strict=True
            )
        }

    def reference_count(self) -> int:
        """How many queries (with text) have a reference answer."""
        a = schema.query_aliases.c
        stmt = (
            select(a.text_hash)
            .join(schema.query_references, schema.query_references.c.alias == a.id)
            .where(a.text_hash != "")
            .distinct()
        )
        with self._read() as conn:
            return len(conn.execute(stmt).all())

    def put_probe_answer(self, answer: ProbeAnswer) -> None:
        """Keep one probe's answer now (replacing an earlier answer to the same probe)."""
        p = schema.probe_answers.c
        row = {**answer.__dict__, "asked_at": now()}
        with self._write(data=False) as conn:
            conn.execute(
                delete(schema.probe_answers).where(
                    p.llm_id == answer.llm_id, p.text_hash == answer.text_hash
                )
            )
            conn.execute(schema.probe_answers.insert().values(**row))

    def probe_answers(self, llm_id: str) -> dict[str, ProbeAnswer]:
        """{text_hash: ProbeAnswer} of every probe `llm_id` has answered."""
        p = schema.probe_answers.c
        fields = list(ProbeAnswer.__dataclass_fields__)
        with self._read() as conn:
            rows = conn.execute(select(*[p[f] for f in fields]).where(p.llm_id == llm_id)).all()
        return {row.text_hash: ProbeAnswer(**dict(zip(fields, row, strict=True))) for row in rows}

    def put_canary_answers(
        self, llm_id: str, round_: str, answers: Mapping[str, tuple[str, str | None]]
    ) -> None:
        """Keep `llm_id`'s answers {text_hash: (answer, upstream model)} to the canary probes as
        its `round_` ("baseline" or "latest"), replacing that round's earlier answers to them."""
        if round_ not in CANARY_ROUNDS:
            raise ValueError(f"canary round {round_!r}; expected one of {CANARY_ROUNDS}")
        c = schema.canary_answers.c
        stamp = now()
        rows = [
            {"llm_id": llm_id, "text_hash": h, "round": round_, "answer": answer,
             "upstream_model": model, "asked_at": stamp}
            for h, (answer, model) in answers.items()
        ]  # fmt: skip
        with self._write(data=False) as conn:
            conn.execute(
                delete(schema.canary_answers).where(
                    c.llm_id == llm_id, c.round == round_, c.text_hash.in_(list(answers))
                )
            )
            if rows:
                conn.execute(schema.canary_answers.insert(), rows)

    def canary_answers(self, round_: str) -> dict[str, dict[str, str]]:
        """{llm_id: {text_hash: answer}} of every LLM's `round_` answers to the canary probes."""
        c = schema.canary_answers.c
        with self._read() as conn:
            rows = conn.execute(
                select(c.llm_id, c.text_hash, c.answer).where(c.round == round_)
            ).all()
        out: dict[str, dict[str, str]] = {}
        for llm_id, h, answer in rows:
            out.setdefault(str(llm_id), {})[str(h)] = str(answer)
        return out

    def query_texts(
        self, text_hashes: Collection[str] | None = None
    ) -> dict[str, tuple[str, str | None]]:
        """{text_hash: (text, task)} of the queries with text (among `text_hashes`, default
        all)."""
        q = schema.queries.c
        stmt = select(q.text_hash, q.query_text, q.task).where(q.query_text.is_not(None))
        with self._read() as conn:
            if text_hashes is None:
                rows = conn.execute(stmt).all()
            else:
                wanted = list(text_hashes)
                rows = [
                    row
                    for s in range(0, len(wanted), IN_CHUNK)
                    for row in conn.execute(stmt.where(q.text_hash.in_(wanted[s : s + IN_CHUNK])))
                ]
        return {str(h): (str(text), task) for h, text, task in rows if text}
