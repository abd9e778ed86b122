"""The fast score digest gives, byte for byte, the digest of one JSON line per score."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
from sqlalchemy import select

from locus.data.batch import ImportBatch
from locus.store import Store, schema
from locus.store.checksums import _digest_content


def test_the_score_digest_is_json_lines_whatever_the_values(workspace: Path) -> None:
    rows = pd.DataFrame(
        {
            "llm_id": ["m\u00e9", 'say "hi"', "m\u00e9", "plain"],
            "query_id": ["q1", "q2", "q\\3", "q4"],
            "query_text": ["caf\u00e9?", "two\nlines", "tab\there", None],
            "score": [0.1, 1.0, 1 / 3, 0.0],
            "cost_usd": [None, 1e-7, 12.5, None],
        }
    )
    a, s, m = schema.query_aliases.c, schema.scores.c, schema.llms.c
    plain = (
        select(m.llm_id, a.source, a.query_id, a.text_hash, s.score, s.cost_usd, s.latency_ms)
        .join(schema.llms, m.id == s.llm)
        .join(schema.query_aliases, a.id == s.alias)
        .order_by(m.llm_id, a.source, a.query_id, a.text_hash)
    )
    # orders where bytes, case and numbers disagree: "B" < "a" < "\u00e9"; "q10" < "q9"
    many = pd.DataFrame(
        [
            {"llm_id": llm, "query_id": q, "query_text": f"text {q} \U0001f600" if i % 3 else None,
             "score": (i * 7 % 10) / 9, "cost_usd": None if i % 2 else i * 1e-4}
            for i, (llm, q) in enumerate(
                (llm, q) for llm in ("B", "a", "\u00e9", "Z", "m\u00e9")
                for q in ("q9", "q10", "Q1", "q\u00e9", "q1")
            )
        ]
    )  # fmt: skip
    with Store.open(workspace) as store:
        store.write_batch(ImportBatch.from_long(rows, source="s\u00f8", origin="f"), kind="t")
        store.write_batch(ImportBatch.from_long(many, source="B-source", origin="g"), kind="t")
        store.write_batch(ImportBatch.from_long(many, source="a-source", origin="h"), kind="t")
        with store._read() as conn:
            fast = _digest_content(conn)["scores"]
            reference = hashlib.sha256()
            for row in conn.execute(plain):
                reference.update(json.dumps(list(row), default=str).encode() + b"\n")
            rows_read = conn.execute(plain).all()
    assert len(rows_read) == 4 + 2 * 25
    assert fast == reference.hexdigest()
