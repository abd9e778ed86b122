"""Importers: one function per evaluation-result format, all ending in `ImportBatch.from_long`.

Every importer has the signature

    importer(path, *, source=None, namespace=None, progress=no_progress, **format_options)
        -> ImportBatch

reads its format, maps it to the canonical long table (``llm_id, query_id, score`` plus optional
``query_text, task, split, cost_usd, latency_ms``) and lets `ImportBatch.from_long` validate it,
with row descriptions that name the real place in the file (``"line 17"``,
``"model_outputs_X.zip: record 12"``). Bad input raises `LocusInputError`, one line naming the
file.

``source`` (each format has a default: its name, or a table file's name) is the provenance of
the scores and the scope of the file's query ids. A query with text is its text whatever the
source, so per-LLM files share their queries; a query without text is its id within
``namespace`` (default: the source). `locus import` and `locus.store.ingest.import_path` then
write each file or folder to a source of its own, named from its path
(`locus.store.ingest.SourceNames`), keeping the importer's namespace.

| name          | reads                                                                     |
|---------------|---------------------------------------------------------------------------|
| `table`       | a long table (CSV/TSV/Parquet/JSONL/JSON, gzipped or not) + queries file  |
| `mmlu-pro`    | MMLU-Pro ``eval_results`` zips or JSON files (one per LLM)                |
| `embedllm`    | the EmbedLLM release folder (train/val/test.csv + order files)            |
| `routerbench` | RouterBench-style wide tables with ``<llm>|total_cost`` columns           |
| `scores-json` | JSON lists of ``{question, scores: {llm: x}}`` (graded scores)            |
| `lm-eval`     | lm-evaluation-harness output folders (results_*.json + samples_*.jsonl)   |
| `inspect`     | inspect-ai logs (.eval files, .json logs)                                 |
| `helm`        | HELM run directories (run_spec.json + scenario_state.json + stats)         |

`detect_format(path)` (`locus import auto PATH`) names the format a file or folder is in.

Modules: long_table.py, mmlu_pro.py, embedllm.py, routerbench.py, scores_json.py, lm_eval.py,
inspect_logs.py, helm_runs.py (one per format above); detect.py (detect_format);
_common.py (input file lists, row places across files, repeated rows).

    >>> from locus.data.importers import get_importer
    >>> batch = get_importer("table")(Path("scores.csv"))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from locus.data.batch import ImportBatch
from locus.errors import LocusInputError, did_you_mean

from .detect import detect_format
from .embedllm import import_embedllm
from .helm_runs import import_helm
from .inspect_logs import import_inspect
from .lm_eval import import_lm_eval
from .long_table import import_table
from .mmlu_pro import import_mmlu_pro
from .routerbench import import_routerbench
from .scores_json import import_scores_json

__all__ = [
    "IMPORTERS",
    "Importer",
    "detect_format",
    "get_importer",
    "import_embedllm",
    "import_helm",
    "import_inspect",
    "import_lm_eval",
    "import_mmlu_pro",
    "import_routerbench",
    "import_scores_json",
    "import_table",
]


Importer = Callable[..., ImportBatch]
"""``(path, *, source=None, namespace=None, progress=no_progress, **format_options) ->
ImportBatch``.

Typed loosely because each format has its own keyword options (``columns=``, ``queries=``,
``repeats=``, ...).
"""


IMPORTERS: Mapping[str, Importer] = MappingProxyType(
    {
        "table": import_table,
        "mmlu-pro": import_mmlu_pro,
        "embedllm": import_embedllm,
        "routerbench": import_routerbench,
        "scores-json": import_scores_json,
        "lm-eval": import_lm_eval,
        "inspect": import_inspect,
        "helm": import_helm,
    }
)


def get_importer(name: str) -> Importer:
    """The importer registered under ``name``.

    Raises:
        LocusInputError: unknown name; the message lists the known formats.
    """
    try:
        return IMPORTERS[name]
    except KeyError:
        raise LocusInputError(
            f"unknown import format {name!r}{did_you_mean(name, IMPORTERS)}; expected one of "
            f"{', '.join(IMPORTERS)}; pick one of these, e.g. `locus import table scores.csv`"
        ) from None
