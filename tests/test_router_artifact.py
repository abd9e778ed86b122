"""The router artifact (`locus.routing.router_artifact`): every readable format version loads and
routes as it did when written, save -> load gives identical predictions, and an unknown version
is a clear error (fixtures: tests/fixtures/artifacts/, made by its make_fixtures.py)."""

from __future__ import annotations

import doctest
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from locus.artifact import artifact_is_current, formats, read_for_routing
from locus.errors import LocusArtifactError
from locus.pool import artifact_pools
from locus.routing import (
    Evidence,
    KNNRouter,
    LocusRouter,
    NumpyLocusRouter,
    StackedRouter,
    load_router,
    router_artifact,
)
from locus.text import HashingEncoder

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "artifacts"
PROBES: dict[str, Any] = json.loads((FIXTURES / "probes.json").read_text())
NAMES = sorted(PROBES["fixtures"])
# what each fixture's files say: config.json, stacked.json (None: none), knn/ and costs/
VERSIONS = {
    "locus-artifact-1": ("locus-artifact/1", None, None),
    "locus-artifact-2": ("locus-artifact/2", None, 1),
    "locus-stacked-1": ("locus-artifact/3", "locus-stacked/1", 1),
    "locus-stacked-2": ("locus-artifact/3", "locus-stacked/2", 2),
    "locus-stacked-3": ("locus-artifact/3", "locus-stacked/3", 2),
    "locus-stacked-4": ("locus-artifact/3", "locus-stacked/4", 2),
    "locus-stacked-5": ("locus-artifact/3", "locus-stacked/5", 2),
    "locus-stacked-6": ("locus-artifact/3", "locus-stacked/6", 2),
    "locus-folders-3": ("locus-artifact/3", "locus-stacked/6", 3),
}


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return HashingEncoder(PROBES["encoder_dim"]).encode(PROBES["texts"])


def _without_torch(folder: Path) -> router_artifact.RouterArtifact:
    routing = read_for_routing(folder)
    _, pool = artifact_pools(
        routing.llm_ids, routing.llm_embeddings, routing.evidence_counts, routing.manifest
    )
    return router_artifact.load(folder, NumpyLocusRouter(routing.predictor, pool))


def _read(path: Path) -> Any:
    return json.loads(path.read_text())


def test_every_readable_version_has_a_fixture() -> None:
    assert set(NAMES) == set(VERSIONS) and (FIXTURES / "README.md").is_file()
    written = {config for config, _, _ in VERSIONS.values()}
    assert written == set(formats.READABLE_FORMATS)
    assert {s for _, s, _ in VERSIONS.values()} - {None} == set(formats.READABLE_STACKED_FORMATS)
    folders = {f for _, _, f in VERSIONS.values()} - {None}
    assert folders == set(formats.READABLE_ROUTER_FOLDER_FORMATS)
    for name, (config, stacked, folder) in VERSIONS.items():
        root = FIXTURES / name
        assert _read(root / "config.json")["format"] == config
        assert (stacked is None) != (root / "stacked.json").exists()
        if stacked is not None:
            assert _read(root / "stacked.json")["format"] == stacked
        for part in ("knn", "costs"):
            found = (root / part / "router.json").exists()
            assert found == (folder is not None)
            if found:
                assert _read(root / part / "router.json")["format"] == folder
    assert artifact_is_current(FIXTURES / "locus-folders-3")
    assert not artifact_is_current(FIXTURES / "locus-artifact-2")


@pytest.mark.parametrize("name", NAMES)
def test_each_fixture_routes_as_when_it_was_written(name: str, vectors: np.ndarray) -> None:
    expected = PROBES["fixtures"][name]
    for saved in (_without_torch(FIXTURES / name), router_artifact.load(FIXTURES / name)):
        router = saved.router
        assert [d.llm_id for d in router.route(vectors, guarded=False)] == expected["llms"]
        np.testing.assert_allclose(router.predict_proba(vectors), expected["proba"], atol=1e-5)
        has_router = name != "locus-artifact-1"
        assert (router.knn is not None) == has_router and (router.guard is not None) == has_router
        assert (saved.cost_model is not None) == has_router
        assert (saved.validation_vectors is not None) == has_router
    # the planted truth: math, law and biology probes, three of each
    assert expected["llms"] == [f"{task}-0" for task in ("math", "law", "biology") for _ in "abc"]


def test_the_fixtures_of_one_fit_read_the_same_router(vectors: np.ndarray) -> None:
    """The upgrade reproduces each older version's reading: the stacked router of the last
    fixture whose level read the kNN vote raw (locus-stacked/5) and of the older ones is the
    same router; the current fixture is that stack with its level's vote smoothed."""
    current = _without_torch(FIXTURES / "locus-stacked-5")
    smoothed = _without_torch(FIXTURES / "locus-stacked-6").router.stack
    assert current.router.stack is not None and not current.router.stack.smoothed
    assert smoothed is not None and smoothed == replace(current.router.stack, smoothed=True)
    # router folders of format 3 (a task reader where the fit kept one; none here): the same
    newest = _without_torch(FIXTURES / "locus-folders-3").router
    assert newest.stack == smoothed
    np.testing.assert_array_equal(
        newest.predict_proba(vectors),
        _without_torch(FIXTURES / "locus-stacked-6").router.predict_proba(vectors),
    )
    for name in (
        "locus-stacked-4", "locus-stacked-3", "locus-stacked-2", "locus-stacked-1",
        "locus-artifact-2",
    ):  # fmt: skip
        old = _without_torch(FIXTURES / name)
        assert old.router.stack == current.router.stack
        assert old.router.guard == current.router.guard
        assert old.router.thin is None and current.router.thin is None
        np.testing.assert_array_equal(
            old.router.predict_proba(vectors), current.router.predict_proba(vectors)
        )
        assert old.cost_model is not None and current.cost_model is not None
        np.testing.assert_array_equal(
            old.cost_model.predict(vectors), current.cost_model.predict(vectors)
        )
        np.testing.assert_array_equal(old.validation_vectors, current.validation_vectors)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", NAMES)
def test_save_then_load_gives_identical_predictions_in_the_current_format(
    name: str, vectors: np.ndarray, tmp_path: Path
) -> None:
    saved = router_artifact.load(FIXTURES / name)
    folder = router_artifact.save(
        tmp_path / "artifact",
        saved.router,
        cost_model=saved.cost_model,
        validation_vectors=saved.validation_vectors,
    )
    again = router_artifact.load(folder)
    np.testing.assert_array_equal(
        again.router.predict_proba(vectors), saved.router.predict_proba(vectors)
    )
    assert again.router.stack == saved.router.stack and again.router.guard == saved.router.guard
    if saved.cost_model is not None:
        assert again.cost_model is not None
        np.testing.assert_array_equal(
            again.cost_model.predict(vectors), saved.cost_model.predict(vectors)
        )
    np.testing.assert_array_equal(again.validation_vectors, saved.validation_vectors)  # type: ignore[arg-type]
    # written once more, every file is in the current format
    assert artifact_is_current(folder)
    assert _read(folder / "stacked.json")["format"] == formats.STACKED_FORMAT
    for part in ("knn", "costs"):
        if (folder / part / "router.json").exists():
            assert _read(folder / part / "router.json")["format"] == formats.ROUTER_FOLDER_FORMAT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["artifact"]  # no staging left
    # the current fixture's router files come back byte for byte (not the cost model's
    # arrays: `CostModel.load` scales its saved unit rows to unit length once more)
    if name == "locus-folders-3":
        for part in ("stacked.json", "knn/router.json", "knn/arrays.safetensors",
                     "costs/router.json", "costs/validation.safetensors"):  # fmt: skip
            assert (folder / part).read_bytes() == (FIXTURES / name / part).read_bytes(), part


@pytest.mark.parametrize(
    ("file", "key", "version"),
    [
        ("config.json", "format", "locus-artifact/9"),
        ("stacked.json", "format", "locus-stacked/9"),
        ("knn/router.json", "format", 9),
        ("costs/router.json", "format", 9),
    ],
)
def test_an_unknown_version_is_a_clear_error(
    file: str, key: str, version: object, tmp_path: Path
) -> None:
    folder = tmp_path / "newer"
    shutil.copytree(FIXTURES / "locus-stacked-3", folder)
    (folder / file).write_text(json.dumps({**_read(folder / file), key: version}))
    with pytest.raises(LocusArtifactError) as caught:
        router_artifact.load(folder)
    message = str(caught.value)
    assert str(folder / file) in message and repr(version) in message
    readable = {
        "config.json": formats.READABLE_FORMATS,
        "stacked.json": formats.READABLE_STACKED_FORMATS,
    }.get(file, formats.READABLE_ROUTER_FOLDER_FORMATS)
    assert all(repr(v) in message for v in readable) and "re-run `locus fit`" in message


def test_a_router_folder_of_format_1_with_a_task_vote_lets_every_row_vote(
    tmp_path: Path,
) -> None:
    from safetensors.numpy import load_file, save_file

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(60, 8)).astype(np.float32)
    scores = (rng.random((60, 2)) < 0.5).astype(np.float32)
    tasks = tuple(("a", "b")[i % 2] for i in range(60))
    router = KNNRouter(k=5).fit(Evidence(vectors, scores, ("x", "y"), tasks))
    router.save(tmp_path / "knn")
    arrays = load_file(str(tmp_path / "knn" / "arrays.safetensors"))
    arrays.pop("task_voting_rows")  # as routers saved before joined rows stopped voting
    save_file(arrays, str(tmp_path / "knn" / "arrays.safetensors"))
    description = _read(tmp_path / "knn" / "router.json")
    for added in ("search", "ann_from"):
        description.pop(added)
    (tmp_path / "knn" / "router.json").write_text(json.dumps({**description, "format": 1}))
    loaded = load_router(tmp_path / "knn")
    assert isinstance(loaded, KNNRouter) and loaded.task_vote_ is not None
    assert loaded.task_vote_.voting_rows == 60
    a, b = loaded.votes(vectors, [5], tasks=True), router.votes(vectors, [5], tasks=True)
    np.testing.assert_array_equal(a.by_k[5], b.by_k[5])
    assert a.tasks is not None and b.tasks is not None
    np.testing.assert_array_equal(a.tasks, b.tasks)


def test_a_stacked_router_over_numpy_cannot_save_its_networks(tmp_path: Path) -> None:
    from locus.errors import LocusInputError

    numpy_side = _without_torch(FIXTURES / "locus-stacked-3").router
    with pytest.raises(LocusInputError, match="cannot save its LOCUS part"):
        router_artifact.save(tmp_path / "again", numpy_side)
    assert not (tmp_path / "again").exists()
    torch_side = router_artifact.load(FIXTURES / "locus-stacked-3").router
    assert isinstance(torch_side.locus, LocusRouter)
    again = router_artifact.save(tmp_path / "again", torch_side)
    assert isinstance(router_artifact.load(again).router, StackedRouter)


def test_the_format_history_examples_run() -> None:
    result = doctest.testmod(formats)
    assert result.attempted > 0 and result.failed == 0
