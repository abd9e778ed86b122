"""The importer registry and the contract every importer keeps (one suite, run on each)."""

from __future__ import annotations

import inspect
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from locus.data.batch import ImportBatch
from locus.data.importers import IMPORTERS, get_importer
from locus.errors import LocusInputError

from .conftest import ProgressRecord

FORMATS = (
    "table",
    "mmlu-pro",
    "embedllm",
    "routerbench",
    "scores-json",
    "lm-eval",
    "inspect",
    "helm",
)


def test_registry_names() -> None:
    assert tuple(IMPORTERS) == FORMATS
    for name in FORMATS:
        assert get_importer(name) is IMPORTERS[name]


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        IMPORTERS["new"] = IMPORTERS["table"]  # type: ignore[index]


def test_unknown_format_names_it_and_lists_known() -> None:
    with pytest.raises(LocusInputError) as caught:
        get_importer("helm-lite")
    message = str(caught.value)
    assert "'helm-lite'" in message
    assert all(name in message for name in FORMATS)


@pytest.mark.parametrize("name", FORMATS)
def test_signature(name: str) -> None:
    parameters = inspect.signature(IMPORTERS[name]).parameters
    first = next(iter(parameters.values()))
    assert first.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    for keyword in ("source", "namespace", "progress"):
        assert parameters[keyword].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters["source"].default is None
    assert parameters["namespace"].default is None


# --- contract: every importer, on a tiny valid input of its format ------------------------------


@pytest.fixture
def table_file(tmp_path: Path) -> Path:
    path = tmp_path / "scores.csv"
    path.write_text("llm_id,query_id,query_text,score\na,q1,What?,1\nb,q1,What?,0\n")
    return path


CASES: dict[str, tuple[str, str, tuple[int, int, int]]] = {
    # format: (fixture giving the path, default source, (n_llms, n_queries, n_scores))
    "table": ("table_file", "scores", (2, 1, 2)),
    "mmlu-pro": ("mmlu_folder", "mmlu-pro", (2, 5, 8)),
    "embedllm": ("embedllm_folder", "embedllm", (3, 4, 12)),
    "routerbench": ("routerbench_file", "routerbench", (2, 3, 6)),
    "scores-json": ("scores_json_folder", "scores-json", (2, 3, 6)),
    "lm-eval": ("lm_eval_folder", "lm-eval", (3, 24, 72)),
    "inspect": ("inspect_folder", "inspect", (3, 16, 40)),
    "helm": ("helm_folder", "helm", (3, 6, 18)),
}


@pytest.mark.parametrize("name", FORMATS)
def test_contract_valid_input(
    name: str, request: pytest.FixtureRequest, progress_record: ProgressRecord
) -> None:
    fixture, default_source, counts = CASES[name]
    path: Path = request.getfixturevalue(fixture)
    batch = IMPORTERS[name](path, progress=progress_record)
    assert isinstance(batch, ImportBatch)
    assert batch.source == default_source
    assert batch.origin == str(path)
    assert (batch.n_llms, batch.n_queries, batch.n_scores) == counts
    assert progress_record.tasks, "an importer reports progress"
    for (_, total), advanced in zip(progress_record.tasks, progress_record.advanced, strict=True):
        assert total is None or advanced == total
    assert batch.namespace == default_source, "queries without text live in the source's namespace"
    mine = IMPORTERS[name](path, source="mine")
    assert (mine.source, mine.namespace) == ("mine", "mine")
    shared = IMPORTERS[name](path, source="mine", namespace="bench")
    assert (shared.source, shared.namespace) == ("mine", "bench")
    assert shared.queries.equals(mine.queries) and shared.scores.equals(mine.scores)


@pytest.mark.parametrize("name", FORMATS)
def test_contract_unusable_namespace(name: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(CASES[name][0])
    with pytest.raises(LocusInputError, match=r"namespace name ' bench' is not usable"):
        IMPORTERS[name](path, namespace=" bench")


@pytest.mark.parametrize("name", FORMATS)
def test_contract_missing_path(name: str, tmp_path: Path) -> None:
    absent = tmp_path / "absent.csv"
    with pytest.raises(LocusInputError) as caught:
        IMPORTERS[name](absent)
    assert str(absent) in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name", FORMATS)
def test_contract_empty_input(name: str, tmp_path: Path) -> None:
    """An empty file (or a folder of empty files) is a clear error, not a pandas exception."""
    folder = tmp_path / "empty"
    folder.mkdir()
    names = {
        "table": ["scores.csv"],
        "mmlu-pro": ["model_outputs_x.json"],
        "embedllm": ["model_order.csv", "question_order.csv", "train.csv"],
        "routerbench": ["t.csv"],
        "scores-json": ["s.json"],
        "lm-eval": ["results_2026.json", "samples_t_2026.jsonl"],
        "inspect": ["x.eval"],
        "helm": ["run_spec.json", "scenario_state.json", "per_instance_stats.json"],
    }[name]
    for file_name in names:
        (folder / file_name).write_text("")
    target = folder / names[0] if name == "table" else folder
    with pytest.raises(LocusInputError, match="empty"):
        IMPORTERS[name](target)


@pytest.mark.parametrize("name", ["mmlu-pro", "routerbench", "scores-json"])
def test_contract_folder_without_matching_files(name: str, tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("nothing here")
    with pytest.raises(LocusInputError, match=r"no .* files in this folder"):
        IMPORTERS[name](tmp_path)


@pytest.mark.parametrize(
    ("name", "fixture"),
    [("mmlu-pro", "mmlu_folder"), ("scores-json", "scores_json_folder")],
)
def test_contract_import_is_deterministic(
    name: str, fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    path: Path = request.getfixturevalue(fixture)
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    first, second = IMPORTERS[name](path), IMPORTERS[name](copy)
    assert first.scores.equals(second.scores)
    assert first.queries.equals(second.queries)


def test_importers_take_str_paths(table_file: Path) -> None:
    importer: Callable[..., ImportBatch] = IMPORTERS["table"]
    assert importer(str(table_file)).n_scores == 2
