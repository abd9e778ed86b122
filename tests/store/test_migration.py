"""Schema migrations 1 -> 2 -> 3: an older workspace opens at the current version, data intact.

The version-1 database is built here with the exact DDL of schema version 1 (as SQLAlchemy
emitted it for SQLite) and filled the way version 1's `write_batch` filled it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locus.data.batch import ImportBatch
from locus.errors import LocusStoreError
from locus.store import Store
from locus.store.schema import SCHEMA_VERSION

V1_DDL = """
CREATE TABLE llms (
	id INTEGER NOT NULL,
	llm_id VARCHAR(300) NOT NULL,
	display_name TEXT,
	family TEXT,
	params_b FLOAT,
	price_in_per_mtok FLOAT,
	price_out_per_mtok FLOAT,
	cost_per_query FLOAT,
	endpoint TEXT,
	created_at VARCHAR(40) NOT NULL,
	PRIMARY KEY (id),
	UNIQUE (llm_id)
);
CREATE TABLE meta (
	"key" VARCHAR(64) NOT NULL,
	value TEXT NOT NULL,
	PRIMARY KEY ("key")
);
CREATE TABLE query_vectors (
	encoder VARCHAR(300) NOT NULL,
	text_hash VARCHAR(64) NOT NULL,
	dim INTEGER NOT NULL,
	vector BLOB NOT NULL,
	CONSTRAINT pk_query_vectors PRIMARY KEY (encoder, text_hash)
);
CREATE TABLE runs (
	id INTEGER NOT NULL,
	kind VARCHAR(64) NOT NULL,
	created_at VARCHAR(40) NOT NULL,
	config TEXT NOT NULL,
	results TEXT NOT NULL,
	PRIMARY KEY (id)
);
CREATE TABLE sources (
	name VARCHAR(200) NOT NULL,
	kind VARCHAR(64) NOT NULL,
	origin TEXT NOT NULL,
	first_imported_at VARCHAR(40) NOT NULL,
	last_imported_at VARCHAR(40) NOT NULL,
	PRIMARY KEY (name)
);
CREATE TABLE llm_embeddings (
	artifact VARCHAR(300) NOT NULL,
	llm INTEGER NOT NULL,
	evidence_count INTEGER NOT NULL,
	dim INTEGER NOT NULL,
	vector BLOB NOT NULL,
	computed_at VARCHAR(40) NOT NULL,
	CONSTRAINT pk_llm_embeddings PRIMARY KEY (artifact, llm),
	FOREIGN KEY(llm) REFERENCES llms (id)
);
CREATE TABLE queries (
	id INTEGER NOT NULL,
	source VARCHAR(200) NOT NULL,
	query_id VARCHAR(300) NOT NULL,
	text_hash VARCHAR(64) NOT NULL,
	query_text TEXT,
	task VARCHAR(200),
	split VARCHAR(16),
	PRIMARY KEY (id),
	CONSTRAINT uq_query_identity UNIQUE (source, query_id, text_hash),
	FOREIGN KEY(source) REFERENCES sources (name)
);
CREATE INDEX ix_queries_text_hash ON queries (text_hash);
CREATE TABLE scores (
	llm INTEGER NOT NULL,
	"query" INTEGER NOT NULL,
	source VARCHAR(200) NOT NULL,
	score FLOAT NOT NULL,
	cost_usd FLOAT,
	latency_ms FLOAT,
	imported_at VARCHAR(40) NOT NULL,
	CONSTRAINT pk_scores PRIMARY KEY (llm, "query", source),
	FOREIGN KEY(llm) REFERENCES llms (id),
	FOREIGN KEY("query") REFERENCES queries (id),
	FOREIGN KEY(source) REFERENCES sources (name)
);
CREATE INDEX ix_scores_query ON scores ("query");
"""

STAMP = "2026-01-01T00:00:00+00:00"
TWO_PLUS_TWO = "What is 2+2?"


def planted_batches() -> list[ImportBatch]:
    """Two sources sharing two texts (under other ids), each with one query without text.

    LLM A scores "What is 2+2?" in both sources, 1 then 0: one disagreeing cell once merged.
    """
    harness = pd.DataFrame(
        [
            ("A", "q1", TWO_PLUS_TWO, "math", None, 1.0, 0.01),
            ("A", "q2", "Capital of France?", None, None, 0.0, None),
            ("A", "q3", None, None, None, 1.0, None),
        ],
        columns=["llm_id", "query_id", "query_text", "task", "split", "score", "cost_usd"],
    )
    helm = pd.DataFrame(
        [
            ("B", "x1", TWO_PLUS_TWO, None, "test", 0.0, 0.03),
            ("A", "x1", TWO_PLUS_TWO, None, "test", 0.0, None),
            ("B", "x2", "Capital of France?", "geography", None, 1.0, None),
            ("B", "q3", None, None, None, 0.0, None),
        ],
        columns=["llm_id", "query_id", "query_text", "task", "split", "score", "cost_usd"],
    )
    return [
        ImportBatch.from_long(harness, source="harness", origin="harness.csv"),
        ImportBatch.from_long(helm, source="helm", origin="helm.csv"),
    ]


def write_v1_workspace(path: Path, batches: list[ImportBatch]) -> Path:
    """A version-1 workspace holding `batches`, plus a query vector and an LLM embedding."""
    path.mkdir(parents=True)
    db = path / "locus.db"
    con = sqlite3.connect(db)
    con.executescript(V1_DDL)
    con.executemany(
        "INSERT INTO meta VALUES (?, ?)", [("schema_version", "1"), ("created_at", STAMP)]
    )
    for batch in batches:
        con.execute(
            "INSERT OR IGNORE INTO sources VALUES (?, 'table', ?, ?, ?)",
            (batch.source, batch.origin, STAMP, STAMP),
        )
        for llm_id in batch.llms["llm_id"]:
            con.execute(
                "INSERT OR IGNORE INTO llms (llm_id, created_at) VALUES (?, ?)", (llm_id, STAMP)
            )
        for row in batch.queries.itertuples():
            con.execute(
                "INSERT OR IGNORE INTO queries (source, query_id, text_hash, query_text, task, "
                "split) VALUES (?, ?, ?, ?, ?, ?)",
                (batch.source, row.query_id, row.text_hash, row.query_text, row.task, row.split),
            )
        for row in batch.scores.itertuples():
            con.execute(
                'INSERT INTO scores (llm, "query", source, score, cost_usd, latency_ms, '
                "imported_at) SELECT m.id, q.id, ?, ?, ?, ?, ? FROM llms m, queries q "
                "WHERE m.llm_id = ? AND q.source = ? AND q.query_id = ? AND q.text_hash = ?",
                (
                    batch.source,
                    row.score,
                    None if np.isnan(row.cost_usd) else row.cost_usd,
                    None if np.isnan(row.latency_ms) else row.latency_ms,
                    STAMP,
                    row.llm_id,
                    batch.source,
                    row.query_id,
                    row.text_hash,
                ),
            )
    two_plus_two = batches[0].queries["text_hash"].iloc[0]
    con.execute(
        "INSERT INTO query_vectors VALUES ('enc', ?, 2, ?)",
        (two_plus_two, np.array([1, 2], dtype="<f4").tobytes()),
    )
    con.execute(
        "INSERT INTO llm_embeddings SELECT 'art', id, 3, 2, ?, ? FROM llms WHERE llm_id = 'A'",
        (np.array([0.5, -0.5], dtype="<f4").tobytes(), STAMP),
    )
    con.commit()
    con.close()
    return db


def v1_counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as con:
        return {
            table: con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("llms", "queries", "scores", "sources", "query_vectors", "llm_embeddings")
        }


def v1_checksums(db: Path) -> dict[str, str]:
    """Version 1's `Store.checksums`, on version 1's tables."""
    statements = {
        "llms": "SELECT llm_id, display_name, family, params_b, price_in_per_mtok, "
        "price_out_per_mtok, cost_per_query, endpoint FROM llms ORDER BY llm_id",
        "queries": "SELECT source, query_id, text_hash, task, split FROM queries "
        "ORDER BY source, query_id, text_hash",
        "scores": "SELECT m.llm_id, q.source, q.query_id, q.text_hash, s.score, s.cost_usd, "
        's.latency_ms FROM scores s JOIN llms m ON m.id = s.llm JOIN queries q ON q.id = s."query" '
        "ORDER BY m.llm_id, q.source, q.query_id, q.text_hash",
    }
    out = {}
    with sqlite3.connect(db) as con:
        for name, sql in statements.items():
            digest = hashlib.sha256()
            for row in con.execute(sql):
                digest.update(json.dumps(list(row), default=str).encode())
                digest.update(b"\n")
            out[name] = digest.hexdigest()
    return out


def dump(db: Path) -> list[str]:
    with sqlite3.connect(db) as con:
        return list(con.iterdump())


def test_v1_workspace_migrates_with_counts_and_checksums_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    batches = planted_batches()
    db = write_v1_workspace(tmp_path / "v1", batches)
    counts, sums = v1_counts(db), v1_checksums(db)
    with sqlite3.connect(db) as con:
        old_ids = con.execute("SELECT id, source, query_id, text_hash FROM queries").fetchall()

    with caplog.at_level(logging.INFO, logger="locus.store"), Store.open(tmp_path / "v1") as store:
        assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
        assert store.checksums() == sums
        migrated = store.counts()
        table = store.score_table()
        assert store.texts_without_vectors("enc") == [
            (batches[0].queries["text_hash"].iloc[1], "Capital of France?")
        ]
        llm_ids, vectors, evidence = store.embeddings("art")
    assert "migrating" in caplog.text and "6 query rows became aliases of 4 queries" in caplog.text

    # every v1 row is kept; "queries" now counts identities (two texts shared by the sources)
    assert migrated["query_aliases"] == counts["queries"] == 6
    assert migrated["queries"] == 4
    for name in ("llms", "scores", "sources", "query_vectors", "llm_embeddings"):
        assert migrated[name] == counts[name], name
    assert migrated["disagreeing_cells"] == 1
    assert (llm_ids, vectors.tolist(), evidence) == (["A"], [[0.5, -0.5]], [3])

    # the merged query is scored by both LLMs, keyed by its id in the first source
    assert table.llm_ids == ("A", "B")
    row = table.query_ids.index("q1")
    assert table.scores[row].tolist() == [0.5, 0.0]
    assert table.tasks[row] == "math" and table.splits[row] == "test"
    assert set(table.query_ids) == {"q1", "q2", "harness/q3", "helm/q3"}

    with sqlite3.connect(db) as con:
        new_ids = con.execute(
            "SELECT id, source, query_id, text_hash FROM query_aliases"
        ).fetchall()
        tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master")}
    assert sorted(new_ids) == sorted(old_ids), "aliases keep the v1 query ids"
    assert not tables & {"queries_v1", "scores_v1", "ix_queries_text_hash", "ix_scores_query"}


def test_migrated_store_equals_a_fresh_import_and_reimport_changes_nothing(
    tmp_path: Path,
) -> None:
    batches = planted_batches()
    write_v1_workspace(tmp_path / "v1", batches)
    with Store.open(tmp_path / "fresh") as fresh:
        for batch in batches:
            fresh.write_batch(batch, kind="table")
        expected_sums, expected_table = fresh.checksums(), fresh.score_table()
        expected_counts = fresh.counts()
    with Store.open(tmp_path / "v1") as store:
        assert store.checksums() == expected_sums
        counts = store.counts()
        for name in ("llms", "queries", "query_aliases", "scores", "disagreeing_cells"):
            assert counts[name] == expected_counts[name], name
        table = store.score_table()
        assert table.query_ids == expected_table.query_ids
        np.testing.assert_array_equal(table.scores, expected_table.scores)
        assert table.costs is not None and expected_table.costs is not None
        np.testing.assert_array_equal(table.costs, expected_table.costs)

        reports = [store.write_batch(batch, kind="table") for batch in batches]
        assert not any(report.changed for report in reports)
        assert store.counts() == counts
        assert store.checksums() == expected_sums
    with Store.open(tmp_path / "v1") as again:  # opening a version-2 store migrates nothing
        assert again.counts() == counts


def test_failed_migration_leaves_the_v1_database_untouched(tmp_path: Path) -> None:
    db = write_v1_workspace(tmp_path / "v1", planted_batches())
    # version 1's key (llm, query, source) allowed a score under a second source for one query
    # row; version 2 keys scores by (llm, alias), so this row cannot be carried over
    with sqlite3.connect(db) as con:
        con.execute(
            "INSERT INTO scores SELECT llm, \"query\", 'helm', 1 - score, NULL, NULL, imported_at "
            "FROM scores WHERE source = 'harness' LIMIT 1"
        )
    before = dump(db)
    failed = rf"schema version 1 to {SCHEMA_VERSION} failed .*unchanged"
    with pytest.raises(LocusStoreError, match=failed):
        Store.open(tmp_path / "v1")
    assert dump(db) == before
    assert v1_counts(db)["queries"] == 6


def test_v2_workspace_gains_the_artifacts_table(workspace: Path) -> None:
    with Store.open(workspace) as store:
        store.write_batch(planted_batches()[0], kind="table")
        sums = store.checksums()
    with sqlite3.connect(workspace / "locus.db") as con:
        for table in (
            "artifacts",
            "query_references",
            "probe_answers",
            "decisions",
            "canary_answers",
        ):
            con.execute(f"DROP TABLE {table}")
        con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    with Store.open(workspace) as store:
        assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
        assert store.checksums() == sums
        assert store.artifact_names() == []
        folder = workspace / "artifacts" / "a"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        digest = store.put_artifact("a", folder)
        assert store.artifact_digest("a") == digest


def test_v3_workspace_gains_references_and_reads_its_files_again(workspace: Path) -> None:
    """A version-3 store gains the reference and probe-answer tables, and forgets which files it
    imported, so that importing them again keeps the reference answers they carry."""
    with Store.open(workspace) as store:
        store.write_batch(planted_batches()[0], kind="table")
        store.set_meta("import_files:abc", "digest")
        sums = store.checksums()
    with sqlite3.connect(workspace / "locus.db") as con:
        con.execute("DROP TABLE query_references")
        con.execute("DROP TABLE probe_answers")
        con.execute("DROP TABLE decisions")
        con.execute("DROP TABLE canary_answers")
        con.execute("DROP INDEX ix_scores_priced")
        con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    with Store.open(workspace) as store:
        assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
        assert store.get_meta("import_files:abc") is None
        assert store.checksums() == sums
        assert store.references() == {} and store.probe_answers("x") == {}
    with sqlite3.connect(workspace / "locus.db") as con:
        indexes = {row[0] for row in con.execute("SELECT name FROM sqlite_master")}
        assert "ix_scores_priced" in indexes


def test_v4_workspace_gains_the_decision_log(workspace: Path) -> None:
    with Store.open(workspace) as store:
        store.write_batch(planted_batches()[0], kind="table")
        sums = store.checksums()
    with sqlite3.connect(workspace / "locus.db") as con:
        con.execute("DROP TABLE decisions")
        con.execute("DROP TABLE canary_answers")
        con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    with Store.open(workspace) as store:
        assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
        assert store.checksums() == sums and store.decisions() == []
        store.put_decision({"request_id": "r1", "llm_id": "a", "propensity": 0.9})
        assert store.decision("r1")["propensity"] == 0.9  # type: ignore[index]


def test_v5_workspace_gains_the_canary_answers(workspace: Path) -> None:
    with Store.open(workspace) as store:
        store.write_batch(planted_batches()[0], kind="table")
        sums = store.checksums()
    with sqlite3.connect(workspace / "locus.db") as con:
        con.execute("DROP TABLE canary_answers")
        con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    with Store.open(workspace) as store:
        assert store.get_meta("schema_version") == "6" and store.checksums() == sums
        assert store.canary_answers("baseline") == {}
        store.put_canary_answers("a", "baseline", {"h1": ("(B)", "model-a")})
        store.put_canary_answers("a", "baseline", {"h1": ("(C)", "model-a")})
        assert store.canary_answers("baseline") == {"a": {"h1": "(C)"}}
        assert store.canary_answers("latest") == {}


def test_unknown_old_schema_is_refused(workspace: Path) -> None:
    with Store.open(workspace) as store:
        store.set_meta("schema_version", "0")
    with pytest.raises(LocusStoreError, match="schema version 0 is not one this locus can read"):
        Store.open(workspace)
