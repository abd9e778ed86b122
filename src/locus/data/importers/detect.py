"""`detect_format`: which importer a file or folder is for, from its names and first bytes.

>>> detect_format(Path("lm-eval-output/"))                # doctest: +SKIP
('lm-eval', 'lm-evaluation-harness results_*.json with samples_*.jsonl')
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from locus.data.files import open_binary
from locus.data.readers import TABLE_SUFFIXES, table_suffix
from locus.errors import LocusInputError

__all__ = ["detect_format"]

_LIMIT = 2000  # files looked at under a folder


def detect_format(path: Path) -> tuple[str, str]:
    """(format name, what was recognised) for `path`.

    Raises:
        LocusInputError: nothing locus reads (the message says what it looked for).
    """
    path = Path(path)
    if not path.exists():
        raise LocusInputError(f"{path}: no such file or folder")
    files = [path] if path.is_file() else _files(path)
    names = {f.name for f in files}
    if any(n.startswith("results_") and n.endswith(".json") for n in names) and any(
        n.startswith("samples_") and n.endswith(".jsonl") for n in names
    ):
        return "lm-eval", "lm-evaluation-harness results_*.json with samples_*.jsonl"
    if "run_spec.json" in names and "per_instance_stats.json" in names:
        return "helm", "HELM run directories (run_spec.json, per_instance_stats.json)"
    if any(f.suffix == ".eval" and zipfile.is_zipfile(f) for f in files) or any(
        f.suffix == ".json" and _starts_like_inspect(f) for f in files
    ):
        return "inspect", "inspect-ai logs"
    if "model_order.csv" in names and "question_order.csv" in names:
        return "embedllm", "the EmbedLLM release (model_order.csv, question_order.csv)"
    if any(n.lower().startswith("model_outputs_") and n.endswith(".zip") for n in names):
        return "mmlu-pro", "MMLU-Pro eval_results zips"
    tables = [f for f in files if table_suffix(f) is not None]
    if tables:
        head = _head(tables[0])
        if b"|total_cost" in head:
            return "routerbench", "a RouterBench-style wide table (<llm>|total_cost columns)"
        if head.lstrip().startswith(b"[") and b'"scores"' in head:
            return "scores-json", 'JSON lists of {"question", "scores"} records'
        return "table", f"a long score table ({tables[0].name})"
    raise LocusInputError(
        f"{path}: no format locus reads found (looked for lm-eval results_*.json + "
        f"samples_*.jsonl, HELM run_spec.json, inspect .eval / .json logs, EmbedLLM, MMLU-Pro "
        f"zips, tables {', '.join(TABLE_SUFFIXES[:4])}, ...); name the format: "
        "`locus import FORMAT PATH`"
    )


def _files(folder: Path) -> list[Path]:
    out = []
    for file in sorted(folder.rglob("*")):
        if file.is_file() and not file.name.startswith("."):
            out.append(file)
            if len(out) >= _LIMIT:
                break
    return out


def _head(path: Path, size: int = 4096) -> bytes:
    try:
        with open_binary(path) as handle:
            return bytes(handle.read(size))
    except (OSError, EOFError, LocusInputError):
        return b""


def _starts_like_inspect(path: Path) -> bool:
    head = _head(path, 2048)
    return head.lstrip().startswith(b"{") and b'"eval"' in head and b'"version"' in head
