"""lm-evaluation-harness output folders (0.4.x, run with ``--log_samples``).

An output folder holds, per model (in a subfolder named after it), per run:

    results_<timestamp>.json            model_name, config (model, model_args), configs (per
                                        task: output_type, metric_list, ...), versions, n-shot
    samples_<task>_<timestamp>.jsonl    one record per document: doc_id, doc, target,
                                        arguments, resps, filter, metrics, acc / acc_norm /
                                        exact_match / ... (the per-sample metric values)

Mapping to the long table, one row per (model, task, document):

- ``llm_id`` = the results' ``model_name`` (else ``pretrained=`` / ``model=`` of its
  ``config.model_args``, else ``config.model``);
- ``query_text`` = the prompt the model was given, ``arguments.gen_args_0.arg_0``, with the
  few-shot examples cut off (the part after the last ``n-shot`` fewshot delimiters), so
  zero- and few-shot runs of one task share their queries; the same text in two tasks or two
  models' runs is one query. An LLM behind a chat API (``--model local-chat-completions
  --apply_chat_template``) logs its chat messages there, as JSON: the query is the last user
  message, whose few-shot examples are cut off the same way unless they came as earlier turns
  (``fewshot_as_multiturn``), so a chat run and a completion run of a task share queries;
- ``query_id`` = ``<task>/<doc_id>``; ``task`` = the task name;
- ``reference`` = the answer a model should give (kept for `locus onboard`): a generation
  task's ``target``, a multiple-choice task's right continuation text;
- ``score`` = the task's metric: ``--metric`` (``acc_norm``, or ``task=metric`` per task),
  else the first of `METRIC_PREFERENCE` the samples carry; every value must lie in [0, 1]
  (a note names the metric chosen per task).

A model evaluated on a task in two runs keeps the newer run's samples (a note says so); a
document scored under several filters (``strict-match``, ``flexible-extract``) keeps the
``none`` filter, else the first. No lm-eval package is needed: the files are JSON.

    batch = import_lm_eval(Path("lm-eval-output/"))          # every model's folder under it
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from locus._progress import ProgressFactory, no_progress
from locus.data.batch import ImportBatch
from locus.data.files import open_text
from locus.data.readers import check_folder, load_json
from locus.errors import LocusInputError

from ._common import batch_of_samples, per_task_note

__all__ = ["METRIC_PREFERENCE", "import_lm_eval"]

DEFAULT_SOURCE = "lm-eval"
# the per-sample metrics tried in order when --metric does not name one
METRIC_PREFERENCE = ("acc", "exact_match", "pass@1", "pass_at_1", "acc_norm", "em", "f1")
_EXPECTED = "an lm-evaluation-harness output folder (results_*.json + samples_*.jsonl)"
_RESULTS = re.compile(r"^results_(?P<stamp>.+)\.json$")


def import_lm_eval(
    path: Path,
    *,
    source: str | None = None,
    namespace: str | None = None,
    progress: ProgressFactory = no_progress,
    metric: str | Mapping[str, str] | None = None,
) -> ImportBatch:
    """Import lm-evaluation-harness ``--log_samples`` output: one results file, or every
    results file under a folder (several models' folders at once).

    Args:
        path: a ``results_*.json`` file (its samples files sit beside it) or a folder.
        source: provenance of the scores; default ``"lm-eval"``.
        namespace: where ids of queries without text live (every lm-eval query has text).
        progress: one step per results file.
        metric: the per-sample metric to import: one name for every task, or
            ``{task: name}``; default the first of `METRIC_PREFERENCE` each task carries.

    Raises:
        LocusInputError: no results file, a results file without samples (run lm-eval with
            ``--log_samples``), unreadable JSON, a metric the samples do not carry or with
            values outside [0, 1], each naming the file.
    """
    runs = _results_files(Path(path))
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    chosen: dict[str, str] = {}
    newest: dict[tuple[str, str], str] = {}
    with progress("reading lm-eval results", total=len(runs)) as advance:
        for results_path in sorted(runs, key=_stamp, reverse=True):  # newest run first
            results = load_json(results_path, "an lm-eval results file")
            if not isinstance(results, dict) or "configs" not in results:
                raise LocusInputError(
                    f"{results_path}: not an lm-eval results file (no 'configs'); expected "
                    f"{_EXPECTED}"
                )
            model = _model_name(results, results_path)
            for task, samples_path in _samples_files(results_path, results):
                if (model, task) in newest:
                    notes.append(
                        f"{model} / {task}: also in an older run ({results_path.name}); "
                        f"kept the newer ({newest[model, task]})"
                    )
                    continue
                newest[model, task] = results_path.name
                shots = _shots(results, task)
                config = results["configs"].get(task, {})
                delimiter = str(config.get("fewshot_delimiter", "\n\n"))
                multiple_choice = config.get("output_type") == "multiple_choice"
                records = list(_records(samples_path))
                name = chosen.setdefault(task, _metric_for(task, records, metric, samples_path))
                rows.extend(
                    {
                        **_row(model, task, record, name, shots, delimiter, samples_path),
                        "reference": _reference(record, multiple_choice),
                    }
                    for record in records
                    if _kept(record, records)
                )
            advance(1)
    if not rows:
        raise LocusInputError(f"{path}: no samples found; expected {_EXPECTED}")
    return batch_of_samples(
        rows,
        source=source if source is not None else DEFAULT_SOURCE,
        origin=str(path),
        namespace=namespace,
        notes=[per_task_note("metric", chosen), *notes],
    )


def _reference(record: Mapping[str, Any], multiple_choice: bool) -> str | None:
    """The answer a model should give to the prompt: a generation task's ``target``; for a
    multiple-choice task, the text of the right continuation (the ``target``-th choice's
    ``arg_1``), since its prompt does not list the options."""
    target = record.get("target")
    if not multiple_choice:
        return str(target).strip() or None if isinstance(target, str | int | float) else None
    arguments: Any = record.get("arguments")
    try:
        index = int(str(target))
        if isinstance(arguments, dict):
            continuation = arguments[f"gen_args_{index}"]["arg_1"]
        else:  # 0.4.0-0.4.2: [[prompt, continuation], ...]
            continuation = arguments[index][1]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return str(continuation).strip() or None if isinstance(continuation, str) else None


def _results_files(path: Path) -> list[Path]:
    if path.is_file():
        if not _RESULTS.match(path.name):
            raise LocusInputError(
                f"{path}: not a results_<timestamp>.json file; expected {_EXPECTED}"
            )
        return [path]
    found = [p for p in check_folder(path, _EXPECTED).rglob("results_*.json") if p.is_file()]
    if not found:
        raise LocusInputError(
            f"{path}: no results_*.json under this folder; expected {_EXPECTED} (lm_eval "
            "--output_path ... --log_samples)"
        )
    return found


def _stamp(results_path: Path) -> str:
    match = _RESULTS.match(results_path.name)
    return match.group("stamp") if match else ""


def _model_name(results: Mapping[str, Any], path: Path) -> str:
    name = results.get("model_name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    config = results.get("config") or {}
    args = config.get("model_args")
    if isinstance(args, str):
        args = dict(part.split("=", 1) for part in args.split(",") if "=" in part)
    if isinstance(args, dict):
        for key in ("pretrained", "model", "engine", "path"):
            if args.get(key):
                return str(args[key]).strip()
    if config.get("model"):
        return str(config["model"])
    return path.parent.name


def _samples_files(results_path: Path, results: Mapping[str, Any]) -> Iterator[tuple[str, Path]]:
    """(task, its samples file of the same run) for each task of the results file."""
    stamp = _stamp(results_path)
    for task in sorted(results["configs"]):
        samples = results_path.with_name(f"samples_{task}_{stamp}.jsonl")
        if not samples.is_file():
            raise LocusInputError(
                f"{results_path}: no per-sample file for task {task!r} ({samples.name}); "
                "expected lm-eval's --log_samples output beside the results file; re-run "
                "lm_eval with --log_samples"
            )
        yield task, samples


def _records(path: Path) -> Iterator[dict[str, Any]]:
    with open_text(path) as text:
        for number, line in enumerate(text, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise LocusInputError(
                    f"{path}: line {number}: not JSON ({error.msg}); expected one lm-eval "
                    "sample per line; the file is damaged or truncated"
                ) from None
            if not isinstance(record, dict) or "doc_id" not in record:
                raise LocusInputError(
                    f"{path}: line {number}: expected an lm-eval sample (an object with "
                    "doc_id, arguments and metric values)"
                )
            record["_line"] = number
            yield record


def _shots(results: Mapping[str, Any], task: str) -> int:
    try:
        return int((results.get("n-shot") or {}).get(task) or 0)
    except (TypeError, ValueError):
        return 0


def _metric_for(
    task: str,
    records: list[dict[str, Any]],
    metric: str | Mapping[str, str] | None,
    path: Path,
) -> str:
    carried = list(dict.fromkeys(m for r in records for m in r.get("metrics") or ()))
    wanted = metric.get(task) if isinstance(metric, Mapping) else metric
    if wanted is not None:
        if wanted not in carried:
            raise LocusInputError(
                f"{path}: task {task!r} has no per-sample metric {wanted!r}; it carries "
                f"{', '.join(carried) or 'none'}; choose one of those with --metric"
            )
        return wanted
    for name in (*METRIC_PREFERENCE, *carried):
        if name in carried:
            return name
    raise LocusInputError(
        f"{path}: task {task!r} records no per-sample metric; expected lm-eval samples with "
        "a 'metrics' list (lm-eval 0.4 or newer)"
    )


def _kept(record: Mapping[str, Any], records: list[dict[str, Any]]) -> bool:
    """One record per document: the ``none`` filter's, else the first filter's."""
    filters = list(dict.fromkeys(str(r.get("filter", "none")) for r in records))
    keep = "none" if "none" in filters else filters[0]
    return str(record.get("filter", "none")) == keep


def _row(
    model: str,
    task: str,
    record: Mapping[str, Any],
    metric: str,
    shots: int,
    delimiter: str,
    path: Path,
) -> dict[str, Any]:
    place = f"{path.name}: line {record['_line']}"
    value = record.get(metric)
    if isinstance(value, list | tuple) and value:
        value = value[0]
    if isinstance(value, bool):
        value = float(value)
    if not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise LocusInputError(
            f"{path}: line {record['_line']}: metric {metric!r} is {value!r}; expected a "
            "per-sample value in [0, 1]; choose another metric with --metric"
        )
    return {
        "llm_id": model,
        "query_id": f"{task}/{record['doc_id']}",
        "query_text": _prompt(record, shots, delimiter, path),
        "task": task,
        "score": float(value),
        "_place": place,
    }


def _prompt(record: Mapping[str, Any], shots: int, delimiter: str, path: Path) -> str:
    """The prompt without its few-shot examples: ``arguments.gen_args_0.arg_0`` (or the first
    argument of older layouts), after the ``shots``-th fewshot delimiter; of chat messages, the
    last user message, less the few-shot examples not given as turns of their own."""
    arguments = record.get("arguments")
    prompt: Any = None
    where = "arguments"
    if isinstance(arguments, dict) and arguments:
        key = "gen_args_0" if "gen_args_0" in arguments else next(iter(arguments))
        first = arguments[key]
        prompt = first.get("arg_0") if isinstance(first, dict) else None
        where = f"arguments.{key}.arg_0"
    elif isinstance(arguments, list) and arguments:  # 0.4.0-0.4.2: [[prompt, ...], ...]
        first = arguments[0]
        prompt = first[0] if isinstance(first, list | tuple) and first else first
        where = "arguments[0][0]"
    place = f"{path}: line {record.get('_line')}: {where}"
    users = 0
    if isinstance(prompt, list) or (isinstance(prompt, str) and _CHAT_JSON.match(prompt)):
        prompt, users = _last_user_message(prompt, place)
    if not isinstance(prompt, str) or not prompt.strip():
        raise LocusInputError(
            f"{path}: line {record.get('_line')}: no prompt text in 'arguments'; expected an "
            "lm-eval sample with the model's input"
        )
    # chat runs with fewshot_as_multiturn give each example a user turn of its own
    inline_shots = shots - max(users - 1, 0)
    if inline_shots > 0 and delimiter:
        parts = prompt.split(delimiter)
        if len(parts) > inline_shots:
            prompt = delimiter.join(parts[inline_shots:])
    return prompt


# lm-eval's json.dumps of the chat messages, as an API chat LLM's prompt is logged
_CHAT_JSON = re.compile(r'^\s*\[\s*\{\s*"role"\s*:')
_CHAT_EXPECTED = (
    "expected the chat messages lm-eval logs for a chat-completions LLM (--apply_chat_template): "
    'a JSON list of {"role": ..., "content": ...} objects with a user message, as a string or '
    "a list holding that string; the file is damaged or was edited: re-run lm_eval with "
    "--log_samples"
)


def _last_user_message(prompt: str | list[Any], place: str) -> tuple[str, int]:
    """(the last user message's text, how many user messages) of a chat prompt: the JSON of the
    messages, a list holding that JSON (lm-eval's ``JsonChatStr``), or the messages."""
    messages: Any = prompt
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        messages = prompt[0]
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except json.JSONDecodeError as error:
            raise LocusInputError(f"{place}: not JSON ({error}); {_CHAT_EXPECTED}") from None
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages
    ):
        found = (
            "a list with an element that is not a message with a 'role'"
            if isinstance(messages, list)
            else f"a JSON {type(messages).__name__}, not a list of messages"
        )
        raise LocusInputError(f"{place}: found {found}; {_CHAT_EXPECTED}")
    users = [_message_text(m) for m in messages if m["role"] == "user"]
    if not users or not users[-1].strip():
        raise LocusInputError(
            f"{place}: found {len(messages)} chat messages (roles "
            f"{', '.join(str(m['role']) for m in messages) or 'none'}) without a user message "
            f"with text; {_CHAT_EXPECTED}"
        )
    return users[-1], len(users)


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # [{"type": "text", "text": ...}, {"type": "image_url"}, ...]
        content = " ".join(
            str(part["text"]) for part in content if isinstance(part, dict) and "text" in part
        )
    return content if isinstance(content, str) else ""
