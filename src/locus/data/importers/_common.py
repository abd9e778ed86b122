"""Helpers shared by the importers: input file lists, row places across files, repeated rows."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from locus.data.batch import ImportBatch
from locus.data.query_identity import normalise_text
from locus.data.readers import check_file, check_folder
from locus.data.score_cells import parse_numbers, parse_scores
from locus.errors import LocusInputError

__all__ = [
    "RepeatPolicy",
    "batch_of_samples",
    "input_files",
    "merge_repeats",
    "per_task_note",
    "places",
    "unwrap_list_text",
]

logger = logging.getLogger("locus.data.importers")

RepeatPolicy = Literal["mean", "error"]
RowDescriber = Callable[[int], str]


def input_files(path: Path, suffixes: Sequence[str], expected: str) -> list[Path]:
    """The files an importer reads: ``path`` itself, or the matching files of a folder, sorted.

    Args:
        path: a file or a folder.
        suffixes: lower-case name endings that count (e.g. ``(".zip", ".json")``); other files of
            a folder (READMEs, checksums) are ignored.
        expected: words for errors, e.g. ``"MMLU-Pro result files (.zip or .json)"``.
    """
    path = Path(path)
    if path.is_dir():
        found = sorted(
            child
            for child in check_folder(path, expected).iterdir()
            if child.is_file()
            and not child.name.startswith(".")
            and child.name.lower().endswith(tuple(suffixes))
        )
        if not found:
            raise LocusInputError(
                f"{path}: no {' or '.join(suffixes)} files in this folder; expected {expected}; "
                "check the folder"
            )
        return found
    check_file(path, expected)
    if not path.name.lower().endswith(tuple(suffixes)):
        raise LocusInputError(
            f"{path}: unsupported file type; expected {expected} (a name ending in "
            f"{', '.join(suffixes)}) or a folder of them; rename or convert the file"
        )
    return [path]


def places(
    labels: Sequence[str], describers: Sequence[RowDescriber]
) -> Callable[[np.ndarray, np.ndarray], RowDescriber]:
    """Build a describer for rows gathered from several files.

    Returns a function ``(file_index, row_index) -> describe_row`` where ``file_index[p]`` and
    ``row_index[p]`` give, for row position ``p`` of the combined table, which file it came from
    and its row position there; ``describe_row(p)`` then reads ``"<file>: line 17"``.
    """

    def bind(file_index: np.ndarray, row_index: np.ndarray) -> RowDescriber:
        def describe(position: int) -> str:
            which = int(file_index[position])
            return f"{labels[which]}: {describers[which](int(row_index[position]))}"

        return describe

    return bind


def merge_repeats(
    rows: pd.DataFrame, describe_row: RowDescriber, how: RepeatPolicy, origin: str
) -> tuple[pd.DataFrame, RowDescriber]:
    """Average repeated (LLM, query) rows and give each repeated query its first task.

    A query is its text, so the same text listed twice (within a file, or in two files of one
    folder) is one query: its rows are merged here instead of failing validation. Scores and
    costs are averaged; the first occurrence names the place in messages.

    Args:
        rows: canonical long table (``llm_id, query_id, score`` and optional columns).
        describe_row: the describer of ``rows``.
        how: ``"mean"`` merges as above; ``"error"`` leaves the rows alone, so that differing
            repeats fail validation with both places named.
        origin: for log messages.

    Returns:
        The merged rows and the describer of their positions.
    """
    if how == "error" or len(rows) == 0:
        return rows, describe_row
    if how != "mean":
        raise LocusInputError(f"repeats={how!r} is not an option; expected 'mean' or 'error'")
    work = rows.reset_index(drop=True).copy()
    work["_position"] = np.arange(len(work))
    text = work["query_text"] if "query_text" in work.columns else pd.Series("", index=work.index)
    work["_text"] = [normalise_text(t) if isinstance(t, str) else "" for t in text]
    query_key = ["query_id", "_text"]
    if "task" in work.columns:
        first_task = work.groupby(query_key, sort=False, dropna=False)["task"].transform("first")
        changed = int((first_task.fillna("") != work["task"].fillna("")).sum())
        if changed:
            logger.warning(
                "%s: %d rows repeat a query listed earlier under another task; kept the first task",
                origin,
                changed,
            )
        work["task"] = first_task
    key = ["llm_id", *query_key]
    repeated = work.duplicated(subset=key, keep=False)
    if not repeated.any():
        # positions are unchanged, so the describer still fits
        return work.drop(columns=["_position", "_text"]), describe_row
    numeric = [c for c in ("score", "cost_usd", "latency_ms") if c in work.columns]
    for column in numeric:
        parsed = _clean_numbers(work[column], score=column == "score")
        if parsed is None:
            # leave bad values for validation to report, with their place in the file
            return rows, describe_row
        work[column] = parsed
    aggregations: dict[str, str] = {c: "mean" for c in numeric}
    aggregations.update({c: "first" for c in work.columns if c not in numeric and c not in key})
    differing = work[repeated].groupby(key, sort=False)["score"].nunique(dropna=True)
    merged = (
        work.groupby(key, sort=False, dropna=False)
        .agg(aggregations)
        .reset_index()
        .sort_values("_position", kind="stable")
        .reset_index(drop=True)
    )
    n_differing = int((differing > 1).sum())
    logger.warning(
        "%s: %d (LLM, query) pairs appear more than once (%d with different scores); "
        "averaged their scores",
        origin,
        int(work[repeated].drop_duplicates(subset=key).shape[0]),
        n_differing,
    )
    where = merged["_position"].to_numpy()
    merged = merged.drop(columns=["_position", "_text"])

    def describe(position: int) -> str:
        return describe_row(int(where[position]))

    return merged, describe


def _clean_numbers(values: pd.Series, *, score: bool) -> pd.Series | None:
    """Parse to float (blank -> NaN; a score by `parse_scores`); None if any value is
    unparsable, negative or (a score) above 1."""
    if score:
        parsed, bad, outside, _, _ = parse_scores(values)
    else:
        parsed, bad, outside = parse_numbers(values, low=0.0, high=None)
    if bad.any() or outside.any():
        return None
    return pd.Series(parsed, index=values.index)


def unwrap_list_text(text: str) -> str:
    """``"['a prompt']"`` -> ``"a prompt"``; ``"['turn 1', 'turn 2']"`` -> the turns joined by a
    line break; any other text is returned unchanged.

    Uses `ast.literal_eval` (never `eval`): only Python literals are parsed.
    """
    import ast

    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")):
        return text
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    return text


def batch_of_samples(
    rows: list[dict[str, object]],
    *,
    source: str,
    origin: str,
    namespace: str | None,
    notes: Sequence[str],
    average: bool = False,
) -> ImportBatch:
    """The batch of an evaluation tool's samples: `rows` of llm_id, query_id, query_text, task,
    score (optionally reference) and `_place` (where in the tool's files the row came from,
    for errors); with `average`, one row per (llm_id, query_id), its scores averaged (epochs,
    trials)."""
    frame = pd.DataFrame(rows)
    if average:
        others = [c for c in frame.columns if c not in ("llm_id", "query_id", "score")]
        frame = frame.groupby(["llm_id", "query_id"], sort=False, as_index=False).agg(
            {"score": "mean", **dict.fromkeys(others, "first")}
        )
    where = frame["_place"].astype(str).tolist()
    return ImportBatch.from_long(
        frame[[c for c in frame.columns if not str(c).startswith("_")]],
        source=source,
        origin=origin,
        describe_row=lambda i: where[i],
        namespace=namespace,
        notes=tuple(notes),
    )


def per_task_note(what: str, chosen: dict[str, str]) -> str:
    """'<what> per task: task metric, ...' (the metric or scorer an importer chose)."""
    return f"{what} per task: {', '.join(f'{t} {m}' for t, m in sorted(chosen.items()))}"
