"""A planted workspace: query texts whose words reveal their task, LLM groups skilled per task.

With the hashing text encoder, queries of one task get nearby vectors, so LOCUS can learn who is
good at what; the right answers are known by construction.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from locus.data.batch import ImportBatch
from locus.store import Store
from locus.text import HashingEncoder
from locus.text.cache import encode_missing

VOCABULARY = {
    "math": "integral derivative equation algebra matrix polynomial limit vector",
    "law": "court statute contract plaintiff tort appeal verdict jury",
    "biology": "cell enzyme protein gene membrane mitosis ribosome species",
}
TASKS = tuple(VOCABULARY)
ENCODER_DIM = 48


def planted_rows(
    *, llms_per_group: int = 4, queries_per_task: int = 160, seed: int = 0
) -> pd.DataFrame:
    """Long table: LLM `g<task>-<i>` answers its task right 90% of the time, others 20%."""
    rng = np.random.default_rng(seed)
    rows = []
    for t, task in enumerate(TASKS):
        words = VOCABULARY[task].split()
        for q in range(queries_per_task):
            text = " ".join(rng.choice(words, size=5)) + f" item {t}-{q}"
            for g, group in enumerate(TASKS):
                for i in range(llms_per_group):
                    p = 0.9 if g == t else 0.2
                    rows.append(
                        {
                            "llm_id": f"{group}-{i}",
                            "query_id": f"{task}-{q}",
                            "query_text": text,
                            "task": task,
                            "score": float(rng.random() < p),
                        }
                    )
    return pd.DataFrame(rows)


def build_planted_workspace(
    path: str | Path, rows: pd.DataFrame | None = None, *, encode: bool = True
) -> str | Path:
    """The planted rows imported and (unless not `encode`) encoded into the workspace `path`
    (a directory or a database URL)."""
    rows = planted_rows() if rows is None else rows
    with Store.open(path) as store:
        store.write_batch(
            ImportBatch.from_long(rows, source="planted", origin="planted.csv"), kind="table"
        )
        if encode:
            encode_missing(store, HashingEncoder(ENCODER_DIM))
    return path


def trained_planted_workspace(path: str | Path, rows: pd.DataFrame | None = None) -> str | Path:
    """A planted workspace (of `rows`, default the planted rows) with its default artifact
    fitted by the small test network."""
    from locus.pipeline import fit_workspace
    from tests.nn.conftest import small_config

    build_planted_workspace(path, rows)
    with Store.open(path) as store:
        fit_workspace(store, small_config())
    return path
