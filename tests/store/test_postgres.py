"""The store on a real PostgreSQL server: the same code path as SQLite, the same answers.

Every test here needs the throwaway server of `tests.postgres_server` (skipped, with the reason,
where PostgreSQL cannot start; `.ci/run` installs it).
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locus.data.batch import ImportBatch
from locus.errors import LocusNotFoundError, LocusStoreError
from locus.store import Store
from tests.planted_workspace import planted_rows


def _fill(target: str | Path) -> dict[str, object]:
    """Two sources sharing texts, a replacing re-import, costs, vectors, embeddings, catalog,
    meta: every write path; returns what each read path answers."""
    rows = planted_rows(llms_per_group=2, queries_per_task=30)
    rows["cost_usd"] = np.where(rows["llm_id"].str.endswith("0"), 0.002, 0.0005)
    second = rows[rows["query_id"].str.endswith(("1", "2"))].copy()
    second["query_id"] = "other-" + second["query_id"]  # the same texts under other ids
    second["score"] = 1.0 - second["score"]  # and scores that disagree
    changed = rows.copy()  # the same file with 40 scores corrected
    changed.loc[changed.index[:40], "score"] = 1.0 - changed["score"].iloc[:40]
    with Store.open(target) as store:
        first = store.write_batch(
            ImportBatch.from_long(rows, source="a", origin="a.csv"), kind="table"
        )
        store.write_batch(ImportBatch.from_long(second, source="b", origin="b.csv"), kind="table")
        replaced = store.write_batch(
            ImportBatch.from_long(changed, source="a", origin="a.csv"), kind="table", replace=True
        )
        hashes = [h for h, _ in store.texts_without_vectors("enc")]
        vectors = np.arange(len(hashes) * 4, dtype=np.float32).reshape(-1, 4)
        store.put_vectors("enc", hashes, vectors)
        store.put_vectors("enc", hashes[:3], vectors[:3] + 1)  # already there: kept
        llms = store.llm_ids()
        store.replace_embeddings(
            "art", llms, np.eye(len(llms), 8, dtype=np.float32), [5] * len(llms)
        )
        store.replace_embeddings(
            "art", ["newcomer"], np.ones((1, 8), np.float32), [3], only=True, register=True
        )
        store.upsert_llm_metadata([(llms[0], {"family": "fam", "params_b": 7.0})])
        store.set_meta("note", "one")
        store.set_meta("note", "two")
        for i in range(3):  # the gateway's decision log
            store.put_decision({
                "request_id": f"r{i}", "llm_id": llms[0], "propensity": 0.5, "explored": i == 1,
                "ranked": [[llms[0], 0.7], [llms[1], 0.6]], "text_hash": f"h{i}",
            })  # fmt: skip
        store.set_decision_outcome("r1", 1.0)
        store.trim_decisions(keep=2)
        store.put_canary_answers(llms[0], "baseline", {"h1": ("(B)", "m"), "h2": ("(C)", None)})
        store.put_canary_answers(llms[0], "baseline", {"h2": ("(D)", "m")})  # h2 replaced
        store.put_canary_answers(llms[1], "latest", {"h1": ("(A)", None)})
        table = store.score_table()
        return {
            "first": (first.new_scores, first.new_aliases),
            "replaced": (replaced.new_scores, replaced.replaced_scores),
            "counts": store.counts(),
            "checksums": store.checksums(),
            "llm_ids": store.llm_ids(),
            "summary": store.llm_summary().astype(object).fillna("-").to_dict("records"),
            "costs": store.llm_costs(),
            "metadata": store.llm_metadata(),
            "sources": store.sources()[["name", "kind", "origin"]].to_dict("records"),
            "table": (table.llm_ids, table.query_ids, table.text_hashes, table.tasks),
            "scores": np.nan_to_num(table.scores, nan=-1).tolist(),
            "vectors": store.get_vectors("enc", sorted(hashes)).tolist(),
            "vector_dim": store.vector_dim("enc"),
            "embeddings": store.embeddings("art")[0],
            "embeddings_version": store.embeddings_version("art"),
            "note": store.get_meta("note"),
            "canary": [store.canary_answers(r) for r in ("baseline", "latest")],
            "texts": store.query_texts(sorted(hashes)[:5]),
            "decisions": [
                {k: v for k, v in d.items() if k not in ("asked_at", "outcome_at")}
                for d in store.decisions()
            ],
        }


def test_postgres_store_answers_as_sqlite_does(postgres_url: str, tmp_path: Path) -> None:
    on_sqlite = _fill(tmp_path / "sqlite-ws")
    on_postgres = _fill(postgres_url)
    assert on_sqlite["counts"]["disagreeing_cells"] > 0  # type: ignore[index]
    assert on_sqlite["replaced"] == (0, 40)
    for key, value in on_sqlite.items():
        assert on_postgres[key] == value, key


def test_postgres_writers_from_two_threads_queue(postgres_url: str) -> None:
    """Two imports of overlapping new LLMs and texts at once both land whole (the advisory lock
    serialises them; without it the second's read-then-insert hits unique constraints)."""
    rows = planted_rows(llms_per_group=2, queries_per_task=20)
    halves = [rows[rows["llm_id"].str.endswith(str(i))] for i in (0, 1)]
    errors: list[BaseException] = []
    with Store.open(postgres_url):
        pass  # tables created before the race

    def write(frame: pd.DataFrame, source: str) -> None:
        try:
            with Store.open(postgres_url) as store:
                store.write_batch(
                    ImportBatch.from_long(frame, source=source, origin=source), kind="table"
                )
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(h, f"s{i}")) for i, h in enumerate(halves)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    with Store.open(postgres_url) as store:
        counts = store.counts()
    assert counts["scores"] == len(rows) and counts["queries"] == rows["query_id"].nunique()


def test_artifacts_travel_through_the_database(postgres_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "written" / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"a": 1}')
    (folder / "sub" / "weights.bin").write_bytes(bytes(range(256)) * 10)
    with Store.open(postgres_url) as store:
        assert store.artifacts_in_database
        with pytest.raises(LocusNotFoundError, match="no trained artifact 'model'"):
            store.fetch_artifact("model", tmp_path / "copy" / "model")
        digest = store.put_artifact("model", folder)
        assert store.put_artifact("model", folder) == digest  # same files, same bytes
        copy = tmp_path / "copy" / "model"
        assert store.fetch_artifact("model", copy) is True
        assert store.fetch_artifact("model", copy) is False  # already current
        assert (copy / "sub" / "weights.bin").read_bytes() == bytes(range(256)) * 10
        (folder / "config.json").write_text('{"a": 2}')
        assert store.put_artifact("model", folder) != digest
        assert store.fetch_artifact("model", copy) is True  # a newer one replaces the copy
        assert (copy / "config.json").read_text() == '{"a": 2}'
        assert store.artifact_names() == ["model"]


def test_postgres_errors_are_one_line(postgres_url: str, postgres: object) -> None:
    from tests.postgres_server import PostgresServer

    assert isinstance(postgres, PostgresServer)
    with pytest.raises(LocusStoreError, match="no locus store in this database yet"):
        Store.open(postgres_url, create=False)
    closed = f"postgresql://locus:s3cret@127.0.0.1:{postgres.port + 1}/nowhere"
    with pytest.raises(LocusStoreError, match="cannot reach the database") as caught:
        Store.open(closed)
    assert "s3cret" not in str(caught.value) and "***" in str(caught.value)
    with pytest.raises(LocusStoreError, match="no database named"):
        Store.open("postgresql://locus@127.0.0.1:5432")


def test_database_url_from_the_environment(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCUS_DATABASE_URL", postgres_url)
    with Store.open() as store:
        assert store.dialect == "postgresql" and store.location.endswith(
            postgres_url.split("/")[-1]
        )
        store.set_meta("seen", "yes")
    with Store.open(postgres_url, create=False) as store:
        assert store.get_meta("seen") == "yes"


def test_workspace_urls_without_a_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """URL handling that needs no server: other schemes refused, local directories named."""
    from locus.store import local_workspace_dir

    with pytest.raises(LocusStoreError, match=r"runs on SQLite .* or PostgreSQL"):
        Store.open("mysql://user@127.0.0.1/locus")
    assert not (Path.cwd() / "mysql:").exists()  # not taken for a directory
    with pytest.raises(LocusStoreError, match="no database named"):
        Store.open("postgresql://user:pw@127.0.0.1")
    assert local_workspace_dir(tmp_path / "ws") == tmp_path / "ws"
    monkeypatch.delenv("LOCUS_ARTIFACT_CACHE", raising=False)
    one = local_workspace_dir("postgresql://a:secret@db.internal/locus")
    assert one == local_workspace_dir("postgresql://a:other@db.internal/locus")  # not the password
    assert one != local_workspace_dir("postgresql://a@db.internal/other")
    assert "secret" not in str(one) and one.name.startswith("db.internal-locus-")
    monkeypatch.setenv("LOCUS_ARTIFACT_CACHE", str(tmp_path / "cache"))
    assert local_workspace_dir("postgresql://a@db.internal/locus") == tmp_path / "cache"
