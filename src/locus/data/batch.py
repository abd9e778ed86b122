"""`ImportBatch`: the validated, canonical form of one import, whatever format it came from.

Every importer ends by calling `ImportBatch.from_long(rows, ...)` on a long table with canonical
column names; the store writes a batch in one transaction. Validation happens here, once, so that
every format gets the same checks and the same error messages.

Canonical long table columns: `llm_id, query_id, score` (required) and `query_text, task, split,
cost_usd, latency_ms, reference, grader` (optional; `reference` is the query's reference answer,
`grader` how a model's answer is scored against it, `locus.data.graders`: guessed from the
reference when blank). A missing (blank) score means "not evaluated": the row is dropped,
never read as 0. A score cell is read by its own form (`parse_scores`): a number in [0, 1], a
percentage (``87%`` -> 0.87), ``true``/``false`` or ``yes``/``no`` in any case (1 / 0).

Query identity: a query with text is its normalised text, whatever source or file it came from;
a query without text is its ``query_id`` within the batch's ``namespace`` (default: the source),
so per-LLM files of one benchmark without text join when they are imported with one namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from locus._lazy import lazy_module
from locus.data.graders import row_graders
from locus.data.query_identity import normalise_text, text_hash
from locus.data.score_cells import SCORE_FORMS, ParsedScores, parse_numbers, parse_scores
from locus.errors import LocusInputError

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

__all__ = [
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "SCORE_FORMS",
    "SPLIT_NAMES",
    "ImportBatch",
    "ParsedScores",
    "parse_numbers",
    "parse_scores",
]

REQUIRED_COLUMNS = ("llm_id", "query_id", "score")
OPTIONAL_COLUMNS = (
    "query_text", "task", "split", "cost_usd", "latency_ms", "reference", "grader",
)  # fmt: skip
SPLIT_NAMES = ("train", "val", "test")

RowDescriber = Callable[[int], str]


def _default_row(position: int) -> str:
    return f"row {position + 1}"


@dataclass(frozen=True)
class ImportBatch:
    """One validated import.

    Attributes:
        source: provenance of the scores and scope of the query ids (e.g. ``"mmlu-pro"``): the
            store keeps each source's ``(query_id, text_hash)`` as an alias of its query.
        origin: the file or folder the data came from (for messages only).
        queries: one row per distinct query of the file: ``query_id, text_hash, query_text, task,
            split, reference, grader`` (the last two None where the file has no reference).
            ``text_hash`` is ``""`` for a query given without text. The same
            ``query_id`` with two different texts is two queries.
        scores: one row per observed (LLM, query): ``llm_id, query_id, text_hash, score, cost_usd,
            latency_ms`` (the last two may be NaN).
        llms: one row per LLM: ``llm_id`` plus any metadata columns.
        namespace: where the ids of queries *without text* live: two batches with one namespace
            and the same ``query_id`` (no text) score one query. ``""`` (the default of the
            constructor) means the source name.
        notes: what the importer decided for the user to hear (a column recognised by its
            name, a metric chosen, percentages read as fractions), one line each.
    """

    source: str
    origin: str
    queries: pd.DataFrame
    scores: pd.DataFrame
    llms: pd.DataFrame
    namespace: str = ""
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.namespace == "":
            object.__setattr__(self, "namespace", self.source)

    @property
    def n_scores(self) -> int:
        return len(self.scores)

    @property
    def n_queries(self) -> int:
        return len(self.queries)

    @property
    def n_llms(self) -> int:
        return len(self.llms)

    @classmethod
    def from_long(
        cls,
        rows: pd.DataFrame,
        *,
        source: str,
        origin: str,
        describe_row: RowDescriber = _default_row,
        llm_metadata: pd.DataFrame | None = None,
        namespace: str | None = None,
        notes: tuple[str, ...] = (),
    ) -> ImportBatch:
        """Validate a canonical long table and build the batch.

        Args:
            rows: one row per (LLM, query) observation, canonical column names.
            source: score provenance and scope of the query ids.
            origin: the file the rows came from, named in every error.
            describe_row: maps a 0-based row position of ``rows`` to words such as ``"line 17"``.
            llm_metadata: optional extra LLM columns, keyed by ``llm_id``.
            namespace: identifies queries without text together with their ``query_id``;
                default ``source``.
            notes: the importer's decisions, for the user (`ImportBatch.notes`).

        Raises:
            LocusInputError: an unusable source or namespace name, a missing column, an empty
                table, a non-numeric score, a score outside [0, 1], a blank id, or two different
                scores for one (LLM, query).
        """
        _check_name(source, "source", "--source mmlu-pro")
        if namespace is not None:
            _check_name(namespace, "namespace", "--namespace mmlu-pro")
        missing = [c for c in REQUIRED_COLUMNS if c not in rows.columns]
        if missing:
            raise LocusInputError(
                f"{origin}: missing column {missing[0]!r}; expected columns "
                f"{', '.join(REQUIRED_COLUMNS)} (optional: {', '.join(OPTIONAL_COLUMNS)}), "
                f"found {', '.join(map(str, rows.columns)) or 'none'}; rename the column or map it "
                f"with --column {missing[0]}=YOUR_NAME"
            )
        if len(rows) == 0:
            raise LocusInputError(
                f"{origin}: no rows; expected at least one (llm_id, query_id, score) row, found an "
                "empty table; check that this is the right file"
            )
        rows = rows.reset_index(drop=True)
        llm_ids = _id_column(rows, "llm_id", origin, describe_row)
        query_ids = _id_column(rows, "query_id", origin, describe_row)
        scores, read_as = _score_column(rows, origin, describe_row)
        cost = _optional_numeric(rows, "cost_usd", origin, describe_row)
        latency = _optional_numeric(rows, "latency_ms", origin, describe_row)
        texts, chat = _query_texts(rows, origin, describe_row)
        read_as = (*read_as, *chat)
        tasks = _optional_text(rows, "task")
        splits = _optional_text(rows, "split")
        _check_splits(splits, origin, describe_row)
        references = _optional_text(rows, "reference")
        graders = row_graders(
            _optional_text(rows, "grader"), references, texts, origin, describe_row
        )

        hashes, normalised = _hash_texts(texts)
        long = pd.DataFrame(
            {
                "llm_id": llm_ids,
                "query_id": query_ids,
                "text_hash": hashes,
                "query_text": normalised,
                "task": tasks,
                "split": splits,
                "score": scores,
                "cost_usd": cost,
                "latency_ms": latency,
                "reference": references,
                "grader": graders,
                "_position": np.arange(len(rows)),
            }
        )
        long = long[~np.isnan(long["score"].to_numpy())]
        if len(long) == 0:
            raise LocusInputError(
                f"{origin}: every score is blank; expected at least one score in [0, 1], found "
                "none (blank means 'not evaluated'); check the score column"
            )
        queries = _distinct_queries(long, origin, describe_row)
        score_rows = _distinct_scores(long, origin, describe_row)
        llms = pd.DataFrame({"llm_id": sorted(score_rows["llm_id"].unique())})
        if llm_metadata is not None and len(llm_metadata):
            llms = llms.merge(llm_metadata, on="llm_id", how="left")
        return cls(
            source=source,
            origin=origin,
            queries=queries,
            scores=score_rows,
            llms=llms,
            namespace=source if namespace is None else namespace,
            notes=(*notes, *(note for note in read_as if note not in notes)),
        )


def _hash_texts(texts: list[str | None]) -> tuple[pd.Series, pd.Series]:
    """(text_hash, normalised text) per row, each distinct text hashed once; "" / None if absent."""
    codes, uniques = pd.factorize(pd.Series(texts, dtype=object), use_na_sentinel=True)
    unique_hashes = np.array([text_hash(t) for t in uniques] + [""], dtype=object)
    unique_texts = np.array([normalise_text(t) for t in uniques] + [None], dtype=object)
    # code -1 (no text) indexes the trailing "" / None
    return (
        pd.Series(unique_hashes[codes], dtype=object),
        pd.Series(unique_texts[codes], dtype=object),
    )


def _show(value: object) -> str:
    """A cell value as the user wrote it: strings quoted, numbers plain."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value) if isinstance(value, str) else str(value)


def _check_name(name: str, what: str, example: str) -> None:
    """A source or namespace name: non-empty, one line, no surrounding whitespace."""
    if not isinstance(name, str) or not name or name.strip() != name or "\n" in name:
        raise LocusInputError(
            f"{what} name {name!r} is not usable; expected a non-empty name without surrounding "
            f"whitespace, e.g. {example}"
        )


def _id_column(
    rows: pd.DataFrame, column: str, origin: str, describe_row: RowDescriber
) -> np.ndarray:
    values = rows[column]
    as_text = values.astype(str).str.strip()
    blank = values.isna().to_numpy() | (as_text == "").to_numpy()
    if blank.any():
        position = int(np.flatnonzero(blank)[0])
        raise LocusInputError(
            f"{origin}: {describe_row(position)}, column {column!r}: expected a non-empty id, "
            f"found {_show(values.iloc[position])}; fill in the id or drop the row"
        )
    return as_text.to_numpy(dtype=object)


def _score_column(
    rows: pd.DataFrame, origin: str, describe_row: RowDescriber
) -> tuple[np.ndarray, tuple[str, ...]]:
    """The score column parsed (`parse_scores`), its first unusable cell an error naming the
    file, row and value; the notes say which forms were read."""
    raw = rows["score"]
    parsed = parse_scores(raw)
    if parsed.unparsable.any():
        position = int(np.flatnonzero(parsed.unparsable)[0])
        raise LocusInputError(
            f"{origin}: {describe_row(position)}, column 'score': expected {SCORE_FORMS}, found "
            f"{_show(raw.iloc[position])}; fix the value or leave it blank for 'not evaluated'"
        )
    if parsed.outside.any():
        position = int(np.flatnonzero(parsed.outside)[0])
        if parsed.percent[position]:
            expected = "a percentage in [0%, 100%]"
            hint = "fix the value or leave it blank for 'not evaluated'"
        else:
            expected = "a number in [0, 1]"
            hint = (
                "scores are fractions correct: rescale percentages to [0, 1] (or write them "
                "with a % sign), map failures to 0 or leave them blank"
            )
        raise LocusInputError(
            f"{origin}: {describe_row(position)}, column 'score': expected {expected}, found "
            f"{_show(raw.iloc[position])}; {hint}"
        )
    return parsed.values, parsed.notes


def _numeric_column(
    rows: pd.DataFrame,
    column: str,
    origin: str,
    describe_row: RowDescriber,
    *,
    low: float | None,
    high: float | None,
) -> np.ndarray:
    """Parse a numeric column; blank cells become NaN, anything else unparsable is an error."""
    raw = rows[column]
    parsed, bad, outside = parse_numbers(raw, low=low, high=high)
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise LocusInputError(
            f"{origin}: {describe_row(position)}, column {column!r}: expected a number, found "
            f"{_show(raw.iloc[position])}; fix the value or leave it blank for 'not evaluated'"
        )
    if outside.any():
        position = int(np.flatnonzero(outside)[0])
        bounds = f"in [{low:g}, {high:g}]" if high is not None else f">= {low:g}"
        raise LocusInputError(
            f"{origin}: {describe_row(position)}, column {column!r}: expected a number {bounds}, "
            f"found {_show(raw.iloc[position])}; fix the value or leave it blank"
        )
    return parsed


def _optional_numeric(
    rows: pd.DataFrame, column: str, origin: str, describe_row: RowDescriber
) -> np.ndarray:
    if column not in rows.columns:
        return np.full(len(rows), np.nan)
    return _numeric_column(rows, column, origin, describe_row, low=0.0, high=None)


def _query_texts(
    rows: pd.DataFrame, origin: str, describe_row: RowDescriber
) -> tuple[list[str | None], tuple[str, ...]]:
    """The query text column, and a note where cells held chat messages: a list of
    {role, content} messages is read as its last user message's text (said in the note); any
    other list is an error naming the row (a Parquet or JSONL list column would otherwise be
    stored as its Python repr)."""
    if "query_text" not in rows.columns:
        return [None] * len(rows), ()
    values = rows["query_text"].tolist()
    chats = 0
    for position, value in enumerate(values):
        if not isinstance(value, (list, tuple, np.ndarray)):
            continue
        text = _last_user_text(value)
        if text is None:
            shown = repr(list(value))
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise LocusInputError(
                f"{origin}: {describe_row(position)}, column 'query_text': expected text, found "
                f"a list {shown}; give each query's text as a string (or a list of chat "
                "messages {role, content}, whose last user message is read)"
            )
        values[position] = text
        chats += 1
    note = (
        (f"query_text: {chats:,} chat message lists read as their last user message's text",)
        if chats
        else ()
    )
    return _optional_text(rows.assign(query_text=values), "query_text"), note


def _last_user_text(messages: Any) -> str | None:
    """The text of the last {"role": "user", "content": ...} message of `messages` (content a
    string, or a list of parts whose "text" parts are joined); None where it holds none."""
    for message in reversed(list(messages)):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, (list, tuple, np.ndarray)):
            parts = [
                str(part.get("text"))
                for part in content
                if isinstance(part, dict) and part.get("type") == "text" and part.get("text")
            ]
            return "\n".join(parts) if parts else None
    return None


def _optional_text(rows: pd.DataFrame, column: str) -> list[str | None]:
    if column not in rows.columns:
        return [None] * len(rows)
    out: list[str | None] = []
    for value in rows[column].tolist():
        if value is None or (isinstance(value, float) and np.isnan(value)):
            out.append(None)
        else:
            text = str(value)
            out.append(text if text.strip() else None)
    return out


def _check_splits(splits: list[str | None], origin: str, describe_row: RowDescriber) -> None:
    for position, split in enumerate(splits):
        if split is not None and split not in SPLIT_NAMES:
            raise LocusInputError(
                f"{origin}: {describe_row(position)}, column 'split': expected one of "
                f"{', '.join(SPLIT_NAMES)} or blank, found {split!r}; rename the split or drop "
                "the column to let locus assign splits"
            )


def _distinct_queries(long: pd.DataFrame, origin: str, describe_row: RowDescriber) -> pd.DataFrame:
    columns = ["query_id", "text_hash", "query_text", "task", "split"]
    queries = long[[*columns, "_position"]].drop_duplicates(subset=columns)
    # a query's reference (and grader): the first given for it (GroupBy.first skips nulls)
    given = long[["query_id", "text_hash", "reference", "grader"]].dropna(subset=["reference"])
    answers = given.groupby(["query_id", "text_hash"], sort=False).first()
    clash = queries.duplicated(subset=["query_id", "text_hash"], keep=False)
    if clash.any():
        first = queries[clash].sort_values("_position")
        key = first.iloc[0]
        same = first[
            (first["query_id"] == key["query_id"]) & (first["text_hash"] == key["text_hash"])
        ]
        for field in ("task", "split"):
            values = same[field].tolist()
            if len({v for v in values}) > 1:
                raise LocusInputError(
                    f"{origin}: {describe_row(int(same.iloc[1]['_position']))}: query "
                    f"{key['query_id']!r} has {field} {values[1]!r} here but {values[0]!r} at "
                    f"{describe_row(int(same.iloc[0]['_position']))}; expected one {field} per "
                    "query; make them agree"
                )
    queries = queries.drop(columns="_position").join(answers, on=["query_id", "text_hash"])
    return queries.astype({"reference": object, "grader": object}).reset_index(drop=True)


def _shortened(text: str, limit: int = 60) -> str:
    """`text` on one line, cut to `limit` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _distinct_scores(long: pd.DataFrame, origin: str, describe_row: RowDescriber) -> pd.DataFrame:
    key = ["llm_id", "query_id", "text_hash"]
    columns = [*key, "score", "cost_usd", "latency_ms"]
    duplicated = long.duplicated(subset=key, keep=False)
    if duplicated.any():
        dupes = long[duplicated]
        differing = dupes.groupby(key, sort=False)["score"].transform("nunique") > 1
        if differing.any():
            bad = dupes[differing].sort_values("_position")
            first = bad.iloc[0]
            second = bad[
                (bad["llm_id"] == first["llm_id"])
                & (bad["query_id"] == first["query_id"])
                & (bad["text_hash"] == first["text_hash"])
            ].iloc[1]
            text = first.get("query_text")
            named = f"query {first['query_id']!r}"
            if isinstance(text, str) and text:
                named = f"query {_shortened(text)!r}"  # an id made from the text says nothing
            raise LocusInputError(
                f"{origin}: {describe_row(int(second['_position']))}: LLM {first['llm_id']!r} on "
                f"{named} scores {second['score']:g} here but "
                f"{first['score']:g} at {describe_row(int(first['_position']))}; expected one "
                "score per (LLM, query); keep one row, or average repeats before importing"
            )
    return long.drop_duplicates(subset=key)[columns].reset_index(drop=True)
