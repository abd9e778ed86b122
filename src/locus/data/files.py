"""Opening input files with one-line errors: paths checked, every failure named after the file.

`reading(path, expected)` turns any exception of reading into a `LocusInputError` that names the
file, what was expected and what went wrong; `check_file` / `check_folder` refuse wrong kinds of
path before anything is read; `load_json` / `parse_json` read JSON documents.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import pandas as pd

from locus.errors import LocusError, LocusInputError

__all__ = [
    "check_file",
    "check_folder",
    "input_error",
    "load_json",
    "one_line",
    "open_binary",
    "open_text",
    "parse_json",
    "reading",
]

_MESSAGE_LIMIT = 160


def one_line(text: object) -> str:
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
            f"{path}: damaged or truncated zip archive ({one_line(exc)}); expected {expected}; "
            "download or create the archive again"
        )
    if isinstance(exc, (gzip.BadGzipFile, EOFError, zlib.error)):
        return LocusInputError(
            f"{path}: damaged or truncated compressed data ({one_line(exc) or 'ends early'}); "
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
            f"{path}: not a well-formed table ({one_line(exc)}); expected {expected}; check the "
            "delimiter and quoting (every line needs the header's number of fields)"
        )
    if isinstance(exc, OSError):
        reason = exc.strerror or one_line(exc) or type(exc).__name__
        return LocusInputError(f"{path}: cannot be read ({reason}); expected {expected}")
    return LocusInputError(
        f"{path}: cannot be read as {expected} ({type(exc).__name__}: {one_line(exc)}); check "
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


def open_binary(path: Path) -> io.BufferedIOBase:
    if path.name.lower().endswith(".gz"):
        return gzip.GzipFile(path, "rb")
    return open(path, "rb")


def open_text(path: Path) -> TextIO:
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
    with reading(path, expected), open_binary(path) as handle:
        data = handle.read()
    return parse_json(data, path, expected)
