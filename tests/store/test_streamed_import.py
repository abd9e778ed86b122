"""A table file read and written in parts (`iter_import_table` + `Store.write_batches`): the same
store as a whole read, errors naming the right line of the whole file, one transaction (a bad
part or a killed process leaves the store as it was)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locus.data.importers.long_table import import_table, iter_import_table
from locus.errors import LocusConflictError, LocusInputError
from locus.store import Store
from tests.planted_workspace import planted_rows


def _rows() -> pd.DataFrame:
    rows = planted_rows(llms_per_group=2, queries_per_task=20)
    return rows.assign(reference="A", cost_usd=0.001)


def _store_content(store: Store) -> tuple[object, ...]:
    table = store.score_table()
    order = np.lexsort((np.asarray(table.query_texts),))
    return (
        table.llm_ids,
        [table.query_texts[i] for i in order],
        np.nan_to_num(table.scores[order], nan=-1).tolist(),
        store.counts(),
        sorted(store.references().items()),
    )


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".csv.gz"])
def test_parts_write_the_same_store_as_a_whole_read(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"scores{suffix}"
    rows = _rows().sample(frac=1.0, random_state=3)  # a query's rows spread over the parts
    if suffix == ".parquet":
        rows.to_parquet(path, row_group_size=50)
    else:
        rows.to_csv(path, index=False)
    whole_ws, parts_ws = tmp_path / "whole", tmp_path / "parts"
    with Store.open(whole_ws) as store:
        whole = store.write_batch(import_table(path), kind="table")
        expected = _store_content(store)
    batches = list(iter_import_table(path, chunk_rows=37))
    assert len(batches) == -(-len(rows) // 37)
    assert batches[0].notes == import_table(path).notes and not batches[1].notes
    with Store.open(parts_ws) as store:
        parts = store.write_batches(iter(batches), kind="table")
        assert _store_content(store) == expected
    for field in ("llms_in_file", "queries_in_file", "scores_in_file", "new_llms",
                  "new_queries", "new_scores", "new_aliases", "references"):  # fmt: skip
        assert getattr(parts, field) == getattr(whole, field), field
    # a second streamed import of the same file changes nothing
    with Store.open(parts_ws) as store:
        again = store.write_batches(iter_import_table(path, chunk_rows=37), kind="table")
        assert not again.changed and again.unchanged_scores == len(rows)


def test_a_bad_row_in_a_later_part_names_its_line_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    rows = _rows()
    rows.loc[100, "score"] = 7.0  # data row 101: line 102 of the file
    rows.to_csv(path, index=False)
    ws = tmp_path / "ws"
    with Store.open(ws) as store:
        store.write_batch(import_table(_write_small(tmp_path)), kind="table")
        before = _store_content(store)
        with pytest.raises(LocusInputError, match=r"line 102, column 'score'.*found '7.0'"):
            store.write_batches(iter_import_table(path, chunk_rows=30), kind="table")
        assert _store_content(store) == before


def _write_small(tmp_path: Path) -> Path:
    small = tmp_path / "small.csv"
    pd.DataFrame({"llm_id": ["z"], "query_text": ["an earlier query"], "score": [1.0]}).to_csv(
        small, index=False
    )
    return small


def test_two_parts_scoring_one_cell_differently_conflict(tmp_path: Path) -> None:
    path = tmp_path / "scores.parquet"
    rows = _rows()
    clash = rows.iloc[[0]].assign(score=1.0 - rows.iloc[0]["score"])
    pd.concat([rows, clash], ignore_index=True).to_parquet(path)
    with Store.open(tmp_path / "ws") as store:
        with pytest.raises(LocusConflictError, match="earlier part of this file"):
            store.write_batches(iter_import_table(path, chunk_rows=100), kind="table")
        assert store.counts()["scores"] == 0
        # with replace, the later part's score wins
        store.write_batches(iter_import_table(path, chunk_rows=100), kind="table", replace=True)
        table = store.score_table()
        row = table.query_texts.index(rows.iloc[0]["query_text"])
        column = table.llm_index(rows.iloc[0]["llm_id"])
        assert table.scores[row, column] == clash.iloc[0]["score"]


def test_replacing_a_whole_source_in_parts_removes_what_the_file_no_longer_has(
    tmp_path: Path,
) -> None:
    path = tmp_path / "scores.parquet"
    rows = _rows()
    rows.to_parquet(path)
    with Store.open(tmp_path / "ws") as store:
        store.write_batches(iter_import_table(path, chunk_rows=50), kind="table")
        kept = rows[rows["llm_id"] != "law-1"]
        kept.to_parquet(path)
        report = store.write_batches(
            iter_import_table(path, chunk_rows=50), kind="table", replace=True, whole_source=True
        )
        assert report.removed_scores == int((rows["llm_id"] == "law-1").sum())
        assert "law-1" not in store.score_table().llm_ids


def test_a_killed_streamed_import_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    """A large file imported by a real `locus import` process, killed mid-way: the store holds
    what it held before, or (had it finished first) the whole file; never a part."""
    big = tmp_path / "big.parquet"
    rng = np.random.default_rng(0)
    n_llms, n_queries = 80, 6000
    pd.DataFrame(
        {
            "llm_id": np.repeat([f"m{i}" for i in range(n_llms)], n_queries),
            "query_text": np.tile([f"question number {q}" for q in range(n_queries)], n_llms),
            "score": rng.integers(0, 2, n_llms * n_queries).astype(float),
        }
    ).to_parquet(big, row_group_size=20_000)
    ws = tmp_path / "ws"
    with Store.open(ws) as store:
        store.write_batch(import_table(_write_small(tmp_path)), kind="table")
        before = store.counts()
    locus = str(Path(sys.executable).parent / "locus")
    command = [locus, "import", "table", str(big), "-w", str(ws), "-q"]
    process = subprocess.Popen(
        command, env={**os.environ, "LOCUS_NO_PROGRESS": "1"}, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # the import takes several seconds (startup, reading, writing 480,000 scores in one
    # transaction): killed at 2.5 s it
    # is, on any machine we know, writing; whenever the kill lands, the store must hold either
    # nothing of the file or all of it
    time.sleep(2.5)
    finished = process.poll() is not None
    if not finished:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    with Store.open(ws) as store:
        after = store.counts()
    if finished:
        assert process.returncode == 0
    whole = before["scores"] + n_llms * n_queries
    assert after == before or (
        after["scores"] == whole and after["llms"] == before["llms"] + n_llms
    )
