"""The workspace store: idempotent imports, conflicts, atomicity, concurrent readers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locus.data.batch import ImportBatch
from locus.errors import LocusConflictError, LocusStoreError
from locus.store import Store
from tests.conftest import planted_long_table


def batch_of(rows: pd.DataFrame, source: str = "planted") -> ImportBatch:
    return ImportBatch.from_long(rows, source=source, origin="planted.csv")


def test_import_then_reimport_changes_nothing(workspace: Path) -> None:
    rows = planted_long_table()
    with Store.open(workspace) as store:
        first = store.write_batch(batch_of(rows), kind="table")
        counts, sums = store.counts(), store.checksums()
        second = store.write_batch(batch_of(rows.sample(frac=1, random_state=0)), kind="table")
        assert first.changed and not second.changed
        assert second.unchanged_scores == first.new_scores == len(rows)
        assert store.counts() == counts
        assert store.checksums() == sums


def test_score_table_matches_input(workspace: Path) -> None:
    rows = planted_long_table()
    with Store.open(workspace) as store:
        store.write_batch(batch_of(rows), kind="table")
        table = store.score_table()
    assert table.scores.shape == (40, 6)
    assert int(table.observed.sum()) == len(rows)
    expected = rows.groupby("llm_id")["score"].mean().reindex(list(table.llm_ids)).to_numpy()
    np.testing.assert_allclose(table.accuracy(), expected, rtol=1e-6)
    assert set(table.tasks) == {"math", "law"}


def test_conflicting_score_needs_replace_and_changes_nothing_without(workspace: Path) -> None:
    rows = planted_long_table()
    changed = rows.copy()
    changed.loc[0, "score"] = 1.0 - changed.loc[0, "score"]
    with Store.open(workspace) as store:
        store.write_batch(batch_of(rows), kind="table")
        sums = store.checksums()
        with pytest.raises(LocusConflictError, match=r"1 score\(s\) differ.*--replace"):
            store.write_batch(batch_of(changed), kind="table")
        assert store.checksums() == sums
        report = store.write_batch(batch_of(changed), kind="table", replace=True)
        assert report.replaced_scores == 1
        assert store.checksums()["scores"] != sums["scores"]


def test_replace_overwrites_and_only_whole_source_removes(workspace: Path) -> None:
    """A post for one LLM to a source every LLM shares (the service's `api`) must not remove
    the others' scores; `locus import --replace` (whole_source) makes the file the source."""
    rows = planted_long_table()
    one_llm = rows[rows["llm_id"] == "llm-0"].copy()
    one_llm["score"] = 1.0 - one_llm["score"]
    with Store.open(workspace) as store:
        store.write_batch(batch_of(rows), kind="table")
        report = store.write_batch(batch_of(one_llm), kind="table", replace=True)
        assert report.removed_scores == 0 and store.counts()["scores"] == len(rows)
        whole = store.write_batch(batch_of(one_llm), kind="table", replace=True, whole_source=True)
        assert whole.removed_scores == len(rows) - len(one_llm)
        assert store.counts()["scores"] == len(one_llm)
        assert store.score_table().llm_ids == ("llm-0",)


def test_same_queries_in_two_sources_are_one_query_per_text(workspace: Path) -> None:
    rows = planted_long_table(n_queries=10)
    with Store.open(workspace) as store:
        store.write_batch(batch_of(rows, "one"), kind="table")
        second = store.write_batch(batch_of(rows, "two"), kind="table")
        table = store.score_table()
        counts = store.counts()
        only_two = store.score_table(sources=["two"])
    assert (second.new_queries, second.new_aliases, second.new_scores) == (0, 10, len(rows))
    assert counts["queries"] == 10 and counts["query_aliases"] == 20
    assert counts["scores"] == 2 * len(rows) and counts["disagreeing_cells"] == 0
    assert table.query_ids == tuple(f"q{q}" for q in range(10))
    assert int(table.observed.sum()) == len(rows), "each (LLM, query) once, not twice"
    assert only_two.n_queries == 10 and only_two.query_ids == table.query_ids


def test_same_query_ids_with_other_texts_in_two_sources_are_distinct(workspace: Path) -> None:
    rows = planted_long_table(n_queries=10)
    other = rows.assign(query_text=rows["query_text"] + " (other benchmark)")
    with Store.open(workspace) as store:
        store.write_batch(batch_of(rows, "one"), kind="table")
        store.write_batch(batch_of(other, "two"), kind="table")
        table = store.score_table()
        assert store.counts()["queries"] == 20
        assert store.score_table(sources=["two"]).query_ids[0] == "q0"
    assert table.query_ids[0] == "one/q0" and table.query_ids[-1].startswith("two/")
    assert len(set(table.query_ids)) == 20


def test_workspace_that_is_a_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("not a workspace")
    with pytest.raises(LocusStoreError, match="expected a directory, found a file"):
        Store.open(path)


def test_foreign_database_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "locus.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LocusStoreError, match="not a locus database"):
        Store.open(tmp_path / "ws")


def test_newer_schema_is_refused(workspace: Path) -> None:
    with Store.open(workspace) as store:
        store.set_meta("schema_version", "999")
    with pytest.raises(LocusStoreError, match="newer locus"):
        Store.open(workspace)


def test_vectors_roundtrip_and_missing(workspace: Path) -> None:
    with Store.open(workspace) as store:
        store.write_batch(batch_of(planted_long_table(n_queries=4)), kind="table")
        missing = store.texts_without_vectors("enc")
        assert len(missing) == 4
        vectors = np.arange(4 * 3, dtype=np.float32).reshape(4, 3)
        store.put_vectors("enc", [h for h, _ in missing], vectors)
        assert store.texts_without_vectors("enc") == []
        hashes = [h for h, _ in missing]
        np.testing.assert_array_equal(store.get_vectors("enc", hashes[::-1]), vectors[::-1])
        assert store.texts_without_vectors("other") == missing


# A child process that imports a large batch and pauses inside the write transaction.
_PAUSED_IMPORT = textwrap.dedent(
    """
    import sys, time
    from contextlib import contextmanager
    import numpy as np, pandas as pd
    from locus.data.batch import ImportBatch
    from locus.store import Store

    n_llms, n_queries = 40, 3000
    rng = np.random.default_rng(1)
    rows = pd.DataFrame({
        "llm_id": np.repeat([f"new-{i}" for i in range(n_llms)], n_queries),
        "query_id": np.tile([f"big{q}" for q in range(n_queries)], n_llms),
        "score": rng.integers(0, 2, n_llms * n_queries).astype(float),
    })
    batch = ImportBatch.from_long(rows, source="big", origin="big.csv")

    @contextmanager
    def pause_after_first_chunk(description, total=None):
        def advance(n):
            print("WRITING", flush=True)
            time.sleep(600)
        yield advance

    Store.open(sys.argv[1]).write_batch(batch, kind="table", progress=pause_after_first_chunk)
    """
)


def _start_paused_import(workspace: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    child = subprocess.Popen(
        [sys.executable, "-c", _PAUSED_IMPORT, str(workspace)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.strip() == "WRITING", f"child did not reach the write: {line!r}"
    return child


def test_sigkill_mid_import_leaves_store_as_before(workspace: Path) -> None:
    with Store.open(workspace) as store:
        store.write_batch(batch_of(planted_long_table()), kind="table")
        counts, sums = store.counts(), store.checksums()
    child = _start_paused_import(workspace)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert child.stdout is not None
    child.stdout.close()
    with Store.open(workspace) as store:
        assert store.counts() == counts
        assert store.checksums() == sums
        # the lock died with the process: the next import goes through
        report = store.write_batch(batch_of(planted_long_table(seed=5), "after"), kind="table")
        assert report.new_scores > 0


def test_reader_keeps_working_while_an_import_runs(workspace: Path) -> None:
    with Store.open(workspace) as store:
        store.write_batch(batch_of(planted_long_table()), kind="table")
    child = _start_paused_import(workspace)
    try:
        started = time.perf_counter()
        with Store.open(workspace) as reader:
            summary = reader.llm_summary()
            counts = reader.counts()
        elapsed = time.perf_counter() - started
        assert len(summary) == 6  # the running import's 40 LLMs are not visible yet
        assert counts["llms"] == 6
        assert elapsed < 30, "the reader waited for the writer's lock"
    finally:
        child.kill()
        child.wait(timeout=30)
        assert child.stdout is not None
        child.stdout.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_write_that_waits_for_another_is_told(
    kind: str, request: pytest.FixtureRequest, workspace: Path
) -> None:
    """`on_wait` hears once, before the wait, that another writer holds the lock; the write
    then goes through when the lock is released (and a write that need not wait hears
    nothing)."""
    import threading

    spec = str(workspace) if kind == "sqlite" else request.getfixturevalue("postgres_url")
    told: list[tuple[str, float | None]] = []
    waiting, written = threading.Event(), threading.Event()

    def on_wait(location: str, limit_s: float | None) -> None:
        told.append((location, limit_s))
        waiting.set()

    def write() -> None:
        waiter.set_meta("written", "yes")
        written.set()

    with Store.open(spec) as holder, Store.open(spec, on_wait=on_wait) as waiter:
        waiter.set_meta("alone", "yes")
        assert told == []
        with holder._write(data=False):
            thread = threading.Thread(target=write)
            thread.start()
            assert waiting.wait(timeout=60), "on_wait was not called"
            assert not written.is_set()  # still waiting while the lock is held
        thread.join(timeout=60)
        assert written.is_set() and waiter.get_meta("written") == "yes"
        assert told == [(waiter.location, 60 if kind == "sqlite" else None)]
