"""RouterBench-style wide tables: one row per query, one score column per LLM.

    sample_id, eval_name, prompt, <llm>..., <llm>|total_cost...

Mapping to the long table, one row per (query, LLM) cell with a score:

- ``query_id`` = ``sample_id``; ``task`` = ``eval_name``;
- ``query_text`` = ``prompt``; a prompt stored as the repr of a Python list
  (``"['Write a python function...']"``) is unwrapped with `ast.literal_eval`, a multi-element
  list joined with line breaks;
- ``llm_id`` = the score column's name, ``score`` = its cell, ``cost_usd`` = the cell of
  ``<llm>|total_cost``.

Score columns are the columns that have a matching ``<llm>|total_cost`` column; in a table
without cost columns, every numeric column other than the id, task and prompt columns. A blank
score cell is "not evaluated".

    batch = import_routerbench(Path("routerbench_zs/"))    # every table file of the folder
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from locus._progress import ProgressFactory, no_progress
from locus.data.batch import ImportBatch
from locus.data.readers import TableData, read_table
from locus.errors import LocusInputError

from ._common import input_files, unwrap_list_text

__all__ = ["import_routerbench"]

DEFAULT_SOURCE = "routerbench"
COST_SUFFIX = "|total_cost"
TABLE_FILES = (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".parquet")
_EXPECTED = "a RouterBench-style wide table (.csv, .csv.gz, .tsv or .parquet)"


def import_routerbench(
    path: Path,
    *,
    source: str | None = None,
    namespace: str | None = None,
    progress: ProgressFactory = no_progress,
    id_column: str = "sample_id",
    task_column: str = "eval_name",
    prompt_column: str = "prompt",
) -> ImportBatch:
    """Import one RouterBench-style wide table, or every table file of a folder.

    All files of a folder share one query namespace (``sample_id``), so the train and test
    files of one benchmark can be imported together.

    Args:
        path: a ``.csv``, ``.csv.gz``, ``.tsv``, ``.tsv.gz`` or ``.parquet`` file, or a folder
            of them.
        source: scope of the query ids and provenance of the scores; default ``"routerbench"``.
        namespace: identifies the queries that come without text, with their id; default
            the source. Give per-LLM imports of one benchmark the same namespace to
            join them.
        progress: one step per file.
        id_column: the query id column.
        task_column: the task column (optional in the file).
        prompt_column: the query text column (optional in the file).

    Returns:
        The validated batch, with ``cost_usd`` where the table has cost columns.

    Raises:
        LocusInputError: no id column, no score columns, unreadable files, and the checks of
            `ImportBatch.from_long` (a non-numeric or out-of-range score names its file, line and
            LLM column).
    """
    files = input_files(Path(path), TABLE_FILES, _EXPECTED)
    tables: list[TableData] = []
    parts: list[pd.DataFrame] = []
    llm_columns: list[list[str]] = []
    with progress("reading RouterBench tables", total=len(files)) as advance:
        for file in files:
            table = read_table(file)
            rows, llms = _long_rows(table, id_column, task_column, prompt_column)
            tables.append(table)
            parts.append(rows)
            llm_columns.append(llms)
            advance(1)
    rows = pd.concat(parts, ignore_index=True)
    file_index = np.concatenate([np.full(len(p), i) for i, p in enumerate(parts)])
    cell_index = np.concatenate([np.arange(len(p)) for p in parts])

    def describe_row(position: int) -> str:
        table = tables[int(file_index[position])]
        llm_row, row = divmod(int(cell_index[position]), len(table.frame))
        llm = llm_columns[int(file_index[position])][llm_row]
        return f"{table.path.name}: {table.describe_row(row)}, LLM column {llm!r}"

    return ImportBatch.from_long(
        rows,
        source=source if source is not None else DEFAULT_SOURCE,
        origin=str(path),
        describe_row=describe_row,
        namespace=namespace,
    )


def _score_columns(frame: pd.DataFrame, reserved: set[str], path: Path) -> list[str]:
    names = [str(c) for c in frame.columns]
    costed = [
        name
        for name in names
        if name not in reserved and "|" not in name and f"{name}{COST_SUFFIX}" in names
    ]
    if costed:
        return costed
    numeric = [
        name
        for name in names
        if name not in reserved and "|" not in name and _is_numeric(frame[name])
    ]
    if not numeric:
        raise LocusInputError(
            f"{path}: no LLM score columns; expected one numeric column per LLM (and optionally "
            f"'<llm>{COST_SUFFIX}' cost columns), found columns {', '.join(names)}; check the "
            "file, or use the 'table' format for a long table"
        )
    return numeric


def _is_numeric(values: pd.Series) -> bool:
    if pd.api.types.is_bool_dtype(values) or pd.api.types.is_numeric_dtype(values):
        return bool(values.notna().any())
    present = values.dropna()
    present = present[present.astype(str).str.strip() != ""]
    if len(present) == 0:
        return False
    return bool(pd.to_numeric(present, errors="coerce").notna().all())


def _long_rows(
    table: TableData, id_column: str, task_column: str, prompt_column: str
) -> tuple[pd.DataFrame, list[str]]:
    """The (n_rows * n_llms) long rows, LLM-major (cell ``k`` is row ``k % n_rows`` of LLM
    column ``k // n_rows``), and the LLM column names."""
    frame = table.frame
    if len(frame) == 0:
        raise LocusInputError(
            f"{table.path}: no data rows; expected one row per query under the header; check "
            "that this is the right file"
        )
    if id_column not in frame.columns:
        raise LocusInputError(
            f"{table.path}: missing column {id_column!r}; expected a query id column, found "
            f"{', '.join(map(str, frame.columns))}; rename the id column or pass "
            "id_column=NAME"
        )
    reserved = {id_column, task_column, prompt_column}
    llms = _score_columns(frame, reserved, table.path)
    n_rows, n_llms = len(frame), len(llms)
    if prompt_column in frame.columns:
        cache: dict[str, str] = {}
        texts = np.array(
            [
                cache.setdefault(p, unwrap_list_text(p)) if isinstance(p, str) else None
                for p in frame[prompt_column].tolist()
            ],
            dtype=object,
        )
    else:
        texts = np.full(n_rows, None, dtype=object)
    task = (
        frame[task_column].to_numpy(object)
        if task_column in frame.columns
        else np.full(n_rows, None, dtype=object)
    )
    costs = [
        frame[f"{llm}{COST_SUFFIX}"].to_numpy(object)
        if f"{llm}{COST_SUFFIX}" in frame.columns
        else np.full(n_rows, np.nan, dtype=object)
        for llm in llms
    ]
    long = pd.DataFrame(
        {
            "llm_id": np.repeat(np.array(llms, dtype=object), n_rows),
            "query_id": np.tile(frame[id_column].to_numpy(object), n_llms),
            "query_text": np.tile(texts, n_llms),
            "task": np.tile(task, n_llms),
            "score": np.concatenate([frame[llm].to_numpy(object) for llm in llms]),
            "cost_usd": np.concatenate(costs),
        }
    )
    return long, llms
