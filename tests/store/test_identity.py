"""Query identity: a query is its text, whatever the source; without text, its id in a namespace.

Planted data with known answers: per-LLM files of the same queries must share rows of the score
table; differing scores from two sources are both kept and averaged.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locus.data.batch import ImportBatch
from locus.errors import LocusConflictError, LocusInputError
from locus.store import Store
from locus.store.ingest import import_path


def write_csv(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture
def per_llm_files(tmp_path: Path) -> tuple[Path, Path]:
    """The repro: two LLMs, one file each, the same two texts under the same ids."""
    a = write_csv(
        tmp_path / "a.csv",
        "llm_id,query_id,score,query_text\nA,q1,1,What is 2+2?\nA,q2,0,Capital of France?\n",
    )
    b = write_csv(
        tmp_path / "b.csv",
        "llm_id,query_id,score,query_text\nB,q1,0,What is 2+2?\nB,q2,1,Capital of France?\n",
    )
    return a, b


def batch(rows: list[dict[str, object]], source: str, namespace: str | None = None) -> ImportBatch:
    return ImportBatch.from_long(
        pd.DataFrame(rows), source=source, origin=f"{source}.csv", namespace=namespace
    )


def cell(store: Store, query_id: str, llm_id: str) -> float:
    table = store.score_table()
    return float(table.scores[table.query_ids.index(query_id), table.llm_index(llm_id)])


def test_per_llm_files_with_text_share_their_queries(
    workspace: Path, per_llm_files: tuple[Path, Path]
) -> None:
    a, b = per_llm_files
    with Store.open(workspace) as store:
        first = import_path(store, "table", a)
        second = import_path(store, "table", b)
        table = store.score_table()
        counts = store.counts()
    assert (first.source, second.source) == ("a", "b")
    assert (first.new_queries, first.new_aliases) == (2, 2)
    assert (second.new_queries, second.new_aliases, second.new_scores) == (0, 2, 2)
    assert second.changed and second.disagreeing_scores == 0
    assert counts["queries"] == 2 and counts["query_aliases"] == 4 and counts["scores"] == 4
    assert table.llm_ids == ("A", "B")
    assert table.query_ids == ("q1", "q2")
    assert table.observed.all(), "both LLMs score both queries: not block-diagonal"
    np.testing.assert_array_equal(table.scores, [[1, 0], [0, 1]])
    assert table.query_texts == ("What is 2+2?", "Capital of France?")


def test_reimport_of_per_llm_files_changes_nothing(
    workspace: Path, per_llm_files: tuple[Path, Path]
) -> None:
    a, b = per_llm_files
    with Store.open(workspace) as store:
        import_path(store, "table", a)
        import_path(store, "table", b)
        counts, sums = store.counts(), store.checksums()
        again = [import_path(store, "table", path) for path in (b, a)]
        assert not any(report.changed for report in again)
        assert [report.unchanged_scores for report in again] == [2, 2]
        assert store.counts() == counts
        assert store.checksums() == sums


def test_same_data_in_any_import_order_gives_the_same_store(
    tmp_path: Path, per_llm_files: tuple[Path, Path]
) -> None:
    a, b = per_llm_files
    with Store.open(tmp_path / "ab") as ab, Store.open(tmp_path / "ba") as ba:
        for path in (a, b):
            import_path(ab, "table", path)
        for path in (b, a):
            import_path(ba, "table", path)
        assert ab.checksums() == ba.checksums()
        left, right = ab.score_table(), ba.score_table()
    assert left.query_ids == right.query_ids
    np.testing.assert_array_equal(left.scores, right.scores)


def test_per_llm_files_without_text_join_in_one_namespace(tmp_path: Path) -> None:
    a = write_csv(tmp_path / "a.csv", "llm_id,query_id,score\nA,q1,1\nA,q2,0\n")
    b = write_csv(tmp_path / "b.csv", "llm_id,query_id,score\nB,q1,0\nB,q2,1\nB,q3,1\n")
    with Store.open(tmp_path / "shared") as store:
        import_path(store, "table", a, namespace="bench")
        report = import_path(store, "table", b, namespace="bench")
        table = store.score_table()
        assert store.counts()["queries"] == 3
    assert (report.new_queries, report.new_aliases) == (1, 3)
    assert table.query_ids == ("q1", "q2", "q3")
    np.testing.assert_array_equal(table.observed, [[True, True], [True, True], [False, True]])
    assert table.text_hashes == ("", "", "")


def test_files_without_text_stay_apart_without_a_shared_namespace(tmp_path: Path) -> None:
    a = write_csv(tmp_path / "a.csv", "llm_id,query_id,score\nA,q1,1\nA,q2,0\n")
    b = write_csv(tmp_path / "b.csv", "llm_id,query_id,score\nB,q1,0\nB,q2,1\n")
    with Store.open(tmp_path / "apart") as store:
        import_path(store, "table", a)  # namespace "a" (the source)
        import_path(store, "table", b, namespace="other")
        table = store.score_table()
        assert store.counts()["queries"] == 4
    assert table.query_ids == ("a/q1", "a/q2", "b/q1", "b/q2")
    assert int(table.observed.sum()) == 4
    assert not table.observed[:2, 1].any(), "A's queries are not B's"


def test_same_id_with_two_texts_is_two_queries(workspace: Path) -> None:
    with Store.open(workspace) as store:
        store.write_batch(
            batch([{"llm_id": "A", "query_id": "q1", "query_text": "Red?", "score": 1}], "one"),
            kind="table",
        )
        store.write_batch(
            batch([{"llm_id": "B", "query_id": "q1", "query_text": "Blue?", "score": 0}], "two"),
            kind="table",
        )
        # one source giving one id two texts
        store.write_batch(
            batch(
                [
                    {"llm_id": "C", "query_id": "q9", "query_text": "Green?", "score": 1},
                    {"llm_id": "C", "query_id": "q9", "query_text": "Pink?", "score": 0},
                ],
                "three",
            ),
            kind="table",
        )
        table = store.score_table()
        assert store.counts()["queries"] == 4
    # rows sorted by (source, query_id, text_hash); prefixes and suffixes only where ids clash
    hashes = table.text_hashes
    assert table.query_ids == ("one/q1", f"q9@{hashes[1][:8]}", f"q9@{hashes[2][:8]}", "two/q1")
    assert table.query_texts[0] == "Red?" and table.query_texts[3] == "Blue?"
    assert set(table.query_texts[1:3]) == {"Green?", "Pink?"}
    assert int(table.observed.sum()) == 4


def test_two_sources_disagreeing_keep_both_scores_and_average(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = "What is 2+2?"
    with Store.open(workspace) as store:
        store.write_batch(
            batch(
                [
                    {
                        "llm_id": "A",
                        "query_id": "x1",
                        "query_text": text,
                        "score": 1.0,
                        "cost_usd": 0.002,
                    }
                ],
                "harness",
            ),
            kind="table",
        )
        with caplog.at_level(logging.WARNING, logger="locus.store"):
            report = store.write_batch(
                batch(
                    [{"llm_id": "A", "query_id": "y7", "query_text": text, "score": 0.0}], "helm"
                ),
                kind="table",
            )
        again = store.write_batch(
            batch([{"llm_id": "A", "query_id": "y7", "query_text": text, "score": 0.0}], "helm"),
            kind="table",
        )
        assert not again.changed and again.disagreeing_scores == 0  # a re-import stays silent
        table = store.score_table()
        counts = store.counts()
        assert store.disagreeing_cells() == 1
        summary = store.llm_summary().set_index("llm_id")
        costs = store.llm_costs()
        only_helm = store.score_table(sources=["helm"])
    assert report.new_scores == 1 and report.disagreeing_scores == 1
    assert "differ from the score another source" in caplog.text
    assert counts["scores"] == 2 and counts["queries"] == 1 and counts["disagreeing_cells"] == 1
    assert table.query_ids == ("x1",), "keyed by the first source alphabetically"
    assert table.scores.tolist() == [[0.5]]
    assert table.costs is not None and table.costs.tolist() == [[pytest.approx(0.002)]]
    assert summary.loc["A", "queries_scored"] == 1, "one (LLM, query) counts once"
    assert summary.loc["A", "accuracy"] == pytest.approx(0.5)
    assert costs == {"A": pytest.approx(0.002)}
    assert only_helm.query_ids == ("y7",) and only_helm.scores.tolist() == [[0.0]]


def test_agreeing_sources_are_not_counted_as_disagreeing(workspace: Path) -> None:
    rows = [{"llm_id": "A", "query_id": "q", "query_text": "Same?", "score": 1.0}]
    with Store.open(workspace) as store:
        store.write_batch(batch(rows, "one"), kind="table")
        report = store.write_batch(batch(rows, "two"), kind="table")
        assert report.disagreeing_scores == 0 and store.disagreeing_cells() == 0
        assert store.score_table().scores.tolist() == [[1.0]]


def test_two_ids_of_one_text_in_one_source_are_one_query(workspace: Path) -> None:
    rows = [
        {"llm_id": "A", "query_id": "first", "query_text": "Twice?", "score": 1.0},
        {"llm_id": "A", "query_id": "again", "query_text": "  Twice?\r\n", "score": 0.0},
        {"llm_id": "B", "query_id": "again", "query_text": "Twice?", "score": 1.0},
    ]
    with Store.open(workspace) as store:
        report = store.write_batch(batch(rows, "dup"), kind="table")
        table = store.score_table()
        counts = store.counts()
    # normalisation (surrounding whitespace, line ends) joins the two spellings
    assert (report.new_queries, report.new_aliases) == (1, 2)
    assert report.disagreeing_scores == 2, "A's two scores disagree with each other"
    assert counts["disagreeing_cells"] == 1
    assert table.query_ids == ("again",), "the first alias by (source, query_id)"
    assert table.scores.tolist() == [[0.5, 1.0]]


def test_replace_in_one_source_never_touches_another(workspace: Path) -> None:
    text = "Shared?"
    with Store.open(workspace) as store:
        store.write_batch(
            batch([{"llm_id": "A", "query_id": "q", "query_text": text, "score": 1}], "one"),
            kind="table",
        )
        store.write_batch(
            batch([{"llm_id": "A", "query_id": "q", "query_text": text, "score": 1}], "two"),
            kind="table",
        )
        changed = batch([{"llm_id": "A", "query_id": "q", "query_text": text, "score": 0}], "two")
        with pytest.raises(
            LocusConflictError, match=r"1 score\(s\) differ.*source 'two'.*--replace"
        ):
            store.write_batch(changed, kind="table")
        report = store.write_batch(changed, kind="table", replace=True)
        assert report.replaced_scores == 1 and report.disagreeing_scores == 1
        assert store.counts()["scores"] == 2
        assert store.score_table(sources=["one"]).scores.tolist() == [[1.0]]
        assert store.score_table().scores.tolist() == [[0.5]]


def test_first_task_wins_for_the_query_and_each_alias_keeps_its_own(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = "Is 7 prime?"
    with Store.open(workspace) as store:
        store.write_batch(
            batch([{"llm_id": "A", "query_id": "q", "query_text": text, "score": 1}], "none"),
            kind="table",
        )
        store.write_batch(
            batch(
                [
                    {
                        "llm_id": "B",
                        "query_id": "q",
                        "query_text": text,
                        "score": 1,
                        "task": "math",
                        "split": "test",
                    }
                ],
                "one",
            ),
            kind="table",
        )
        before = store.checksums()["queries"]
        with caplog.at_level(logging.WARNING, logger="locus.store"):
            store.write_batch(
                batch(
                    [
                        {
                            "llm_id": "C",
                            "query_id": "q",
                            "query_text": text,
                            "score": 0,
                            "task": "arithmetic",
                            "split": "train",
                        }
                    ],
                    "two",
                ),
                kind="table",
            )
        table = store.score_table()
        assert store.checksums()["queries"] != before, "the alias keeps its own task"
    assert table.tasks == ("math",), "the first non-null task seen"
    assert table.splits == ("test",)
    assert "other than the one first seen" in caplog.text


def test_namespace_of_a_source_cannot_move(workspace: Path) -> None:
    rows = [{"llm_id": "A", "query_id": "q1", "score": 1}]
    with Store.open(workspace) as store:
        store.write_batch(batch(rows, "src", namespace="one"), kind="table")
        sums = store.checksums()
        with pytest.raises(
            LocusConflictError, match=r"namespace 'one', found namespace 'two'.*--namespace one"
        ):
            store.write_batch(batch(rows, "src", namespace="two"), kind="table")
        assert store.checksums() == sums
        assert not store.write_batch(batch(rows, "src", namespace="one"), kind="table").changed


def test_namespace_shows_in_checksums(tmp_path: Path) -> None:
    rows = [{"llm_id": "A", "query_id": "q1", "score": 1}]
    sums = []
    for namespace in (None, "src", "elsewhere"):
        with Store.open(tmp_path / str(namespace)) as store:
            store.write_batch(batch(rows, "src", namespace=namespace), kind="table")
            sums.append(store.checksums()["queries"])
    assert sums[0] == sums[1] != sums[2]


@pytest.mark.parametrize("namespace", ["", " padded", "two\nlines"])
def test_unusable_namespace_is_refused(namespace: str) -> None:
    with pytest.raises(LocusInputError, match=r"namespace name .* is not usable"):
        batch([{"llm_id": "A", "query_id": "q1", "score": 1}], "src", namespace=namespace)


def test_row_keys_are_unique_even_when_an_id_reads_like_a_derived_key(workspace: Path) -> None:
    with Store.open(workspace) as store:
        store.write_batch(
            batch(
                [
                    {"llm_id": "A", "query_id": "q", "query_text": "One?", "score": 1},
                    {"llm_id": "A", "query_id": "a/q", "query_text": "Three?", "score": 1},
                ],
                "a",
            ),
            kind="table",
        )
        store.write_batch(
            batch([{"llm_id": "A", "query_id": "q", "query_text": "Two?", "score": 1}], "b"),
            kind="table",
        )
        table = store.score_table()
    assert len(set(table.query_ids)) == 3
    assert "b/q" in table.query_ids


def _rows(*cells: tuple[str, str, str, float]) -> list[dict[str, object]]:
    return [{"llm_id": m, "query_id": q, "query_text": t, "score": y} for m, q, t, y in cells]


def test_checksums_are_cached_until_the_content_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import locus.store.checksums as checksums_module

    digests: list[int] = []
    digest = checksums_module._digest_content

    def counted(conn: object) -> dict[str, str]:
        digests.append(1)
        return digest(conn)  # type: ignore[arg-type]

    monkeypatch.setattr(checksums_module, "_digest_content", counted)
    first_rows = _rows(("m1", "q1", "a", 1.0), ("m2", "q1", "a", 0.0))
    with Store.open(tmp_path / "ws") as store:
        store.write_batch(batch(first_rows, "s"), kind="table")
        first = store.checksums()
        assert store.checksums() == first and len(digests) == 1  # the second read is cached
        store.put_vectors("enc", ["h"], np.zeros((1, 3), dtype=np.float32))
        store.set_meta("note", "not content")
        assert store.checksums() == first and len(digests) == 1  # no content changed
        store.write_batch(batch(_rows(("m3", "q1", "a", 1.0)), "t"), kind="table")
        second = store.checksums()
        assert second != first and len(digests) == 2
        store.write_batch(batch(_rows(("m3", "q1", "a", 0.0)), "t"), kind="table", replace=True)
        assert store.checksums()["scores"] != second["scores"] and len(digests) == 3
    with Store.open(tmp_path / "ws") as again:  # a new process reads the cache
        cached = again.checksums()
        assert len(digests) == 3
    with Store.open(tmp_path / "fresh") as fresh:  # and it equals a fresh digest of the content
        fresh.write_batch(batch(first_rows, "s"), kind="table")
        fresh.write_batch(batch(_rows(("m3", "q1", "a", 0.0)), "t"), kind="table")
        assert fresh.checksums() == cached and len(digests) == 4


def test_checksums_notice_a_writer_that_does_not_raise_the_data_version(tmp_path: Path) -> None:
    import sqlite3

    with Store.open(tmp_path / "ws") as store:
        store.write_batch(batch(_rows(("m1", "q1", "a", 1.0)), "s"), kind="table")
        before = store.checksums()
    with sqlite3.connect(tmp_path / "ws" / "locus.db") as raw:  # e.g. an older locus version
        raw.execute("UPDATE scores SET score = 0.0, imported_at = 'later'")
    with Store.open(tmp_path / "ws") as store:
        assert store.checksums()["scores"] != before["scores"]
