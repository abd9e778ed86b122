"""The EmbedLLM release (Zhuang et al. 2025): a folder of CSV files.

    train.csv, val.csv, test.csv   model_id, prompt_id, label [, category, prompt, model_name]
    model_order.csv                model_id, model_name
    question_order.csv             prompt_id, prompt [, category]

Mapping to the long table: ``llm_id`` = the model name of ``model_id`` (from
``model_order.csv``), ``query_id`` = ``prompt_id``, ``query_text`` = the prompt of ``prompt_id``
(from ``question_order.csv``), ``task`` = ``category`` (split file first, then
``question_order.csv``), ``score`` = ``label``, ``split`` = the file the row came from
(``train``, ``val``, ``test``). Each file may also be gzipped (``train.csv.gz``).

    batch = import_embedllm(Path("EmbedLLM/"))
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from locus._progress import ProgressFactory, no_progress
from locus.data.batch import ImportBatch
from locus.data.readers import TableData, check_folder, read_table
from locus.errors import LocusInputError

from ._common import places

__all__ = ["import_embedllm"]

DEFAULT_SOURCE = "embedllm"
SPLIT_FILES = ("train", "val", "test")
_SPLIT_COLUMNS = ("model_id", "prompt_id", "label", "category")


def import_embedllm(
    path: Path,
    *,
    source: str | None = None,
    namespace: str | None = None,
    progress: ProgressFactory = no_progress,
) -> ImportBatch:
    """Import the EmbedLLM release folder.

    Args:
        path: the folder holding ``model_order.csv``, ``question_order.csv`` and at least one of
            ``train.csv``, ``val.csv``, ``test.csv`` (each optionally ``.csv.gz``).
        source: scope of the query ids and provenance of the scores; default ``"embedllm"``.
        namespace: identifies the queries that come without text, with their id; default
            the source. Give per-LLM imports of one benchmark the same namespace to
            join them.
        progress: one step per file read.

    Returns:
        The validated batch, with the release's own split in ``split``.

    Raises:
        LocusInputError: a missing order file or no split file, a missing column, a
            ``model_id`` or ``prompt_id`` absent from its order file, and the checks of
            `ImportBatch.from_long`.
    """
    folder = check_folder(Path(path), "the EmbedLLM release folder")
    model_file = _required(folder, "model_order")
    question_file = _required(folder, "question_order")
    split_files = {name: _find(folder, name) for name in SPLIT_FILES}
    present = {name: file for name, file in split_files.items() if file is not None}
    if not present:
        raise LocusInputError(
            f"{folder}: no train.csv, val.csv or test.csv; expected the EmbedLLM release's score "
            "files (columns model_id, prompt_id, label); check the folder"
        )
    with progress("reading EmbedLLM release", total=2 + len(present)) as advance:
        names = _lookup(read_table(model_file), "model_id", "model_name")
        advance(1)
        questions = read_table(question_file, keep_columns=("prompt_id", "prompt", "category"))
        prompts = _lookup(questions, "prompt_id", "prompt")
        question_tasks = (
            _lookup(questions, "prompt_id", "category")
            if "category" in questions.frame.columns
            else None
        )
        advance(1)
        tables: list[TableData] = []
        parts: list[pd.DataFrame] = []
        for split, file in present.items():
            table = read_table(file, keep_columns=_SPLIT_COLUMNS)
            parts.append(
                _split_rows(table, split, names, prompts, question_tasks, model_file, question_file)
            )
            tables.append(table)
            advance(1)
    rows = pd.concat(parts, ignore_index=True)
    file_index = np.concatenate([np.full(len(p), i) for i, p in enumerate(parts)])
    row_index = np.concatenate([np.arange(len(p)) for p in parts])
    describe_row = places([t.path.name for t in tables], [t.describe_row for t in tables])(
        file_index, row_index
    )
    return ImportBatch.from_long(
        rows,
        source=source if source is not None else DEFAULT_SOURCE,
        origin=str(folder),
        describe_row=describe_row,
        namespace=namespace,
    )


def _find(folder: Path, name: str) -> Path | None:
    for candidate in (folder / f"{name}.csv", folder / f"{name}.csv.gz"):
        if candidate.is_file():
            return candidate
    return None


def _required(folder: Path, name: str) -> Path:
    found = _find(folder, name)
    if found is None:
        raise LocusInputError(
            f"{folder}: missing {name}.csv; expected the EmbedLLM release files model_order.csv, "
            f"question_order.csv and train/val/test.csv in this folder; add {name}.csv from the "
            "release"
        )
    return found


def _require(table: TableData, columns: tuple[str, ...]) -> None:
    for column in columns:
        if column not in table.frame.columns:
            raise LocusInputError(
                f"{table.path}: missing column {column!r}; expected columns "
                f"{', '.join(columns)}, found {', '.join(map(str, table.frame.columns)) or 'none'}"
                "; check that this is the EmbedLLM release file"
            )


def _lookup(table: TableData, key: str, value: str) -> pd.Series:
    """``key`` (as stripped text) -> ``value``; repeated keys must agree."""
    _require(table, (key, value))
    keys = table.frame[key].astype(str).str.strip()
    values = table.frame[value]
    repeated = keys.duplicated(keep=False)
    if repeated.any():
        clash = (
            pd.DataFrame({"k": keys[repeated], "v": values[repeated].astype(str)})
            .groupby("k", sort=False)["v"]
            .nunique()
        )
        clash = clash[clash > 1]
        if len(clash):
            bad = clash.index[0]
            positions = np.flatnonzero((keys == bad).to_numpy())
            raise LocusInputError(
                f"{table.path}: {table.describe_row(int(positions[1]))}: {key} {bad!r} is listed "
                f"again with a different {value} than at {table.describe_row(int(positions[0]))}; "
                f"expected one {value} per {key}; fix the file"
            )
    first = ~keys.duplicated()
    return pd.Series(values[first].to_numpy(), index=keys[first].to_numpy())


def _split_rows(
    table: TableData,
    split: str,
    names: pd.Series,
    prompts: pd.Series,
    question_tasks: pd.Series | None,
    model_file: Path,
    question_file: Path,
) -> pd.DataFrame:
    _require(table, ("model_id", "prompt_id", "label"))
    frame = table.frame
    model_ids = frame["model_id"].astype(str).str.strip()
    prompt_ids = frame["prompt_id"].astype(str).str.strip()
    for ids, lookup, key, order_file in (
        (model_ids, names, "model_id", model_file),
        (prompt_ids, prompts, "prompt_id", question_file),
    ):
        absent = frame[key].notna() & ~ids.isin(lookup.index)
        if absent.any():
            position = int(np.flatnonzero(absent.to_numpy())[0])
            raise LocusInputError(
                f"{table.path}: {table.describe_row(position)}, column {key!r}: {key} "
                f"{ids.iloc[position]!r} is not in {order_file.name}; expected every {key} to be "
                f"listed in {order_file.name}; use the order files of the same release"
            )
    if "category" in frame.columns:
        task = frame["category"]
    elif question_tasks is not None:
        task = prompt_ids.map(question_tasks)
    else:
        task = pd.Series(None, index=frame.index, dtype=object)
    return pd.DataFrame(
        {
            "llm_id": model_ids.map(names).where(frame["model_id"].notna()).to_numpy(object),
            "query_id": prompt_ids.where(frame["prompt_id"].notna()).to_numpy(object),
            "query_text": prompt_ids.map(prompts).to_numpy(object),
            "task": task.to_numpy(object),
            "split": np.full(len(frame), split, dtype=object),
            "score": frame["label"].to_numpy(object),
        }
    )
