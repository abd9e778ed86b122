"""HELM run directories (``benchmark_output/runs/<suite>/<run name>/``).

Each run directory is one scenario run by one model:

    run_spec.json            name, adapter_spec (model, ...), metric_specs, groups
    scenario_state.json      request_states: instance {id, input.text, references, split},
                             request (the prompt), result (the completions)
    per_instance_stats.json  [{instance_id, train_trial_index, stats: [{name: {name, split,
                             perturbation?}, mean, ...}]}]

Mapping to the long table, one row per (model, scenario, instance):

- ``llm_id`` = ``adapter_spec.model``;
- ``task`` = the run's first group (``groups``), else the scenario's name (the run name
  before ``:``);
- ``query_id`` = ``<task>/<instance id>``; ``query_text`` = the instance's ``input.text`` (the
  question, not the prompt with its in-context examples);
- ``score`` = the instance's main metric, unperturbed: ``--metric``, else the first of
  `METRIC_PREFERENCE` the run reports per instance; the mean over train trials;
- ``reference`` = the output text of the instance's first reference tagged ``correct``
  (kept for `locus onboard`).

No HELM package is needed: the files are JSON.

    batch = import_helm(Path("benchmark_output/runs/my-suite/"))    # every run directory
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from locus._progress import ProgressFactory, no_progress
from locus.data.batch import ImportBatch
from locus.data.files import check_folder, load_json
from locus.errors import LocusInputError

from ._common import batch_of_samples, per_task_note

__all__ = ["METRIC_PREFERENCE", "import_helm"]

DEFAULT_SOURCE = "helm"
METRIC_PREFERENCE = (
    "exact_match",
    "quasi_exact_match",
    "prefix_exact_match",
    "quasi_prefix_exact_match",
    "math_equiv",
    "math_equiv_chain_of_thought",
    "pass",
    "f1_score",
)
_EXPECTED = "HELM run directories (run_spec.json + scenario_state.json + per_instance_stats.json)"


def import_helm(
    path: Path,
    *,
    source: str | None = None,
    namespace: str | None = None,
    progress: ProgressFactory = no_progress,
    metric: str | Mapping[str, str] | None = None,
) -> ImportBatch:
    """Import one HELM run directory, or every run directory under a folder (a suite).

    Args:
        path: a run directory (holding ``run_spec.json``) or any folder above run directories.
        source: provenance of the scores; default ``"helm"``.
        namespace: where ids of queries without text live (HELM instances have text).
        progress: one step per run directory.
        metric: the per-instance stat to import: one name, or ``{task: name}``; default the
            first of `METRIC_PREFERENCE` each run reports.

    Raises:
        LocusInputError: no run directory, a run without per-instance stats or scenario
            state, a metric the run does not report, values outside [0, 1].
    """
    runs = _run_folders(Path(path))
    rows: list[dict[str, Any]] = []
    chosen: dict[str, str] = {}
    with progress("reading HELM runs", total=len(runs)) as advance:
        for run in runs:
            rows.extend(_run_rows(run, metric, chosen))
            advance(1)
    if not rows:
        raise LocusInputError(f"{path}: no scored instances; expected {_EXPECTED}")
    return batch_of_samples(  # train trials: one mean score per instance
        rows,
        source=source if source is not None else DEFAULT_SOURCE,
        origin=str(path),
        namespace=namespace,
        notes=[per_task_note("metric", chosen)],
        average=True,
    )


def _run_folders(path: Path) -> list[Path]:
    folder = check_folder(path, _EXPECTED)
    if (folder / "run_spec.json").is_file():
        return [folder]
    found = sorted(p.parent for p in folder.rglob("run_spec.json") if p.is_file())
    if not found:
        raise LocusInputError(
            f"{path}: no run_spec.json under this folder; expected {_EXPECTED} (helm-run "
            "writes them to benchmark_output/runs/<suite>/)"
        )
    return found


def _run_rows(
    run: Path, metric: str | Mapping[str, str] | None, chosen: dict[str, str]
) -> list[dict[str, Any]]:
    spec = _json(run / "run_spec.json", "a HELM run_spec.json")
    adapter = spec.get("adapter_spec") or {}
    model = adapter.get("model") or adapter.get("model_deployment")
    if not model:
        raise LocusInputError(
            f"{run / 'run_spec.json'}: no adapter_spec.model; expected {_EXPECTED}"
        )
    groups = spec.get("groups") or []
    task = str(groups[0]) if groups else str(spec.get("name", run.name)).split(":")[0]
    state = _json(run / "scenario_state.json", "a HELM scenario_state.json")
    texts: dict[str, str] = {}
    references: dict[str, str | None] = {}
    for request_state in state.get("request_states") or []:
        instance = request_state.get("instance") or {}
        text = (instance.get("input") or {}).get("text")
        if instance.get("id") is not None and isinstance(text, str) and text.strip():
            texts.setdefault(str(instance["id"]), text)
            references.setdefault(str(instance["id"]), _correct_reference(instance))
    stats = _json(run / "per_instance_stats.json", "a HELM per_instance_stats.json")
    if not isinstance(stats, list):
        raise LocusInputError(f"{run / 'per_instance_stats.json'}: expected a list of instances")
    values = [(entry, _main_stats(entry)) for entry in stats if isinstance(entry, dict)]
    reported = list(dict.fromkeys(name for _, found in values for name in found))
    name = chosen.setdefault(task, _metric_for(task, reported, metric, run))
    if name not in reported:  # another run of this task already chose a metric
        raise LocusInputError(
            f"{run}: reports no per-instance {name!r} (chosen for task {task!r} from another "
            f"run); it reports {', '.join(reported) or 'none'}; pass --metric"
        )
    rows = []
    for entry, found in values:
        instance = str(entry.get("instance_id"))
        if name not in found:
            continue
        value = found[name]
        if not 0.0 <= value <= 1.0:
            raise LocusInputError(
                f"{run / 'per_instance_stats.json'}: instance {instance!r}: {name} is {value:g}; "
                "expected a value in [0, 1]; choose another metric with --metric"
            )
        if instance not in texts:
            raise LocusInputError(
                f"{run / 'scenario_state.json'}: no input text for instance {instance!r}; "
                f"expected {_EXPECTED}"
            )
        rows.append(
            {
                "llm_id": str(model),
                "query_id": f"{task}/{instance}",
                "query_text": texts[instance],
                "reference": references.get(instance),
                "task": task,
                "score": float(value),
                "_place": f"{run.name}: instance {instance}",
            }
        )
    return rows


def _json(path: Path, expected: str) -> Any:
    if not path.is_file():
        raise LocusInputError(f"{path}: missing; expected {_EXPECTED}")
    return load_json(path, expected)


def _main_stats(entry: Mapping[str, Any]) -> dict[str, float]:
    """{stat name: mean} of one instance's unperturbed stats."""
    out: dict[str, float] = {}
    for stat in entry.get("stats") or []:
        name = stat.get("name") or {}
        if not isinstance(name, dict) or name.get("perturbation") or "mean" not in stat:
            continue
        try:
            out.setdefault(str(name.get("name")), float(stat["mean"]))
        except (TypeError, ValueError):
            continue
    return out


def _metric_for(
    task: str, reported: list[str], metric: str | Mapping[str, str] | None, run: Path
) -> str:
    wanted = metric.get(task) if isinstance(metric, Mapping) else metric
    if wanted is not None:
        if wanted not in reported:
            raise LocusInputError(
                f"{run}: task {task!r} reports no per-instance {wanted!r}; it reports "
                f"{', '.join(reported) or 'none'}; choose one of those with --metric"
            )
        return wanted
    for name in METRIC_PREFERENCE:
        if name in reported:
            return name
    raise LocusInputError(
        f"{run}: none of {', '.join(METRIC_PREFERENCE[:4])}, ... among the run's per-instance "
        f"stats ({', '.join(reported[:8]) or 'none'}); choose one with --metric"
    )


def _correct_reference(instance: Mapping[str, Any]) -> str | None:
    """The output text of the instance's first reference tagged correct (None without one)."""
    for reference in instance.get("references") or []:
        if isinstance(reference, dict) and "correct" in (reference.get("tags") or []):
            text = (reference.get("output") or {}).get("text")
            if isinstance(text, str) and text.strip():
                return text.strip()
    return None
