"""MMLU-Pro ``eval_results``: one zip (holding one JSON list) or one JSON file per LLM.

Each record: ``question_id, question, options, answer, answer_index, cot_content, category, src,
pred`` (and the generated text). Mapping to the long table:

- ``llm_id``: the file name without ``model_outputs_`` and a trailing ``_5shots``
  (``model_outputs_Llama-2-7b-hf_5shots.zip`` -> ``Llama-2-7b-hf``);
- ``query_id``: ``str(question_id)``;
- ``query_text``: the question, then the options lettered ``A. ...``, ``B. ...``, one per line
  (a revised question or option list is therefore a different query under the same id);
- ``task``: ``category``;
- ``score``: 1.0 if ``pred`` equals the query's answer key else 0.0; ``pred`` null (no answer
  letter extracted) is 0;
- ``reference``: the answer key (a letter), graded by ``choice`` (`locus.data.graders`).

The answer key of a query is the one in the most recently written file that has the query (zip
member timestamp, or file modification time for plain JSON). The MMLU-Pro authors corrected some
answers between runs without changing the question text: scoring every run against the corrected
key gives one key per query, as the published accuracies do.

Real-world mess handled: ``options`` as a JSON list or as the repr of a Python list (parsed with
`ast.literal_eval`), ``answer_index`` as int or string (used when ``answer`` is absent), and list
items that are not records (a few bare strings in one published file: skipped with a warning).

    batch = import_mmlu_pro(Path("../shared/locus-data/mmlu_pro/eval_results"))
"""

from __future__ import annotations

import ast
import logging
import string
import zipfile
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from locus._progress import ProgressFactory, no_progress
from locus.data.batch import ImportBatch
from locus.data.readers import file_stem, load_json, parse_json, reading
from locus.errors import LocusInputError

from ._common import input_files

__all__ = ["import_mmlu_pro", "mmlu_pro_llm_id"]

logger = logging.getLogger("locus.data.importers")

DEFAULT_SOURCE = "mmlu-pro"
RESULT_SUFFIXES = (".zip", ".json", ".json.gz")
_EXPECTED_FILES = "MMLU-Pro result files (.zip holding a JSON list, or .json)"
_EXPECTED_RECORDS = "a JSON list of MMLU-Pro records"
_LETTERS = string.ascii_uppercase
_PREFIX = "model_outputs_"
_SUFFIX = "_5shots"


def mmlu_pro_llm_id(path: Path) -> str:
    """``model_outputs_Llama-2-7b-hf_5shots.zip`` -> ``Llama-2-7b-hf``."""
    stem = file_stem(Path(path))
    stem = stem.removeprefix(_PREFIX)
    if stem.endswith(_SUFFIX) and len(stem) > len(_SUFFIX):
        stem = stem[: -len(_SUFFIX)]
    return stem


def import_mmlu_pro(
    path: Path,
    *,
    source: str | None = None,
    namespace: str | None = None,
    progress: ProgressFactory = no_progress,
) -> ImportBatch:
    """Import MMLU-Pro results: a folder of ``eval_results`` zips or JSON files, or one file.

    Args:
        path: a folder (its ``.zip``, ``.json`` and ``.json.gz`` files are read; other files are
            ignored) or a single result file.
        source: scope of the query ids and provenance of the scores; default ``"mmlu-pro"``.
        namespace: identifies the queries that come without text, with their id; default
            the source. Give per-LLM imports of one benchmark the same namespace to
            join them.
        progress: one step per file.

    Returns:
        The validated batch; one LLM per file.

    Raises:
        LocusInputError: no result files, a damaged or truncated zip, malformed JSON, a record
            without the MMLU-Pro fields, unparsable ``options``; each names the file and record.
    """
    files = input_files(Path(path), RESULT_SUFFIXES, _EXPECTED_FILES)
    labels: list[str] = []
    written: list[float] = []
    parts: list[dict[str, list[object]]] = []
    text_cache: dict[tuple[object, ...], str] = {}
    with progress("reading MMLU-Pro results", total=len(files)) as advance:
        for file in files:
            for label, document, timestamp in _documents(file):
                labels.append(label)
                written.append(timestamp)
                parts.append(
                    _rows_of(document, label, mmlu_pro_llm_id(file), len(labels) - 1, text_cache)
                )
            advance(1)
    columns = {name: [v for part in parts for v in part[name]] for name in parts[0]}
    file_index = np.asarray(columns.pop("_file"), dtype=np.int64)
    record_number = np.asarray(columns.pop("_record"), dtype=np.int64)
    preds = columns.pop("_pred")
    answers = columns.pop("_answer")
    key, rekeyed = _newest_answer_keys(
        columns["query_id"], columns["query_text"], answers, np.asarray(written)[file_index]
    )
    columns["score"] = [
        1.0 if pred is not None and pred == answer else 0.0
        for pred, answer in zip(preds, key, strict=True)
    ]
    columns["reference"] = list(key)  # the answer letter, for grading a new LLM's answers
    columns["grader"] = ["choice"] * len(key)
    if rekeyed:
        logger.info("%s: %d queries carry a corrected answer key in newer files", path, rekeyed)
    # object columns: pandas would otherwise copy every text into an Arrow string buffer
    rows = pd.DataFrame({name: pd.Series(values, dtype=object) for name, values in columns.items()})

    def describe_row(position: int) -> str:
        return f"{labels[int(file_index[position])]}: record {int(record_number[position])}"

    return ImportBatch.from_long(
        rows,
        source=source if source is not None else DEFAULT_SOURCE,
        origin=str(path),
        describe_row=describe_row,
        namespace=namespace,
    )


def _newest_answer_keys(
    query_ids: list[object], texts: list[object], answers: list[object], written: np.ndarray
) -> tuple[list[object], int]:
    """Per row, the answer of its query (id + text) in the most recently written file.

    Returns the per-row keys and how many queries had more than one answer across files.
    """
    newest: dict[tuple[object, object], tuple[float, object]] = {}
    seen: dict[tuple[object, object], set[object]] = {}
    for query_id, text, answer, when in zip(query_ids, texts, answers, written, strict=True):
        query = (query_id, text)
        seen.setdefault(query, set()).add(answer)
        best = newest.get(query)
        if best is None or float(when) > best[0]:
            newest[query] = (float(when), answer)
    rekeyed = sum(len(keys) > 1 for keys in seen.values())
    return [newest[(q, t)][1] for q, t in zip(query_ids, texts, strict=True)], rekeyed


def _documents(file: Path) -> list[tuple[str, object, float]]:
    """(label, parsed JSON, time written) for each JSON document in the file (a zip may hold
    several); the time is the zip member's timestamp, else the file's modification time."""
    name = file.name.lower()
    if not name.endswith(".zip"):
        return [(file.name, load_json(file, _EXPECTED_RECORDS), file.stat().st_mtime)]
    out: list[tuple[str, object, float]] = []
    with reading(file, "a zip of MMLU-Pro JSON results"), zipfile.ZipFile(file) as archive:
        members = [
            info
            for info in archive.infolist()
            if not info.is_dir()
            and info.filename.lower().endswith(".json")
            and not info.filename.startswith("__MACOSX/")
        ]
        if not members:
            raise LocusInputError(
                f"{file}: no .json file inside the zip (found "
                f"{', '.join(archive.namelist()) or 'nothing'}); expected one JSON list of "
                "MMLU-Pro records; check the archive"
            )
        for info in members:
            label = file.name if len(members) == 1 else f"{file.name}:{info.filename}"
            data = archive.read(info)
            when = datetime(*info.date_time).timestamp()
            out.append((label, parse_json(data, Path(label), _EXPECTED_RECORDS), when))
    return out


def _rows_of(
    document: object,
    label: str,
    llm_id: str,
    file_index: int,
    text_cache: dict[tuple[object, ...], str],
) -> dict[str, list[object]]:
    if not isinstance(document, list):
        raise LocusInputError(
            f"{label}: expected {_EXPECTED_RECORDS}, found a JSON {type(document).__name__}; "
            "check that this is an MMLU-Pro eval_results file"
        )
    query_ids: list[object] = []
    texts: list[object] = []
    tasks: list[object] = []
    preds: list[object] = []
    answers: list[object] = []
    records: list[object] = []
    skipped: list[object] = []
    for number, record in enumerate(document, start=1):
        if not isinstance(record, dict):
            skipped.append(record)
            continue
        try:
            question_id = record["question_id"]
            question = record["question"]
            options = record["options"]
            pred = record["pred"]
        except KeyError as missing:
            raise LocusInputError(
                f"{label}: record {number}: missing field {missing.args[0]!r}; expected MMLU-Pro "
                "fields question_id, question, options, answer (or answer_index), pred, category; "
                "check that this is an MMLU-Pro eval_results file"
            ) from None
        if not isinstance(question, str):
            raise LocusInputError(
                f"{label}: record {number}, field 'question': expected text, found "
                f"{type(question).__name__}; fix the record"
            )
        key = (question_id, question, _hashable(options))
        text = text_cache.get(key)
        if text is None:
            text = _query_text(question, _options(options, label, number))
            text_cache[key] = text
        answer = _answer(record, label, number)
        query_ids.append(str(question_id))
        texts.append(text)
        tasks.append(record.get("category"))
        preds.append(None if pred is None else str(pred).strip())
        answers.append(answer)
        records.append(number)
    if skipped:
        logger.warning(
            "%s: skipped %d list items that are not records (e.g. %r)",
            label,
            len(skipped),
            skipped[0],
        )
    return {
        "llm_id": [llm_id] * len(query_ids),
        "query_id": query_ids,
        "query_text": texts,
        "task": tasks,
        "_pred": preds,
        "_answer": answers,
        "_file": [file_index] * len(query_ids),
        "_record": records,
    }


def _hashable(options: object) -> object:
    if isinstance(options, list):
        key = tuple(options)
        try:
            hash(key)
        except TypeError:
            return repr(options)
        return key
    return options if isinstance(options, (str, int, float, type(None))) else repr(options)


def _options(options: object, label: str, number: int) -> list[str]:
    value = options
    if isinstance(options, str):
        try:
            value = ast.literal_eval(options.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            value = None
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(o, (str, int, float)) for o in value
    ):
        raise LocusInputError(
            f"{label}: record {number}, field 'options': expected a list of option texts (JSON "
            f"list or Python list literal), found {str(options)[:80]!r}; fix the record"
        )
    if len(value) > len(_LETTERS):
        raise LocusInputError(
            f"{label}: record {number}, field 'options': expected at most {len(_LETTERS)} "
            f"options, found {len(value)}; fix the record"
        )
    return [str(o) for o in value]


def _query_text(question: str, options: list[str]) -> str:
    lettered = "\n".join(
        f"{letter}. {option}" for letter, option in zip(_LETTERS, options, strict=False)
    )
    return f"{question}\n{lettered}" if lettered else question


def _answer(record: dict[str, object], label: str, number: int) -> str:
    answer = record.get("answer")
    if isinstance(answer, str) and answer.strip():
        return answer.strip()
    index = record.get("answer_index")
    try:
        position = int(str(index).strip())
    except ValueError:
        position = -1
    if 0 <= position < len(_LETTERS):
        return _LETTERS[position]
    raise LocusInputError(
        f"{label}: record {number}: expected an answer letter in 'answer' or a 0-based "
        f"'answer_index', found answer={answer!r}, answer_index={index!r}; fix the record"
    )
