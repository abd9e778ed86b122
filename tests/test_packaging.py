"""The packaging claims: routing and serving load none of the train and fast extras' packages;
a command that needs a missing extra says which one; the version is written in one place."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

import locus
from locus.extras import EXTRA_OF, MissingExtraError, needs_extra
from locus.store import Store
from tests.nn.conftest import small_config
from tests.planted_workspace import build_planted_workspace, planted_rows

REPO = Path(__file__).resolve().parents[1]
# what a core or `serve` install lacks (the train and fast extras, and plots)
HEAVY = ("torch", "sentence_transformers", "transformers", "onnx", "model2vec", "numba", "faiss",
         "matplotlib", "plotly")  # fmt: skip
# the modules that import one of them when imported, by design: the networks (train) and the
# compiled vote pass (fast, which routing loads only for a batch over many one-LLM groups)
NEEDS_AN_EXTRA = (
    "locus.locus",
    "locus.nn",
    "locus.artifact.torch_io",
    "locus.pipeline.fit",
    "locus.pipeline.embed",
    "locus.pipeline.evaluate_folds",
    "locus.pipeline.onboard",
    "locus.routing.vote_kernel",
)


def _python(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=180,
        cwd=REPO,
    )  # fmt: skip


def _last_json(done: subprocess.CompletedProcess[str]) -> dict:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _modules() -> list[str]:
    """Every module of the package, read from its files (a walk by import would load them)."""
    root = Path(locus.__file__).parent
    names = []
    for file in sorted(root.rglob("*.py")):
        parts = file.relative_to(root.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_only_the_networks_and_the_compiled_pass_import_train_or_fast_packages() -> None:
    kept = [
        n for n in _modules() if not any(n == s or n.startswith(s + ".") for s in NEEDS_AN_EXTRA)
    ]
    assert len(kept) > 100 and "locus.routing.stacked" in kept and "locus.server.app" in kept
    script = (
        "import importlib, json, sys\n"
        "for name in sys.argv[1:]:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps([h for h in {HEAVY!r} if h in sys.modules]))\n"
    )
    done = _python(script, *kept)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("lean") / "ws")
    build_planted_workspace(path, planted_rows(queries_per_task=60))
    from locus.pipeline import fit_workspace

    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=10))
    return path


def test_routing_evaluating_and_serving_a_text_load_no_extra_but_serve(fitted: Path) -> None:
    script = (
        "import json, sys\n"
        "from fastapi.testclient import TestClient\n"
        "from locus.cli import main\n"
        "from locus.server.app import build_app\n"
        "from locus.store import Store\n"
        "workspace = sys.argv[1]\n"
        "for args in (['route', 'integral derivative matrix'], ['evaluate']):\n"
        "    sys.argv = ['locus', *args, '-w', workspace, '--json']\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit as done:\n"
        "        assert done.code == 0, done.code\n"
        "with Store.open(workspace, create=False) as store:\n"
        "    with TestClient(build_app(store, auth=False)) as client:\n"
        "        routed = client.post('/v1/route', json={'text': 'cell enzyme protein'})\n"
        f"print(json.dumps({{'status': routed.status_code, 'loaded': [h for h in {HEAVY!r} "
        "if h in sys.modules]}))\n"
    )
    result = _last_json(_python(script, str(fitted)))
    assert result == {"status": 200, "loaded": []}


def test_a_command_without_its_extra_names_the_extra(fitted: Path) -> None:
    # torch made unimportable, as on an install without the train extra
    script = (
        "import sys\n"
        "sys.modules['torch'] = None\n"
        "from locus.cli import main\n"
        "sys.argv = ['locus', 'fit', '-w', sys.argv[1]]\n"
        "main()\n"
    )
    done = _python(script, str(fitted))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "error: `locus fit` needs the train extra (torch is not installed); install it with "
        "pip install 'locus[train]'"
    )


_KNN_BATCH = (
    "import json, sys\n"
    "import numpy as np\n"
    "from locus.routing.evidence import Evidence\n"
    "from locus.routing.neighbours import KNNRouter\n"
    "rng = np.random.default_rng(5)\n"
    "scores = rng.random((300, 24)).astype(np.float32)\n"
    "scores[rng.random((300, 24)) < 0.4] = np.nan  # every LLM on queries of its own\n"
    "vectors = rng.normal(size=(300, 8)).astype(np.float32)\n"
    "router = KNNRouter(k=5).fit(Evidence(vectors, scores, tuple(f'm{i}' for i in range(24))))\n"
    "assert router._singles() is not None\n"
    "proba = router.predict_proba(rng.normal(size=(32, 8)).astype(np.float32))\n"
    "compiled = 'locus.routing.vote_kernel' in sys.modules\n"
    "print(json.dumps({'proba': proba.tolist(), 'compiled': compiled}))\n"
)


def test_knn_votes_over_many_one_llm_groups_need_no_numba() -> None:
    # a batch of 32 queries would wait for the compiled pass; without numba, numpy's serves
    compiled = _last_json(_python(_KNN_BATCH))
    plain = _last_json(_python("import sys\nsys.modules['numba'] = None\n" + _KNN_BATCH))
    assert compiled["compiled"] is True and plain["compiled"] is False
    assert plain["proba"] == compiled["proba"]  # the same figures, bit for bit


def test_needs_extra_names_the_extra_and_leaves_other_import_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    expected = r"^the minilm encoder needs the train extra"
    with pytest.raises(MissingExtraError, match=expected), needs_extra("the minilm encoder"):
        import sentence_transformers  # noqa: F401
    # a module of no extra: a broken install, reported as it is
    with pytest.raises(ModuleNotFoundError), needs_extra("anything"):
        import locus_no_such_module  # noqa: F401


def test_every_extra_named_is_declared_and_all_holds_the_features() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert set(EXTRA_OF.values()) <= set(extras)
    assert extras["all"] == ["locus[train,serve,fast,plots,bandits]"]
    for heavy in ("torch", "sentence-transformers", "numba", "faiss-cpu", "onnxruntime"):
        assert not any(dep.startswith(heavy) for dep in project["dependencies"]), heavy


def test_the_version_is_written_in_one_place() -> None:
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "locus._version.__version__"
    }
    assert importlib.metadata.version("locus") == locus.__version__
