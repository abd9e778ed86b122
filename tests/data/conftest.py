"""Fixtures for the reader, importer and fetch tests: tiny files in each format, with known
answers, written by the tests themselves; a progress recorder; the real data folder."""

from __future__ import annotations

import gzip
import json
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from locus._progress import Advance

REAL_DATA = Path(__file__).resolve().parents[3] / "shared" / "locus-data"


@dataclass
class ProgressRecord:
    """What a progress factory was asked to show: one entry per task opened."""

    tasks: list[tuple[str, int | None]] = field(default_factory=list)
    advanced: list[int] = field(default_factory=list)

    @contextmanager
    def __call__(self, description: str, total: int | None = None) -> Iterator[Advance]:
        self.tasks.append((description, total))
        self.advanced.append(0)
        index = len(self.advanced) - 1

        def advance(n: int) -> None:
            self.advanced[index] += n

        yield advance


@pytest.fixture
def progress_record() -> ProgressRecord:
    return ProgressRecord()


@pytest.fixture
def real_data() -> Path:
    """``../shared/locus-data`` beside the repository; skip when this machine lacks it."""
    if not REAL_DATA.is_dir():
        pytest.skip(f"real data not present: {REAL_DATA} (the repo's ../shared/locus-data)")
    return REAL_DATA


# --- MMLU-Pro ---------------------------------------------------------------------------------

MmluRecord = dict[str, object]


def mmlu_record(question_id: int, pred: str | None, **overrides: object) -> MmluRecord:
    """One MMLU-Pro record; the right answer is always ``B`` (answer_index 1)."""
    record: MmluRecord = {
        "question_id": question_id,
        "question": f"Question {question_id}?",
        "options": ["zero", "one", "two", "three"],
        "answer": "B",
        "answer_index": 1,
        "cot_content": "",
        "category": "math" if question_id % 2 else "law",
        "src": "ori_mmlu-test",
        "pred": pred,
        "model_outputs": "The answer is (B)",
    }
    record.update(overrides)
    return record


def write_mmlu_zip(path: Path, records: list[object], member: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(member or path.with_suffix(".json").name, json.dumps(records))
    return path


@pytest.fixture
def mmlu_folder(tmp_path: Path) -> Path:
    """Two LLMs x four questions, with the published files' quirks.

    llm-a: right on 1 and 3, wrong on 2, no answer (pred null) on 4 -> mean 0.5.
    llm-b: options as a Python-list string, answer_index as text, a bare string list item,
    right on 1, 2 and 4 and a revised text for question 3 (wrong) -> mean 0.75.
    Queries: 4 ids, 5 texts (question 3 twice).
    """
    folder = tmp_path / "eval_results"
    folder.mkdir()
    write_mmlu_zip(
        folder / "model_outputs_llm-a_5shots.zip",
        [
            mmlu_record(1, "B"),
            mmlu_record(2, "A"),
            mmlu_record(3, "B"),
            mmlu_record(4, None),
        ],
    )
    write_mmlu_zip(
        folder / "model_outputs_llm-b_5shots.zip",
        [
            mmlu_record(1, "B", options="['zero', 'one', 'two', 'three']", answer_index="1"),
            "total",
            mmlu_record(2, "B"),
            mmlu_record(3, "C", question="Question 3, revised?"),
            mmlu_record(4, "B"),
        ],
    )
    (folder / "SOURCE_COMMIT").write_text("0" * 40 + "\n")
    return folder


# --- EmbedLLM ---------------------------------------------------------------------------------


@pytest.fixture
def embedllm_folder(tmp_path: Path) -> Path:
    """Three LLMs x four prompts; prompts 0-1 in train, 2 in val, 3 in test."""
    folder = tmp_path / "embedllm"
    folder.mkdir()
    pd.DataFrame(
        {"model_id": [0, 1, 2], "model_name": ["org/alpha-7b", "org/beta-13b", "gamma"]}
    ).to_csv(folder / "model_order.csv", index=False)
    pd.DataFrame(
        {
            "prompt_id": [0, 1, 2, 3],
            "prompt": ["What is 2+2?", "Capital of France?", "Spell 'cat'.", "Is 7 prime?"],
            "category": ["math", "geography", "english", "math"],
        }
    ).to_csv(folder / "question_order.csv", index=False)
    for split, prompts in (("train", [0, 1]), ("val", [2]), ("test", [3])):
        rows = [
            {"model_id": m, "prompt_id": p, "label": int((m + p) % 2 == 0)}
            for p in prompts
            for m in range(3)
        ]
        pd.DataFrame(rows).to_csv(folder / f"{split}.csv", index=False)
    return folder


# --- RouterBench ------------------------------------------------------------------------------


def routerbench_frame(n: int = 3, prefix: str = "mbpp.dev") -> pd.DataFrame:
    """``n`` queries x two LLMs (``org/a`` right on even rows, ``b`` always right), with costs."""
    return pd.DataFrame(
        {
            "sample_id": [f"{prefix}.{i}" for i in range(n)],
            "eval_name": ["mbpp"] * n,
            "prompt": [repr([f"Write function number {i}."]) for i in range(n)],
            "org/a": [float(i % 2 == 0) for i in range(n)],
            "b": [1.0] * n,
            "org/a|total_cost": [0.001 * (i + 1) for i in range(n)],
            "b|total_cost": [0.01] * n,
        }
    )


@pytest.fixture
def routerbench_file(tmp_path: Path) -> Path:
    path = tmp_path / "mbpp_train.csv.gz"
    routerbench_frame().to_csv(path, index=False)
    return path


# --- scores JSON ------------------------------------------------------------------------------


def write_json_gz(path: Path, document: object) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(document, handle)
    return path


@pytest.fixture
def scores_json_folder(tmp_path: Path) -> Path:
    """Two files, two LLMs; graded scores."""
    folder = tmp_path / "split"
    folder.mkdir()
    write_json_gz(
        folder / "mmlu_test.json.gz",
        [
            {"question": "Q1\nA. x\nB. y", "scores": {"m/one": 0.25, "two": 1}},
            {"question": "Q2\nA. x\nB. y", "scores": {"m/one": 0.5, "two": 0}},
        ],
    )
    write_json_gz(
        folder / "gsm8k-test.json.gz",
        [{"question": "What is 3*3?", "scores": {"m/one": 1.0, "two": 0.0}, "task": "gsm8k"}],
    )
    return folder


@pytest.fixture
def write_text() -> Callable[[Path, str], Path]:
    """Write UTF-8 text (gzipped when the name ends in .gz) and return the path."""

    def write(path: Path, text: str) -> Path:
        if path.name.endswith(".gz"):
            with gzip.open(path, "wt", encoding="utf-8") as handle:
                handle.write(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    return write


EVAL_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "eval_logs"


def _copy(name: str, tmp_path: Path) -> Path:
    """A copy of the tool-written fixture folder `name` (written by the real tools: see each
    folder's build script), so a test can change it."""
    import shutil

    target = tmp_path / name
    shutil.copytree(EVAL_LOGS / name, target)
    return target


@pytest.fixture
def lm_eval_folder(tmp_path: Path) -> Path:
    """lm-evaluation-harness 0.4.13 --log_samples output: 3 models, 2 tasks, one rerun."""
    return _copy("lm_eval", tmp_path) / "output"


@pytest.fixture
def lm_eval_chat_folder(tmp_path: Path) -> Path:
    """lm-evaluation-harness 0.4.13 --log_samples output of 3 chat-completions runs of tiny_gen
    (local-chat-completions --apply_chat_template against build_chat.sh's scripted endpoint)."""
    return _copy("lm_eval", tmp_path) / "chat_output"


@pytest.fixture
def inspect_folder(tmp_path: Path) -> Path:
    """inspect-ai 0.3.285 logs: 3 models, .eval (zstd) and .json, an epochs run."""
    return _copy("inspect_ai", tmp_path) / "logs"


@pytest.fixture
def helm_folder(tmp_path: Path) -> Path:
    """crfm-helm 0.5.16 runs of simple_mcqa by 3 models (one HELM's own simple model)."""
    return _copy("helm", tmp_path) / "benchmark_output"
