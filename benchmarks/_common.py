"""Shared helpers for benchmark scripts: locating the real data, peak memory, writing results."""

from __future__ import annotations

import json
import platform
import resource
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "locus-data"
RESULTS = REPO_ROOT / "benchmarks" / "results"


def require_shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        sys.exit(f"benchmark needs the real data folder {SHARED_DATA.name}/ beside the repository")
    return SHARED_DATA


def peak_memory_mb() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_results(name: str, figures: dict[str, Any]) -> Path:
    import os

    import torch

    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
        },
        "figures": figures,
    }
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def report(name: str, figures: dict[str, Any]) -> None:
    """Print the figures one per line, then write them to results/<name>.json."""
    width = max(map(len, figures), default=0)
    for key, value in figures.items():
        print(f"{key:>{width}}: {value}")
    print(f"written {write_results(name, figures)}")


@contextmanager
def csv_pool_store(folder: Path, rows: Mapping[str, Mapping[str, Any]]) -> Iterator[Any]:
    """A user's own pool as they would bring it: one CSV per LLM of `rows` (its columns, e.g.
    model, prompt, category, correct) written in `folder`, imported into a workspace there and
    encoded with the default text encoder; yields the open `Store`, not fitted."""
    import pandas as pd

    from locus.store import Store
    from locus.store.ingest import import_path
    from locus.text import get_text_encoder
    from locus.text.cache import encode_missing

    for llm, columns in rows.items():
        pd.DataFrame(columns).to_csv(folder / f"{llm}.csv", index=False)
    with Store.open(folder / "ws") as store:
        for llm in rows:
            import_path(store, "table", folder / f"{llm}.csv")
        encode_missing(store, get_text_encoder())
        yield store


@contextmanager
def csv_pool_router(folder: Path, rows: Mapping[str, Mapping[str, Any]]) -> Iterator[Any]:
    """`csv_pool_store`'s workspace fitted with `locus fit`'s defaults; yields its
    `WorkspaceRouter` while the workspace is open."""
    from locus.nn import TrainingConfig
    from locus.pipeline import fit_workspace
    from locus.pipeline.workspace_router import WorkspaceRouter

    with csv_pool_store(folder, rows) as store:
        fit_workspace(store, TrainingConfig())
        yield WorkspaceRouter(store)
