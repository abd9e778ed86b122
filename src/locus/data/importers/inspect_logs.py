"""inspect-ai evaluation logs: binary ``.eval`` files (a zip) and ``.json`` logs.

A log is one task run by one model:

    eval         model ("openai/gpt-4o"), task, dataset {name, samples, sample_ids}, scorers
    samples      id, epoch, input (a string, or chat messages), target, metadata,
                 scores {scorer: {value, answer, explanation}}

(in a ``.eval`` file: ``header.json`` holds ``eval`` and ``samples/<id>_epoch_<n>.json``
each sample; newer inspect versions compress the members with zstandard, older ones with
deflate; both are read).

Mapping to the long table, one row per (model, task, sample id):

- ``llm_id`` = ``eval.model``; ``task`` = ``eval.task``; ``query_id`` = ``<task>/<sample id>``;
- ``query_text`` = the sample's input: the string, or the text of its last user message (the
  system prompt and earlier turns are the harness's, not the query's);
- ``score`` = the scorer's value: ``--metric`` names the scorer, else the first scorer of the
  log; ``"C"`` (correct) 1, ``"I"`` (incorrect) 0, ``"P"`` (partial) 0.5, ``"N"`` (no answer)
  0, numbers and booleans as they are (they must lie in [0, 1]); a sample scored over several
  epochs gets its mean;
- ``task`` may instead come from a sample metadata field (``--task-field category``);
- ``reference`` = the sample's target, kept for `locus onboard` (for a multiple-choice sample,
  the text of the choice the target letter names, as its input does not list the options).

A model run twice on one task keeps its newer log (a note says so). No inspect package is
needed: the files are zip and JSON.

    batch = import_inspect(Path("logs/"))         # every .eval and .json log under the folder
"""

from __future__ import annotations

import json
import struct
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from locus._progress import ProgressFactory, no_progress
from locus.data.batch import ImportBatch
from locus.data.files import check_file, check_folder
from locus.errors import LocusInputError

from ._common import batch_of_samples, per_task_note

__all__ = ["VALUE_SCORES", "import_inspect"]

DEFAULT_SOURCE = "inspect"
# inspect's letter scores (inspect_ai.scorer: CORRECT, INCORRECT, PARTIAL, NOANSWER)
VALUE_SCORES = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
_EXPECTED = "inspect-ai logs (.eval files or .json logs)"
_ZSTD = 93  # the zip compression method of the zstandard-compressed members


def import_inspect(
    path: Path,
    *,
    source: str | None = None,
    namespace: str | None = None,
    progress: ProgressFactory = no_progress,
    metric: str | Mapping[str, str] | None = None,
    task_field: str | None = None,
) -> ImportBatch:
    """Import one inspect-ai log, or every ``.eval`` / ``.json`` log under a folder.

    Args:
        path: a log file or a folder (searched recursively).
        source: provenance of the scores; default ``"inspect"``.
        namespace: where ids of queries without text live (every sample has text).
        progress: one step per log.
        metric: the scorer to import: one name, or ``{task: scorer}``; default the first
            scorer of each log.
        task_field: a sample metadata field to use as the task instead of the log's task.

    Raises:
        LocusInputError: no log, a damaged log, a log of a run that was not scored, a scorer
            the log does not carry, a score that is no value in [0, 1], each naming the file.
    """
    logs = _log_files(Path(path))
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    chosen: dict[str, str] = {}
    seen: dict[tuple[str, str], str] = {}
    with progress("reading inspect logs", total=len(logs)) as advance:
        read = [(file, *_read_log(file)) for file in logs]
        for file, header, samples in sorted(read, key=lambda r: str(r[1].get("created", ""))):
            model, task = str(header.get("model", "")), str(header.get("task", ""))
            if not model or not task:
                raise LocusInputError(
                    f"{file}: no model or task in the log's 'eval'; expected {_EXPECTED}"
                )
            if (model, task) in seen:  # oldest first: the newer log replaces the older
                notes.append(f"{model} / {task}: {seen[model, task]} replaced by newer {file.name}")
                rows = [r for r in rows if (r["llm_id"], r["_task"]) != (model, task)]
            seen[model, task] = file.name
            scorer = chosen.setdefault(task, _scorer_for(task, header, samples, metric, file))
            rows.extend(_rows(file, model, task, samples, scorer, task_field))
            advance(1)
    if not rows:
        raise LocusInputError(f"{path}: no scored samples; expected {_EXPECTED}")
    return batch_of_samples(  # epochs: one mean score per sample
        rows,
        source=source if source is not None else DEFAULT_SOURCE,
        origin=str(path),
        namespace=namespace,
        notes=[per_task_note("scorer", chosen), *notes],
        average=True,
    )


def _log_files(path: Path) -> list[Path]:
    if path.is_file():
        check_file(path, _EXPECTED)
        if path.suffix.lower() not in (".eval", ".json"):
            raise LocusInputError(f"{path}: not a .eval or .json log; expected {_EXPECTED}")
        return [path]
    found = [
        p
        for p in check_folder(path, _EXPECTED).rglob("*")
        if p.is_file() and p.suffix.lower() in (".eval", ".json") and not p.name.startswith(".")
    ]
    if not found:
        raise LocusInputError(
            f"{path}: no .eval or .json logs under this folder; expected {_EXPECTED}"
        )
    return sorted(found)


def _read_log(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the log's ``eval`` header, its samples)."""
    if path.suffix.lower() == ".json":
        try:
            log = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise LocusInputError(
                f"{path}: unreadable JSON ({error}); expected {_EXPECTED}"
            ) from None
        if not isinstance(log, dict) or not isinstance(log.get("eval"), dict):
            raise LocusInputError(f"{path}: a JSON file but not an inspect log (no 'eval')")
        _check_status(path, log)
        return log["eval"], list(log.get("samples") or [])
    try:
        with zipfile.ZipFile(path) as archive:
            header = _member_json(path, archive, "header.json")
            _check_status(path, header)
            samples = [
                _member_json(path, archive, info.filename)
                for info in archive.infolist()
                if info.filename.startswith("samples/") and info.filename.endswith(".json")
            ]
    except zipfile.BadZipFile as error:
        raise LocusInputError(
            f"{path}: not a readable .eval log ({error}); the file is damaged"
        ) from None
    if not isinstance(header.get("eval"), dict):
        raise LocusInputError(f"{path}: header.json has no 'eval'; expected {_EXPECTED}")
    return header["eval"], samples


def _check_status(path: Path, log: Mapping[str, Any]) -> None:
    status = log.get("status")
    if status not in (None, "success"):
        raise LocusInputError(
            f"{path}: the run's status is {status!r}; expected a finished ('success') run; "
            "re-run it (inspect eval-retry) or leave the log out"
        )


def _member_json(path: Path, archive: zipfile.ZipFile, name: str) -> Any:
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise LocusInputError(
            f"{path}: no {name} in the .eval file; expected {_EXPECTED}"
        ) from None
    data = _zstd_member(path, info) if info.compress_type == _ZSTD else archive.read(info)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LocusInputError(
            f"{path}: {name} is not JSON ({error}); the file is damaged"
        ) from None


def _zstd_member(path: Path, info: zipfile.ZipInfo) -> bytes:
    """A zstandard-compressed member, read from its local header (Python's zipfile does not
    decompress method 93)."""
    import zstandard

    with path.open("rb") as handle:
        handle.seek(info.header_offset)
        local = handle.read(30)
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise LocusInputError(f"{path}: damaged zip entry {info.filename}")
        name_length, extra_length = struct.unpack("<HH", local[26:30])
        handle.seek(name_length + extra_length, 1)
        compressed = handle.read(info.compress_size)
    try:
        return zstandard.ZstdDecompressor().decompress(compressed, max_output_size=info.file_size)
    except zstandard.ZstdError as error:
        raise LocusInputError(f"{path}: {info.filename} does not decompress ({error})") from None


def _scorer_for(
    task: str,
    header: Mapping[str, Any],
    samples: list[dict[str, Any]],
    metric: str | Mapping[str, str] | None,
    path: Path,
) -> str:
    carried = list(dict.fromkeys(name for s in samples for name in (s.get("scores") or {})))
    if not carried:
        raise LocusInputError(
            f"{path}: no sample is scored; expected a log of a scored run (a task with a "
            "scorer, not --no-score)"
        )
    wanted = metric.get(task) if isinstance(metric, Mapping) else metric
    if wanted is not None:
        if wanted not in carried:
            raise LocusInputError(
                f"{path}: task {task!r} has no scorer {wanted!r}; its samples carry "
                f"{', '.join(carried)}; choose one of those with --metric"
            )
        return wanted
    declared = [str(s.get("name")) for s in header.get("scorers") or [] if isinstance(s, dict)]
    return next((name for name in declared if name in carried), carried[0])


def _rows(
    path: Path,
    model: str,
    task: str,
    samples: list[dict[str, Any]],
    scorer: str,
    task_field: str | None,
) -> Iterator[dict[str, Any]]:
    for sample in samples:
        sample_id = sample.get("id")
        place = f"{path.name}: sample {sample_id!r} (epoch {sample.get('epoch', 1)})"
        score = (sample.get("scores") or {}).get(scorer)
        if score is None:  # not scored by this scorer (an error sample): not evaluated
            continue
        value = _value(score.get("value") if isinstance(score, dict) else score, place, scorer)
        query_task = task
        if task_field is not None:
            metadata = sample.get("metadata") or {}
            if task_field not in metadata:
                raise LocusInputError(
                    f"{path}: sample {sample_id!r} has no metadata field {task_field!r}; "
                    f"its metadata has {', '.join(map(str, metadata)) or 'no fields'}"
                )
            query_task = str(metadata[task_field])
        yield {
            "llm_id": model,
            "query_id": f"{task}/{sample_id}",
            "query_text": _input_text(sample.get("input"), place),
            "task": query_task,
            "score": value,
            "reference": _reference(sample),
            "_place": place,
            "_task": task,
        }


def _reference(sample: Mapping[str, Any]) -> str | None:
    """The sample's target (the first of a list); for a multiple-choice sample, whose input
    does not list its options, the text of the choice its target letter names."""
    target = sample.get("target")
    if isinstance(target, list):
        target = target[0] if target else None
    if not isinstance(target, str) or not target.strip():
        return None
    choices = sample.get("choices")
    if isinstance(choices, list) and choices:
        index = ord(target.strip().upper()) - ord("A") if len(target.strip()) == 1 else -1
        if not 0 <= index < len(choices) or not isinstance(choices[index], str):
            return None
        return choices[index].strip() or None
    return target.strip()


def _value(value: Any, place: str, scorer: str) -> float:
    if isinstance(value, str) and value.strip().upper() in VALUE_SCORES:
        return VALUE_SCORES[value.strip().upper()]
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and 0.0 <= float(value) <= 1.0:
        return float(value)
    raise LocusInputError(
        f"{place}: scorer {scorer!r} gave {value!r}; expected C / I / P / N or a number in "
        "[0, 1]; choose another scorer with --metric"
    )


def _input_text(value: Any, place: str) -> str:
    """A string input as it is; chat messages: the last user message's text."""
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list):
        users = [m for m in value if isinstance(m, dict) and m.get("role") == "user"]
        for message in reversed(users or [m for m in value if isinstance(m, dict)]):
            content = message.get("content")
            if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
                content = " ".join(
                    str(part.get("text", "")) for part in content if isinstance(part, dict)
                )
            if isinstance(content, str) and content.strip():
                return content
    raise LocusInputError(f"{place}: no input text; expected a string or chat messages")
