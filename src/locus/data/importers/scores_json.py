"""JSON lists of queries with a score per LLM (the RouterDC ``datasets/`` layout).

    [{"question": "...", "scores": {"<llm>": 0.93, "<llm>": 0.0, ...}}, ...]

Mapping to the long table, one row per (record, LLM):

- ``query_text`` = ``question`` (or ``query_text``);
- ``query_id`` = the record's ``query_id`` or ``id`` when it has one, else the first 16 hex
  digits of the text hash (stable: the same text always gets the same id);
- ``task`` = the record's ``task``, else the file name without suffixes
  (``mmlu_test.json.gz`` -> ``mmlu_test``);
- ``score`` = the LLM's value (graded scores in [0, 1] are kept as they are; null = not
  evaluated).

A query is its text: the same text listed twice (in one file, or in two files of a folder) is
one query. By default its scores are averaged and it keeps the task of its first listing
(``repeats="mean"``, logged); ``repeats="error"`` rejects differing repeats instead.

    batch = import_scores_json(Path("split2_model7/"))    # every .json / .json.gz of the folder
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from locus._progress import ProgressFactory, no_progress
from locus.data.batch import ImportBatch
from locus.data.query_identity import text_hash
from locus.data.readers import file_stem, load_json
from locus.errors import LocusInputError

from ._common import RepeatPolicy, input_files, merge_repeats

__all__ = ["import_scores_json"]

DEFAULT_SOURCE = "scores-json"
JSON_FILES = (".json", ".json.gz")
TEXT_KEYS = ("question", "query_text")
ID_KEYS = ("query_id", "id")
_EXPECTED = 'a JSON list of {"question": ..., "scores": {llm: score}} records'


def import_scores_json(
    path: Path,
    *,
    source: str | None = None,
    namespace: str | None = None,
    progress: ProgressFactory = no_progress,
    repeats: RepeatPolicy = "mean",
) -> ImportBatch:
    """Import one scores JSON file (``.json`` or ``.json.gz``) or every such file of a folder.

    Args:
        path: a file or a folder.
        source: scope of the query ids and provenance of the scores; default ``"scores-json"``.
        namespace: identifies the queries that come without text, with their id; default
            the source. Give per-LLM imports of one benchmark the same namespace to
            join them.
        progress: one step per file.
        repeats: what to do with a text listed more than once: ``"mean"`` (average the scores,
            keep the first task) or ``"error"``.

    Returns:
        The validated batch.

    Raises:
        LocusInputError: malformed JSON, a record without text or without a ``scores`` object,
            and the checks of `ImportBatch.from_long` (a non-numeric or out-of-range score names
            its file, record and LLM).
    """
    files = input_files(Path(path), JSON_FILES, _EXPECTED)
    labels = [file.name for file in files]
    parts: list[dict[str, list[object]]] = []
    with progress("reading score files", total=len(files)) as advance:
        for number, file in enumerate(files):
            parts.append(_rows_of(file, number))
            advance(1)
    columns = {name: [v for part in parts for v in part[name]] for name in parts[0]}
    file_index = np.asarray(columns.pop("_file"), dtype=np.int64)
    record_number = np.asarray(columns.pop("_record"), dtype=np.int64)
    rows = pd.DataFrame({name: pd.Series(v, dtype=object) for name, v in columns.items()})

    def describe_row(position: int) -> str:
        return (
            f"{labels[int(file_index[position])]}: record {int(record_number[position])}, "
            f"LLM {rows['llm_id'].iat[position]!r}"
        )

    merged, describe_merged = merge_repeats(rows, describe_row, repeats, str(path))
    return ImportBatch.from_long(
        merged,
        source=source if source is not None else DEFAULT_SOURCE,
        origin=str(path),
        describe_row=describe_merged,
        namespace=namespace,
    )


def _rows_of(file: Path, file_number: int) -> dict[str, list[object]]:
    document = load_json(file, _EXPECTED)
    if not isinstance(document, list):
        raise LocusInputError(
            f"{file}: expected {_EXPECTED}, found a JSON {type(document).__name__}; write the "
            "records as a list"
        )
    default_task = file_stem(file)
    out: dict[str, list[object]] = {
        "llm_id": [],
        "query_id": [],
        "query_text": [],
        "task": [],
        "score": [],
        "_file": [],
        "_record": [],
    }
    for number, record in enumerate(document, start=1):
        if not isinstance(record, dict):
            raise LocusInputError(
                f"{file}: record {number}: expected a JSON object, found "
                f"{type(record).__name__}; every list item must be an object"
            )
        text = next((record[k] for k in TEXT_KEYS if isinstance(record.get(k), str)), None)
        if text is None or not text.strip():
            raise LocusInputError(
                f"{file}: record {number}: expected the query text in 'question' (or "
                f"'query_text'), found keys {', '.join(map(str, record)) or 'none'}; add the text"
            )
        scores = record.get("scores")
        if not isinstance(scores, dict):
            raise LocusInputError(
                f"{file}: record {number}, field 'scores': expected an object of LLM -> score, "
                f'found {type(scores).__name__}; write the scores as {{"llm": 0.5, ...}}'
            )
        given_id = next((record[k] for k in ID_KEYS if record.get(k) not in (None, "")), None)
        query_id = str(given_id) if given_id is not None else text_hash(text)[:16]
        task = record.get("task") if record.get("task") not in (None, "") else default_task
        for llm_id, score in scores.items():
            out["llm_id"].append(llm_id)
            out["query_id"].append(query_id)
            out["query_text"].append(text)
            out["task"].append(task)
            out["score"].append(score)
            out["_file"].append(file_number)
            out["_record"].append(number)
    if not out["llm_id"]:
        raise LocusInputError(
            f"{file}: no scores; expected {_EXPECTED}; check that this is the right file"
        )
    return out
