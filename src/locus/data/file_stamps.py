"""A cheap fingerprint of the files an import reads: path, size and modification time of each.

`locus import` of files whose fingerprint matches the last successful import of the same
format, source and options skips reading them (the rule `make` uses): a second `make demo`
does not re-read 29 zip files to find nothing new. `--replace` always reads.

    >>> key, value = import_fingerprint("table", [Path("scores.csv")], {})   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["import_fingerprint"]


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    return [path] if path.exists() else []


def import_fingerprint(
    format_name: str, paths: Sequence[Path], options: Mapping[str, Any]
) -> tuple[str, str]:
    """(meta key naming this import, digest of its files' names, sizes and mtimes)."""
    resolved = [Path(p).resolve() for p in paths]
    described = {
        "format": format_name,
        "paths": [str(p) for p in resolved],
        "options": {k: str(v) for k, v in sorted(options.items())},
    }
    key = (
        "import_files:"
        + hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:32]
    )
    digest = hashlib.sha256()
    for root in resolved:
        for file in _files(root):
            stat = file.stat()
            digest.update(f"{file}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return key, digest.hexdigest()
