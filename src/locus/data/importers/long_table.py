"""The generic importer: a long score table (CSV, TSV, Parquet, JSONL or JSON), optionally with a
separate queries file.

Scores file, one row per observed (LLM, query):

    llm_id, query_id, score [, query_text, task, split, cost_usd, latency_ms]

Queries file (optional), one row per query, joined on ``query_id``:

    query_id, query_text [, task, reference (or answer), grader]

A reference answer (``reference``, or a synonym such as ``gold`` or ``target``; ``answer`` in
a queries file) is kept with its query: `locus onboard` grades a new LLM's answers against it.

Columns named differently in the file are mapped with ``columns={"score": "correct", ...}``
(canonical name -> file column). Without a mapping, a column is recognised by a name people
commonly use for it (`SYNONYMS`: ``model`` for ``llm_id``, ``prompt`` or ``question`` for
``query_text``, ``category`` for ``task``, ``correct`` or ``acc`` for ``score``, ...) where
exactly one column of the file has such a name; ``query_id`` may be left out when the file has
the query text (the text is the query's identity); each score cell is read by its own form
(a number, ``87%``, ``true``/``false``, ``yes``/``no``: `locus.data.score_cells.parse_scores`). Each
such decision is a note on the batch (`ImportBatch.notes`), which
`locus import` prints.

    batch = import_table(
        Path("scores.csv.gz"),
        queries=Path("queries.jsonl.gz"),
        columns={"llm_id": "model"},
    )
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from locus._progress import ProgressFactory, no_progress
from locus.data.batch import OPTIONAL_COLUMNS, REQUIRED_COLUMNS, ImportBatch
from locus.data.query_identity import text_hash
from locus.data.readers import TableData, file_stem, iter_table, read_table
from locus.errors import LocusInputError

__all__ = ["SYNONYMS", "import_table", "iter_import_table", "recognise_columns"]

CANONICAL_COLUMNS = (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS)
QUERY_COLUMNS = ("query_id", "query_text", "task", "reference", "grader", "answer")
# canonical column -> the names people give it (compared without case, spaces or dashes)
SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "llm_id": ("llm_id", "model", "llm", "model_name", "model_id", "llm_name", "system"),
    "query_id": ("query_id", "id", "question_id", "prompt_id", "sample_id", "item_id", "qid"),
    "query_text": ("query_text", "prompt", "question", "input", "query", "text", "question_text"),
    "score": ("score", "correct", "is_correct", "acc", "accuracy", "exact_match", "pass"),
    "task": ("task", "category", "subject", "task_name", "benchmark", "dataset", "domain"),
    "split": ("split",),
    "cost_usd": ("cost_usd", "cost", "price_usd"),
    "latency_ms": ("latency_ms", "latency"),
    # not "answer": in a scores file that is as often the model's own answer
    "reference": (
        "reference", "reference_answer", "gold", "gold_answer", "target", "correct_answer",
        "expected_answer", "ground_truth",
    ),
    "grader": ("grader",),
}  # fmt: skip
# names of a score column in a production log (feedback, an outcome), looked for only where
# no column has a name of `SYNONYMS["score"]` (a "label" beside a "correct" is the gold label)
FEEDBACK_NAMES = (
    "thumbs_up", "thumbsup", "thumbs", "feedback", "rating", "stars", "label", "outcome",
    "success", "resolved", "reward", "grade",
)  # fmt: skip
# of those, the ones whose whole numbers are a rating scale (1-5, or 1-10), not 0/1
RATING_NAMES = ("rating", "stars", "grade")


def import_table(
    path: Path,
    *,
    source: str | None = None,
    namespace: str | None = None,
    progress: ProgressFactory = no_progress,
    columns: Mapping[str, str] | None = None,
    queries: Path | None = None,
) -> ImportBatch:
    """Import a long score table.

    Args:
        path: the scores file; format from the suffix (``.csv``, ``.csv.gz``, ``.tsv``,
            ``.tsv.gz``, ``.parquet``, ``.jsonl``, ``.jsonl.gz``, ``.json``, ``.json.gz``).
        source: scope of the query ids and provenance of the scores; default the file name
            without suffixes (``scores.csv.gz`` -> ``scores``).
        namespace: identifies the queries that come without text, with their id; default
            the source. Give per-LLM imports of one benchmark the same namespace to
            join them.
        progress: progress reporting (one step per file read).
        columns: canonical column name -> column name in the scores file, for files whose
            columns are named differently, e.g. ``{"score": "correct", "llm_id": "model"}``.
        queries: a file of ``query_id, query_text`` and optional ``task`` (same formats),
            joined on ``query_id``. Its text and task fill in what the scores file leaves blank.

    Returns:
        The validated batch (`ImportBatch.from_long`).

    Raises:
        LocusInputError: unreadable or malformed file, a mapped column that is not in the file,
            a scored query missing from the queries file, and every check of
            `ImportBatch.from_long`, each naming the file and line.
    """
    batches = list(
        iter_import_table(
            path, source=source, namespace=namespace, progress=progress, columns=columns,
            queries=queries, chunk_rows=None,
        )
    )  # fmt: skip
    return batches[0]


def iter_import_table(
    path: Path,
    *,
    source: str | None = None,
    namespace: str | None = None,
    progress: ProgressFactory = no_progress,
    columns: Mapping[str, str] | None = None,
    queries: Path | None = None,
    chunk_rows: int | None = 500_000,
) -> Iterator[ImportBatch]:
    """`import_table` in batches of at most `chunk_rows` rows of the file (None: one batch),
    read lazily, so a file of any size imports in bounded memory (`Store.write_batches` writes
    them in one transaction). The columns are recognised once, on the first chunk; the notes
    ride on the first batch. Errors as `import_table`'s, raised when their chunk is read."""
    path = Path(path)
    chunks = iter([read_table(path)]) if chunk_rows is None else iter_table(path, chunk_rows)
    with progress("reading score table", total=None) as advance:
        first = next(chunks)
        mapping, notes = _recognise_columns(first, columns or {}, queries is not None)
        scale = _rating_scale(first, mapping)
        if scale is not None:
            notes = [
                *notes,
                f"score: {mapping['score']!r} read as a rating of 1 to {scale}: (rating - 1) / "
                f"{scale - 1} ({scale} -> 1, 1 -> 0)",
            ]
        lookups = _queries_lookups(Path(queries)) if queries is not None else None
        for number, table in enumerate(itertools.chain([first], chunks)):
            rows = _map_columns(table, mapping)
            if scale is not None and "score" in rows.columns:
                rating = pd.to_numeric(rows["score"], errors="coerce")
                rows["score"] = rows["score"].where(rating.isna(), (rating - 1) / (scale - 1))
            if lookups is not None and queries is not None:
                rows = _join_queries(rows, table, lookups, Path(queries))
            _check_required(rows, table, mapping)
            rows, more = _ids_from_text(rows, table)
            said = (*table.notes, *notes, *more) if number == 0 else ()
            advance(len(table.frame))
            yield ImportBatch.from_long(
                rows,
                source=source if source is not None else file_stem(path),
                origin=str(path),
                describe_row=table.describe_row,
                namespace=namespace,
                notes=said,
            )


def _rating_scale(table: TableData, mapping: Mapping[str, str]) -> int | None:
    """5 or 10 where the score column has a rating's name (`RATING_NAMES`) and its numbers
    are whole, from 1 to at most 5 (10), above 1 somewhere; else None (read as scores)."""
    column = mapping.get("score", "score")
    if _key(column) not in RATING_NAMES or column not in table.frame.columns:
        return None
    values = pd.to_numeric(table.frame[column], errors="coerce").dropna().to_numpy(float)
    if not len(values) or values.max() <= 1 or values.min() < 1:
        return None
    if not np.all(values == np.round(values)) or values.max() > 10:
        return None
    return 5 if values.max() <= 5 else 10


def _key(name: object) -> str:
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


def _recognise_columns(
    table: TableData, given: Mapping[str, str], with_queries: bool
) -> tuple[dict[str, str], list[str]]:
    """`recognise_columns` on a table file; with a queries file, query text and task come
    from there."""
    skip = ("query_text", "task") if with_queries else ()
    return recognise_columns([str(c) for c in table.frame.columns], given, skip=skip)


def recognise_columns(
    columns: list[str], given: Mapping[str, str], *, skip: tuple[str, ...] = ()
) -> tuple[dict[str, str], list[str]]:
    """`given` (canonical -> file column) plus each canonical column the file lacks under its
    own name and that exactly one of `columns` names by a synonym (`SYNONYMS`), never one
    column for two (`skip`: canonical columns not to look for); the notes say which were
    recognised."""
    mapping = dict(given)
    taken = set(mapping.values()) | {c for c in columns if c in CANONICAL_COLUMNS}
    recognised = []
    for canonical, names in SYNONYMS.items():
        if canonical in mapping or canonical in columns:
            continue
        if canonical in skip:
            continue
        found = [c for c in columns if _key(c) in names and c not in taken]
        if canonical == "score" and not found:
            found = [c for c in columns if _key(c) in FEEDBACK_NAMES and c not in taken]
        if len(found) == 1:
            mapping[canonical] = found[0]
            taken.add(found[0])
            recognised.append(f"{canonical} <- {found[0]!r}")
    notes = [f"columns recognised by name: {', '.join(recognised)}"] if recognised else []
    return mapping, notes


def _check_required(rows: pd.DataFrame, table: TableData, mapping: Mapping[str, str]) -> None:
    """llm_id, score and a query id or text, each named in one line that lists the file's own
    columns and what would be recognised."""
    needed = ["llm_id", "score"]
    if "query_id" not in rows.columns and "query_text" not in rows.columns:
        needed.append("query_id")
    for canonical in needed:
        if canonical in rows.columns:
            continue
        own = [str(c) for c in table.frame.columns]
        several = [c for c in own if _key(c) in SYNONYMS[canonical]]
        if canonical == "score" and not several:
            several = [c for c in own if _key(c) in FEEDBACK_NAMES]
        names = ", ".join(SYNONYMS[canonical][:5])
        if canonical == "score":
            names += ", a feedback column (thumbs_up, rating, feedback, label, outcome)"
        what = (
            "query id or query text column (query_id or query_text)"
            if canonical == "query_id"
            else f"{canonical} column"
        )
        hint = (
            f"several columns could be it ({', '.join(several)}): choose one with "
            f"-c {canonical}=COLUMN"
            if len(several) > 1
            else f"name a column {names}, or map yours with -c {canonical}=COLUMN"
        )
        raise LocusInputError(
            f"{table.path}: no {what} found among the file's columns "
            f"({', '.join(own) or 'none'}); {hint}"
        )


def _ids_from_text(rows: pd.DataFrame, table: TableData) -> tuple[pd.DataFrame, list[str]]:
    """Without a query_id column, each query's id is its text's hash (the text is already its
    identity); a row with neither is an error naming its line."""
    if "query_id" in rows.columns:
        return rows, []
    text = rows["query_text"]
    blank = text.isna() | (text.astype(str).str.strip() == "")
    if blank.any():
        position = int(blank.to_numpy().nonzero()[0][0])
        raise LocusInputError(
            f"{table.path}: {table.describe_row(position)}: no query text and no query_id "
            "column; expected the query's text on every row (or a query_id column)"
        )
    out = rows.copy()
    codes, uniques = pd.factorize(text.astype(str))  # each distinct text hashed once
    ids = np.asarray([text_hash(t)[:16] for t in uniques], dtype=object)
    out["query_id"] = ids[codes]
    return out, ["query_id: none in the file, each query is identified by its text"]


def _map_columns(table: TableData, mapping: Mapping[str, str]) -> pd.DataFrame:
    frame = table.frame
    for canonical, file_column in mapping.items():
        if canonical not in CANONICAL_COLUMNS:
            raise LocusInputError(
                f"column mapping {canonical}={file_column}: {canonical!r} is not a canonical "
                f"column; expected one of {', '.join(CANONICAL_COLUMNS)}; map CANONICAL=FILE_COLUMN"
            )
        if file_column not in frame.columns:
            raise LocusInputError(
                f"{table.path}: column {file_column!r} (mapped to {canonical!r}) is not in the "
                f"file; found columns {', '.join(map(str, frame.columns)) or 'none'}; fix the "
                f"mapping {canonical}=COLUMN"
            )
    if not mapping:
        return frame
    mapped = frame.copy()
    for canonical, file_column in mapping.items():
        mapped[canonical] = frame[file_column]
    return mapped


def _queries_lookups(queries_path: Path) -> dict[str, pd.Series]:
    """The queries file, read once: query_text, task, reference, grader by query_id."""
    queries = read_table(queries_path, keep_columns=QUERY_COLUMNS)
    frame = queries.frame
    for column in ("query_id", "query_text"):
        if column not in frame.columns:
            raise LocusInputError(
                f"{queries_path}: missing column {column!r}; expected a queries file with "
                f"columns query_id, query_text (optional: task), found "
                f"{', '.join(map(str, frame.columns)) or 'none'}; rename the column"
            )
    ids = _as_ids(frame["query_id"])
    blank = ids == ""
    if blank.any():
        position = int(blank.to_numpy().nonzero()[0][0])
        raise LocusInputError(
            f"{queries_path}: {queries.describe_row(position)}, column 'query_id': expected a "
            "non-empty id, found a blank; fill in the id or drop the line"
        )
    text = frame["query_text"]
    _check_unique_queries(ids, text, queries)
    first = ~ids.duplicated()
    absent_column = pd.Series(None, index=frame.index, dtype=object)
    reference = "reference" if "reference" in frame.columns else "answer"
    lookups = {
        column: pd.Series(
            frame.get(name, absent_column)[first].to_numpy(), index=ids[first].to_numpy()
        )
        for column, name in (
            ("query_text", "query_text"), ("task", "task"), ("reference", reference),
            ("grader", "grader"),
        )
    }  # fmt: skip
    return lookups


def _join_queries(
    rows: pd.DataFrame, table: TableData, lookups: dict[str, pd.Series], queries_path: Path
) -> pd.DataFrame:
    if "query_id" not in rows.columns:
        return rows  # ImportBatch.from_long names the missing column
    row_ids = _as_ids(rows["query_id"])
    absent = (row_ids != "") & ~row_ids.isin(lookups["query_text"].index)
    if absent.any():
        position = int(absent.to_numpy().nonzero()[0][0])
        raise LocusInputError(
            f"{table.path}: {table.describe_row(position)}, column 'query_id': query "
            f"{row_ids.iloc[position]!r} is not in the queries file {queries_path}; expected "
            f"every scored query to be listed there ({absent.sum()} rows miss theirs); add the "
            "query to the queries file or drop its score rows"
        )
    joined = rows.copy()
    for column, lookup in lookups.items():
        if lookup.isna().all():
            continue
        filled = row_ids.map(lookup)
        if column in joined.columns:
            own = joined[column]
            missing = own.isna() | (own.astype(str).str.strip() == "")
            joined[column] = own.where(~missing, filled)
        else:
            joined[column] = filled.to_numpy()
    return joined


def _check_unique_queries(ids: pd.Series, text: pd.Series, queries: TableData) -> None:
    repeated = ids.duplicated(keep=False)
    if not repeated.any():
        return
    for _, group in ids[repeated].groupby(ids[repeated], sort=False):
        texts = text.loc[group.index]
        if texts.nunique(dropna=False) > 1:
            first, second = int(group.index[0]), int(group.index[1])
            for position in group.index[1:]:
                if texts.loc[position] != texts.loc[group.index[0]]:
                    second = int(position)
                    break
            raise LocusInputError(
                f"{queries.path}: {queries.describe_row(second)}: query {ids.iloc[second]!r} "
                f"has a different text than at {queries.describe_row(first)}; expected one text "
                "per query_id; give the second query its own id"
            )


def _as_ids(values: pd.Series) -> pd.Series:
    """Ids as stripped strings; blank or missing -> ``""``."""
    text = values.astype(str).str.strip()
    return text.where(values.notna(), "")
