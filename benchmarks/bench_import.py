"""Import benchmark: the 29 MMLU-Pro zips into a fresh SQLite workspace, then again (no-op).

Prints wall time for reading+validating and for writing, rows per second and peak memory.
Run: `.venv/bin/python benchmarks/bench_import.py`
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import peak_memory_mb, report, require_shared_data

from locus.data.importers import get_importer
from locus.store import Store


def main() -> None:
    folder = require_shared_data() / "mmlu_pro" / "eval_results"
    importer = get_importer("mmlu-pro")
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        batch = importer(folder)
        read_s = time.perf_counter() - started
        with Store.open(Path(tmp) / "ws") as store:
            started = time.perf_counter()
            first = store.write_batch(batch, kind="mmlu-pro")
            write_s = time.perf_counter() - started
            started = time.perf_counter()
            again = store.write_batch(importer(folder), kind="mmlu-pro")
            reimport_s = time.perf_counter() - started
            db_mb = store.db_path.stat().st_size / 2**20
    figures = {
        "llms": batch.n_llms,
        "queries": batch.n_queries,
        "scores": batch.n_scores,
        "read_and_validate_s": round(read_s, 2),
        "write_s": round(write_s, 2),
        "first_import_s": round(read_s + write_s, 2),
        "scores_per_s": round(batch.n_scores / (read_s + write_s)),
        "reimport_s": round(reimport_s, 2),
        "reimport_changed": again.changed,
        "new_scores_first": first.new_scores,
        "db_mb": round(db_mb, 1),
        "peak_memory_mb": round(peak_memory_mb()),
    }
    report("import", figures)


if __name__ == "__main__":
    main()
