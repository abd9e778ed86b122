"""An unknown endpoint's scored answers, read from a file, as evidence to embed.

The file is any table `locus import table` reads (CSV, JSONL, Parquet, ...) with a `query_text`
and a `score` in [0, 1] per row, and optionally an `llm_id` column naming several endpoints
(each is identified on its own). Columns are recognised by the names `locus import table`
recognises (`prompt`, `correct`, `model`, ...) or mapped with `columns`. Texts the workspace
holds use their stored vectors; others are encoded with the workspace's text encoder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from locus.data.importers.long_table import recognise_columns
from locus.data.readers import file_stem, read_table
from locus.errors import LocusInputError

__all__ = ["ProbeEvidence", "read_probe_evidence"]

VectorsFor = Callable[[Sequence[str]], NDArray[np.float32]]


@dataclass(frozen=True)
class ProbeEvidence:
    """One endpoint's scored queries: `vectors` (K, dq), `scores` (K,) and the `texts`."""

    vectors: NDArray[np.float32]
    scores: NDArray[np.float32]
    texts: list[str]


def read_probe_evidence(
    path: Path, vectors_for: VectorsFor, columns: Mapping[str, str] | None = None
) -> dict[str, ProbeEvidence]:
    """{endpoint name: its evidence} from a scores file; `columns`: canonical name -> file
    column, for columns named otherwise.

    Raises:
        LocusInputError: unreadable or empty file, a missing column, an empty text, a score
            that is not a number in [0, 1].
    """
    table = read_table(Path(path))
    names = [str(c) for c in table.frame.columns]
    unknown = [c for c in (columns or {}).values() if c not in names]
    if unknown:
        raise LocusInputError(
            f"{path}: column {unknown[0]!r} is not in the file; found {', '.join(names)}"
        )
    mapping, _ = recognise_columns(names, columns or {}, skip=("query_id", "task", "split"))
    frame = table.frame.rename(columns={v: k for k, v in mapping.items()})
    missing = [c for c in ("query_text", "score") if c not in frame.columns]
    if missing:
        raise LocusInputError(
            f"{path}: no {' or '.join(repr(c) for c in missing)} column; expected one row per "
            "scored query with query_text and score (found columns: "
            f"{', '.join(map(str, frame.columns))})"
        )
    if frame.empty:
        raise LocusInputError(f"{path}: no rows; expected scored queries (query_text, score)")
    scores = pd.to_numeric(frame["score"], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~((scores >= 0) & (scores <= 1)))
    if len(bad):
        row = int(bad[0])
        raise LocusInputError(
            f"{path}, {table.describe_row(row)}: score {frame['score'].iloc[row]!r}; expected a "
            "number in [0, 1]"
        )
    texts = frame["query_text"].tolist()
    empty = [i for i, t in enumerate(texts) if not isinstance(t, str) or not t.strip()]
    if empty:
        raise LocusInputError(
            f"{path}, {table.describe_row(empty[0])}: empty query_text; expected the query's text"
        )
    names = (
        frame["llm_id"].astype(str).tolist()
        if "llm_id" in frame.columns
        else [file_stem(path)] * len(frame)
    )
    vectors = np.asarray(vectors_for(texts), dtype=np.float32)
    out: dict[str, ProbeEvidence] = {}
    for name in dict.fromkeys(names):
        rows = [i for i, n in enumerate(names) if n == name]
        out[name] = ProbeEvidence(
            vectors[rows], scores[rows].astype(np.float32), [str(texts[i]) for i in rows]
        )
    return out
