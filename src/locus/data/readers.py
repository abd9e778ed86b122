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
import gzip
import io
import json
import zlib
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import pandas as pd

from locus.errors import LocusError, LocusInputError

__all__ = [
    "JSON_SUFFIXES",
    "TABLE_SUFFIXES",
    "TableData",
    "check_file",
    "check_folder",
    "file_stem",
    "input_error",
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

_MESSAGE_LIMIT = 160


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
    """

    path: Path
    frame: pd.DataFrame
    describe_row: RowDescriber


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


def _one_line(text: object) -> str:
    words = " ".join(str(text).split())
    return words if len(words) <= _MESSAGE_LIMIT else words[: _MESSAGE_LIMIT - 3] + "..."


def input_error(path: Path, exc: BaseException, *, expected: str) -> LocusInputError:
    """Translate an exception raised while reading ``path`` into a one-line `LocusInputError`.

    Args:
        path: the file or folder being read.
        exc: what the reader raised.
        expected: what the file should have been, e.g. ``"a CSV table"``.
    """
    import zipfile  # only here: the zip format matters to few callers

    if isinstance(exc, FileNotFoundError):
        return LocusInputError(
            f"{path}: no such file or folder; expected {expected}; check the path"
        )
    if isinstance(exc, IsADirectoryError):
        return LocusInputError(f"{path}: is a folder; expected {expected}; pass the file itself")
    if isinstance(exc, NotADirectoryError):
        return LocusInputError(
            f"{path}: is not a folder; expected {expected}; pass the folder that holds the files"
        )
    if isinstance(exc, PermissionError):
        return LocusInputError(
            f"{path}: cannot be read (permission denied); expected {expected}; "
            "fix the file permissions"
        )
    if isinstance(exc, UnicodeDecodeError):
        byte = exc.object[exc.start : exc.start + 1].hex() if exc.object else "?"
        return LocusInputError(
            f"{path}: not UTF-8 text (byte 0x{byte} at offset {exc.start}); expected {expected} "
            "in UTF-8; re-save the file as UTF-8"
        )
    if isinstance(exc, zipfile.BadZipFile):
        return LocusInputError(
            f"{path}: damaged or truncated zip archive ({_one_line(exc)}); expected {expected}; "
            "download or create the archive again"
        )
    if isinstance(exc, (gzip.BadGzipFile, EOFError, zlib.error)):
        return LocusInputError(
            f"{path}: damaged or truncated compressed data ({_one_line(exc) or 'ends early'}); "
            f"expected {expected}; download or compress the file again"
        )
    if isinstance(exc, json.JSONDecodeError):
        return LocusInputError(
            f"{path}: line {exc.lineno}, column {exc.colno}: malformed JSON ({exc.msg}); "
            f"expected {expected}; fix the JSON or export the file again"
        )
    if isinstance(exc, pd.errors.EmptyDataError):
        return LocusInputError(
            f"{path}: empty file; expected {expected} with a header line; check that this is "
            "the right file"
        )
    if isinstance(exc, pd.errors.ParserError):
        return LocusInputError(
            f"{path}: not a well-formed table ({_one_line(exc)}); expected {expected}; check the "
            "delimiter and quoting (every line needs the header's number of fields)"
        )
    if isinstance(exc, OSError):
        reason = exc.strerror or _one_line(exc) or type(exc).__name__
        return LocusInputError(f"{path}: cannot be read ({reason}); expected {expected}")
    return LocusInputError(
        f"{path}: cannot be read as {expected} ({type(exc).__name__}: {_one_line(exc)}); check "
        "the file format"
    )


@contextmanager
def reading(path: Path, expected: str) -> Iterator[None]:
    """Turn reader exceptions inside the block into `LocusInputError` naming ``path``.

    `LocusError`s pass through unchanged. Only file-level failures are caught: programming errors
    (TypeError, KeyError, ...) are not.
    """
    import zipfile

    try:
        yield
    except LocusError:
        raise
    except (
        OSError,
        UnicodeDecodeError,
        EOFError,
        zlib.error,
        zipfile.BadZipFile,
        json.JSONDecodeError,
        pd.errors.EmptyDataError,
        pd.errors.ParserError,
    ) as exc:
        raise input_error(path, exc, expected=expected) from exc


def check_file(path: Path, expected: str) -> Path:
    """Return ``path`` if it is an existing file; otherwise a `LocusInputError` saying why."""
    path = Path(path)
    if not path.exists():
        raise input_error(path, FileNotFoundError(path), expected=expected)
    if path.is_dir():
        raise input_error(path, IsADirectoryError(path), expected=expected)
    return path


def check_folder(path: Path, expected: str) -> Path:
    """Return ``path`` if it is an existing folder; otherwise a `LocusInputError` saying why."""
    path = Path(path)
    if not path.exists():
        raise input_error(path, FileNotFoundError(path), expected=expected)
    if not path.is_dir():
        raise input_error(path, NotADirectoryError(path), expected=expected)
    return path


def _open_binary(path: Path) -> io.BufferedIOBase:
    if path.name.lower().endswith(".gz"):
        return gzip.GzipFile(path, "rb")
    return open(path, "rb")


def _open_text(path: Path) -> TextIO:
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def parse_json(data: bytes, path: Path, expected: str) -> object:
    """Parse UTF-8 JSON bytes; errors name ``path`` (which may be a zip member label)."""
    with reading(path, expected):
        if not data.strip():
            raise LocusInputError(
                f"{path}: empty file; expected {expected}; check that this is the right file"
            )
        return json.loads(data.decode("utf-8"))


def load_json(path: Path, expected: str = "a JSON document") -> object:
    """Read a ``.json`` or ``.json.gz`` file."""
    check_file(path, expected)
    with reading(path, expected), _open_binary(path) as handle:
        data = handle.read()
    return parse_json(data, path, expected)


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
        return _read_delimited(path, "\t" if kind == "tsv" else ",", keep_columns, expected)
    if kind == "parquet":
        return _read_parquet(path, keep_columns, expected)
    if kind == "jsonl":
        return _read_jsonl(path, keep_columns, expected)
    return _read_json_list(path, keep_columns, expected)


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
    return TableData(path, frame, _CsvLines(path, sep))


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
            with _open_text(self._path) as text:
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
            f"{path}: not a readable Parquet file ({_one_line(exc)}); expected {expected}; "
            "write the file again"
        ) from exc
    return TableData(path, frame, lambda position: f"row {position + 1}")


def _read_jsonl(path: Path, keep_columns: Collection[str] | None, expected: str) -> TableData:
    keep = None if keep_columns is None else set(keep_columns)
    records: list[dict[str, object]] = []
    line_numbers: list[int] = []
    with reading(path, expected), _open_binary(path) as handle:
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
