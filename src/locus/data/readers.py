"""Reading tables and JSON documents from disk, with one-line errors that name the file.

Every importer reads its files through this module, so that a missing path, a folder given for a
file, an empty or truncated file, malformed JSON or CSV, gzip damage and non-UTF-8 bytes all become
a `LocusInputError` naming the file, never a raw pandas, json, gzip or OS exception.

Supported table files (detected by suffix): ``.csv``, ``.csv.gz``, ``.tsv``, ``.tsv.gz``,
``.parquet``, ``.jsonl``, ``.jsonl.gz``, ``.json`` and ``.json.gz`` (a list of objects).

    table = read_table(Path("scores.csv.gz"))
    table.frame            # DataFrame, one row per data row of the file, columns as in the file
    table.describe_row(0)  # "line 2": the header is line 1
"""

from __future__ import annotations

import csv
import json
import zlib
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from locus.data.files import (
    check_file,
    check_folder,
    input_error,
    load_json,
    one_line,
    open_binary,
    open_text,
    parse_json,
    reading,
)
from locus.errors import LocusInputError

__all__ = [
    "JSON_SUFFIXES",
    "TABLE_SUFFIXES",
    "TableData",
    "check_file",
    "check_folder",
    "file_stem",
    "input_error",
    "iter_table",
    "load_json",
    "parse_json",
    "read_table",
    "reading",
    "table_suffix",
]

TABLE_SUFFIXES = (
    ".csv",
    ".csv.gz",
    ".tsv",
    ".tsv.gz",
    ".parquet",
    ".jsonl",
    ".jsonl.gz",
    ".json",
    ".json.gz",
)
JSON_SUFFIXES = (".json", ".json.gz")

RowDescriber = Callable[[int], str]


@dataclass(frozen=True)
class TableData:
    """One table file, read.

    Attributes:
        path: the file.
        frame: one row per data row or record of the file; columns named as in the file. CSV and
            TSV cells are strings (blank cells are NaN), so ids such as ``007`` keep their zeros.
        describe_row: maps a 0-based row position of ``frame`` to its place in the file:
            ``"line 17"`` for CSV/TSV/JSONL (the CSV header is line 1), ``"record 5"`` for a JSON
            list, ``"row 5"`` for Parquet.
        notes: what reading decided that the user should hear (a delimiter other than the
            suffix's, found in the header).
    """

    path: Path
    frame: pd.DataFrame
    describe_row: RowDescriber
    notes: tuple[str, ...] = ()


def table_suffix(path: Path) -> str | None:
    """The supported table suffix that ``path`` ends with (longest match), or None."""
    name = path.name.lower()
    matches = [suffix for suffix in TABLE_SUFFIXES if name.endswith(suffix)]
    return max(matches, key=len) if matches else None


def file_stem(path: Path) -> str:
    """The file name without its data suffixes: ``scores.csv.gz`` -> ``scores``."""
    name = path.name
    lowered = name.lower()
    for suffix in sorted((*TABLE_SUFFIXES, ".zip", ".gz"), key=len, reverse=True):
        if lowered.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return path.stem or name


def read_table(path: Path, *, keep_columns: Collection[str] | None = None) -> TableData:
    """Read one table file (format from its suffix).

    Args:
        path: a ``.csv``, ``.csv.gz``, ``.tsv``, ``.tsv.gz``, ``.parquet``, ``.jsonl``,
            ``.jsonl.gz``, ``.json`` or ``.json.gz`` file.
        keep_columns: read only these columns (those that exist); None reads all. Saves memory
            on wide or huge files.

    Returns:
        The frame (one row per data row, file column names) and a row describer.

    Raises:
        LocusInputError: unknown suffix, missing path, a folder, empty, truncated or malformed
            file, non-UTF-8 text.
    """
    path = Path(path)
    suffix = table_suffix(path)
    if path.is_dir():
        raise input_error(
            path, IsADirectoryError(path), expected=f"a table file ({', '.join(TABLE_SUFFIXES)})"
        )
    if suffix is None:
        raise LocusInputError(
            f"{path}: unknown table format (suffix {''.join(path.suffixes) or 'none'!r}); "
            f"expected one of {', '.join(TABLE_SUFFIXES)}; rename the file or convert it"
        )
    kind = suffix.removesuffix(".gz").lstrip(".")
    expected = {
        "csv": "a CSV table",
        "tsv": "a tab-separated table",
        "parquet": "a Parquet table",
        "jsonl": "a JSON-lines file (one object per line)",
        "json": "a JSON list of objects",
    }[kind]
    check_file(path, expected)
    if kind in ("csv", "tsv"):
        default = "\t" if kind == "tsv" else ","
        return _read_delimited(path, _sniff_delimiter(path, default), keep_columns, expected)
    if kind == "parquet":
        return _read_parquet(path, keep_columns, expected)
    if kind == "jsonl":
        return _read_jsonl(path, keep_columns, expected)
    return _read_json_list(path, keep_columns, expected)


def iter_table(path: Path, chunk_rows: int) -> Iterator[TableData]:
    """`read_table` in chunks of at most `chunk_rows` rows, so that a file of any size is read in
    bounded memory: Parquet by record batches, CSV/TSV by pandas chunks; other formats (JSON
    lines and lists) as one chunk. Each chunk's `describe_row` names the row's place in the
    whole file; the first chunk carries the reading notes. Errors as `read_table`'s."""
    path = Path(path)
    kind = (table_suffix(path) or "").removesuffix(".gz").lstrip(".")
    if kind not in ("csv", "tsv", "parquet") or path.is_dir():
        yield read_table(path)
        return
    if kind == "parquet":
        yield from _parquet_chunks(path, chunk_rows)
        return
    head = read_table_head(path)
    sep = _sniff_delimiter(path, "\t" if kind == "tsv" else ",")
    lines = _CsvLines(path, sep)
    expected = "a tab-separated table" if kind == "tsv" else "a CSV table"
    start = 0
    with reading(path, expected):
        reader = pd.read_csv(
            path, sep=sep, dtype=str, keep_default_na=False, na_values=[""], encoding="utf-8",
            compression="infer", chunksize=chunk_rows,
        )  # fmt: skip
        with reader:
            for number, frame in enumerate(reader):
                frame = frame.reset_index(drop=True)
                yield TableData(
                    path, frame, _shifted(lines, start), head.notes if number == 0 else ()
                )
                start += len(frame)


def read_table_head(path: Path) -> TableData:
    """The header and first rows of a CSV/TSV file (its columns and delimiter notes)."""
    kind = (table_suffix(path) or "").removesuffix(".gz").lstrip(".")
    default = "\t" if kind == "tsv" else ","
    expected = "a tab-separated table" if kind == "tsv" else "a CSV table"
    check_file(path, expected)
    sep = _sniff_delimiter(path, default)
    with reading(path, expected):
        frame = pd.read_csv(
            path, sep=sep, dtype=str, keep_default_na=False, na_values=[""], encoding="utf-8",
            compression="infer", nrows=5,
        )  # fmt: skip
    notes = () if sep == default else (f"read as {_DELIMITERS[sep]}-separated (from its header)",)
    return TableData(path, frame, _CsvLines(path, sep), notes)


def _shifted(describe: RowDescriber, offset: int) -> RowDescriber:
    """A chunk's row describer: its row `position` is the file's row `offset + position`."""

    def described(position: int) -> str:
        return describe(offset + position)

    return described


def _parquet_row(position: int) -> str:
    return f"row {position + 1}"


def _parquet_chunks(path: Path, chunk_rows: int) -> Iterator[TableData]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    expected = "a Parquet table"
    check_file(path, expected)
    start = 0
    try:
        with reading(path, expected):
            batches = pq.ParquetFile(path).iter_batches(batch_size=chunk_rows)
            for batch in batches:
                frame = batch.to_pandas()
                yield TableData(path, frame, _shifted(_parquet_row, start))
                start += len(frame)
    except pa.ArrowException as exc:
        raise LocusInputError(
            f"{path}: not a readable Parquet file ({one_line(exc)}); expected {expected}; "
            "write the file again"
        ) from exc
    if start == 0:  # no rows: read whole, for the same message as read_table's
        yield read_table(path)


_DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}


def _sniff_delimiter(path: Path, default: str) -> str:
    """The delimiter of a CSV/TSV file's header line: the suffix's own where the header holds
    it, else the one of `_DELIMITERS` it holds most of (a European ``;`` CSV, a ``.csv`` that
    is tab-separated); the default where the header is unreadable or holds none."""
    try:
        with open_text(path) as text:
            header = next((line for line in text if line.strip()), "")
    except (OSError, UnicodeDecodeError, EOFError, zlib.error):
        return default
    if default in header:
        return default
    counts = {sep: header.count(sep) for sep in _DELIMITERS}
    best = max(counts, key=lambda sep: counts[sep])
    return best if counts[best] else default


def _read_delimited(
    path: Path, sep: str, keep_columns: Collection[str] | None, expected: str
) -> TableData:
    usecols = None if keep_columns is None else (lambda name: name in set(keep_columns))
    with reading(path, expected):
        frame = pd.read_csv(
            path,
            sep=sep,
            dtype=str,
            keep_default_na=False,
            na_values=[""],
            usecols=usecols,
            encoding="utf-8",
            compression="infer",
        )
    default = "\t" if (table_suffix(path) or "").startswith(".tsv") else ","
    notes = () if sep == default else (f"read as {_DELIMITERS[sep]}-separated (from its header)",)
    return TableData(path, frame, _CsvLines(path, sep), notes)


class _CsvLines:
    """Row position -> ``"line N"``, exact even when quoted cells span several lines.

    Computed on first use only (that is, when an error is reported), by re-reading the file.
    """

    def __init__(self, path: Path, sep: str) -> None:
        self._path = path
        self._sep = sep
        self._starts: list[int] | None = None

    def __call__(self, position: int) -> str:
        if self._starts is None:
            self._starts = self._record_starts()
        index = position + 1  # record 0 is the header
        if 0 <= index < len(self._starts):
            return f"line {self._starts[index]}"
        return f"data row {position + 1}"

    def _record_starts(self) -> list[int]:
        starts: list[int] = []
        try:
            with open_text(self._path) as text:
                reader = csv.reader(text, delimiter=self._sep)
                previous = 0
                for record in reader:
                    if record and any(cell.strip() for cell in record):
                        starts.append(previous + 1)
                    previous = reader.line_num
        except (OSError, UnicodeDecodeError, EOFError, zlib.error, csv.Error):
            return starts
        return starts


def _read_parquet(path: Path, keep_columns: Collection[str] | None, expected: str) -> TableData:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with reading(path, expected):
            schema_names = pq.read_schema(path).names
            columns = (
                None
                if keep_columns is None
                else [name for name in schema_names if name in set(keep_columns)]
            )
            frame = pd.read_parquet(path, columns=columns)
    except pa.ArrowException as exc:
        raise LocusInputError(
            f"{path}: not a readable Parquet file ({one_line(exc)}); expected {expected}; "
            "write the file again"
        ) from exc
    return TableData(path, frame, lambda position: f"row {position + 1}")


def _read_jsonl(path: Path, keep_columns: Collection[str] | None, expected: str) -> TableData:
    keep = None if keep_columns is None else set(keep_columns)
    records: list[dict[str, object]] = []
    line_numbers: list[int] = []
    with reading(path, expected), open_binary(path) as handle:
        for number, raw_line in enumerate(handle, start=1):
            try:
                line = raw_line.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise LocusInputError(
                    f"{path}: line {number}: not UTF-8 text (byte "
                    f"0x{raw_line[exc.start : exc.start + 1].hex()} at column {exc.start + 1}); "
                    f"expected {expected} in UTF-8; re-save the file as UTF-8"
                ) from exc
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LocusInputError(
                    f"{path}: line {number}, column {exc.colno}: malformed JSON ({exc.msg}); "
                    f"expected {expected}; fix or remove the line"
                ) from exc
            if not isinstance(record, dict):
                raise LocusInputError(
                    f"{path}: line {number}: expected a JSON object, found "
                    f"{type(record).__name__}; write one object per line"
                )
            if keep is not None:
                record = {key: value for key, value in record.items() if key in keep}
            records.append(record)
            line_numbers.append(number)
    if not records:
        raise LocusInputError(
            f"{path}: empty file; expected {expected}; check that this is the right file"
        )
    frame = pd.DataFrame.from_records(records)
    return TableData(path, frame, lambda position: f"line {line_numbers[position]}")


def _read_json_list(path: Path, keep_columns: Collection[str] | None, expected: str) -> TableData:
    document = load_json(path, expected)
    if not isinstance(document, list):
        raise LocusInputError(
            f"{path}: expected {expected}, found a JSON {type(document).__name__}; write the "
            "records as a list [{...}, {...}]"
        )
    keep = None if keep_columns is None else set(keep_columns)
    records: list[dict[str, object]] = []
    for number, record in enumerate(document, start=1):
        if not isinstance(record, dict):
            raise LocusInputError(
                f"{path}: record {number}: expected a JSON object, found "
                f"{type(record).__name__}; every list item must be an object"
            )
        if keep is not None:
            record = {key: value for key, value in record.items() if key in keep}
        records.append(record)
    if not records:
        raise LocusInputError(
            f"{path}: empty list; expected {expected}; check that this is the right file"
        )
    frame = pd.DataFrame.from_records(records)
    return TableData(path, frame, lambda position: f"record {position + 1}")
