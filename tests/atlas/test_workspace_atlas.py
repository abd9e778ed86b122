"""The atlas commands on a trained planted workspace: three task groups of four LLMs each."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locus.atlas.identification import identify_endpoints
from locus.atlas.pool_atlas import WorkspaceAtlas
from locus.atlas.probe_file import ProbeEvidence
from locus.errors import LocusInputError, LocusNotFoundError
from locus.pipeline import load_workspace_locus
from locus.store import Store
from tests.conftest import CliResult
from tests.planted_workspace import planted_rows, trained_planted_workspace

Run = Callable[..., CliResult]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained_planted_workspace(tmp_path_factory.mktemp("atlas") / "ws")


def group(llm_id: str) -> str:
    return llm_id.split("-")[0]


def test_the_pool_as_arrays_and_its_geometry(trained: Path) -> None:
    with Store.open(trained) as store:
        atlas = WorkspaceAtlas(store)
        assert len(atlas.llm_ids) == 12
        assert atlas.test_scores.shape == atlas.test_proba.shape
        assert atlas.test_scores.shape[1] == 12
        for llm in atlas.llm_ids:
            assert all(group(n["llm_id"]) == group(llm) for n in atlas.similar(llm, 3))
        report = atlas.geometry()
        assert report.pearson > 0.6 and report.neighbour_agreement[0] > report.mean_agreement
        clusters = atlas.clusters(k=3)
        assert atlas.family_agreement(clusters) == pytest.approx(1.0)  # families from names
        assert atlas.clusters().k == 3  # chosen by silhouette
        picked = atlas.portfolio(3, "k-center")
        assert {group(atlas.llm_ids[i]) for i in picked} == {"math", "law", "biology"}
        one_group = [i for i, llm in enumerate(atlas.llm_ids) if group(llm) == "math"][:3]
        assert atlas.portfolio_accuracy(picked) > atlas.portfolio_accuracy(one_group) + 0.2
        retention = atlas.retention()
        assert retention.nearest_retention > 0.9
        with pytest.raises(LocusNotFoundError, match="did you mean 'math-0', 'math-1' or 'math-2'"):
            atlas.similar("math-")
        with pytest.raises(LocusInputError, match="no LLM of the pool has params_b"):
            atlas.budget_portfolio(max_params=1e9)


def test_identify_and_search_with_the_real_encoder(trained: Path) -> None:
    with Store.open(trained) as store:
        model = load_workspace_locus(store)
        atlas = WorkspaceAtlas(store, embed=model.embed_many)
        draw = atlas.fingerprint_draw(64, seed=0)
        distances = draw.distances()
        # an LLM's two halves lie nearer each other than most strangers do
        same, different = draw.same_and_different(float("inf"))
        assert np.median(same) < np.median(different)
        rows = atlas.scores()
        column = atlas.llm_ids.index("law-1")
        scored = np.random.default_rng(0).permutation(np.flatnonzero(~np.isnan(rows[:, column])))
        scored = scored[:150]  # of every task: on one task alone, law and math LLMs look alike
        texts = [atlas.data.table.query_texts[i] or "" for i in scored]
        vectors, scores = atlas.data.vectors[scored], rows[scored, column]
        # queries the pool was scored on: law-1's own scores are law-1, by agreement
        [own] = identify_endpoints(atlas, {"probe": ProbeEvidence(vectors, scores, texts)})
        assert own["mode"] == "shared queries" and own["verdict"] == "law-1"
        assert own["matches"][0] == {
            "llm_id": "law-1",
            "agreement": 1.0,
            "shared": 150,
            "same": True,
        }
        assert not own["matches"][1]["same"]
        # the same scores on queries no known LLM saw: a law LLM, by tasks and embedding
        unseen = [f"{t} (reworded)" for t in texts]
        [new] = identify_endpoints(atlas, {"probe": ProbeEvidence(vectors, scores, unseen)})
        assert new["mode"] == "new queries" and group(new["matches"][0]["llm_id"]) == "law"
        assert new["calibration"]["identification"] > 1 / 12
        assert distances.shape == (12, 12)
        found = atlas.search({"law": 0.9, "math": 0.2, "biology": 0.2}, top=4, n=2048)
        assert group(found[0]["llm_id"]) == "law"
        assert found[0]["measured"]["law"] > 0.8
        recall = atlas.recall(n=1024, ks=(4,))
        assert recall["recall"]["4"] >= 0.75  # the group of 4 is found


def graded_rows() -> pd.DataFrame:
    """8 LLMs with graded scores (a judge's preference in [0, 1]): the planted pool with three
    LLMs per task group, one dropped, scores spread around 0.15 (wrong) and 0.85 (right)."""
    rows = planted_rows(llms_per_group=3)
    rows = rows[rows["llm_id"] != "biology-2"].copy()
    noise = np.random.default_rng(1).normal(0, 0.08, len(rows))
    rows["score"] = np.clip(0.15 + 0.7 * rows["score"] + noise, 0, 1).round(2)
    return rows


def _measured_profile(atlas: WorkspaceAtlas, llm: str) -> dict[str, float]:
    tasks = atlas.tasks()
    scores = atlas.scores()[:, atlas.index(llm)]
    keep = atlas.data.splits != "test"
    return {t: float(np.nanmean(scores[keep & (tasks == t)])) for t in sorted(set(tasks))}


def test_identify_on_a_small_graded_pool(run_cli: Run, tmp_path: Path) -> None:
    """The issue's case: one LLM's own training scores (graded, 400 of them) identify it."""
    workspace = trained_planted_workspace(tmp_path / "graded", graded_rows())
    rows = graded_rows()
    with Store.open(workspace) as store:
        atlas = WorkspaceAtlas(store)
        train = {atlas.data.table.query_texts[i] for i in atlas.data.rows("train")}
    for llm in ("law-0", "math-2"):
        own = rows[(rows["llm_id"] == llm) & rows["query_text"].isin(train)].head(400)
        path = tmp_path / f"{llm}.csv"
        own[["query_text", "score"]].to_csv(path, index=False)
        found = run_cli("identify", path, "-w", workspace, "--json")
        assert found.exit_code == 0, found.stderr
        [result] = found.json()  # type: ignore[misc]
        assert result["verdict"] == llm and result["matches"][0]["agreement"] == 1.0
        assert result["matches"][1]["agreement"] < result["threshold"]
    # the search case: a profile equal to an LLM's measured profile finds it first
    with Store.open(workspace) as store:
        model = load_workspace_locus(store)
        atlas = WorkspaceAtlas(store, embed=model.embed_many)
        measured = atlas.search({"law": 0.5}, top=8)
        for row in measured[:3]:
            profile = {t: float(v) for t, v in row["measured"].items()}
            full = atlas.search(
                {t: round(r, 2) for t, r in _measured_profile(atlas, row["llm_id"]).items()},
                top=2,
            )
            assert full[0]["llm_id"] == row["llm_id"], (profile, full)


def test_every_view_reads_one_family_source(trained: Path, run_cli: Run, tmp_path: Path) -> None:
    """The catalog's family where it gives one, else the name's guess said as a guess: in
    `similar`, `cluster` and the atlas's colourings alike."""
    import shutil

    from locus.atlas.page import GUESSED_FAMILY, colourings

    workspace = tmp_path / "ws"
    shutil.copytree(trained, workspace)
    with Store.open(workspace) as store:
        store.upsert_llm_metadata([("math-1", {"family": "maths-lab"})])
    payload = run_cli("similar", "math-0", "--k", "3", "-w", workspace, "--json").json()
    assert isinstance(payload, dict)
    found = {n["llm_id"]: (n["family"], n["family_source"]) for n in payload["neighbours"]}
    assert found["math-1"] == ("maths-lab", "catalog")
    assert {v for k, v in found.items() if k != "math-1"} <= {("math", "name")}
    text = run_cli("similar", "math-0", "--k", "3", "-w", workspace).stdout
    assert "maths-lab" in text and "maths-lab (guessed)" not in text
    cluster = run_cli("cluster", "--k", "3", "-w", workspace, "--json").json()
    assert isinstance(cluster, dict)
    assert cluster["families_from"] == "LLM catalog (11 of 12 guessed from their names)"
    with Store.open(workspace) as store:
        atlas = WorkspaceAtlas(store)
        shown = colourings(atlas, [0] * len(atlas.llm_ids))
    assert shown.values["family"] == [
        "maths-lab" if llm == "math-1" else None for llm in atlas.llm_ids
    ]
    # the colouring by the names' guess is offered beside the catalog's, named as a guess
    assert shown.values[GUESSED_FAMILY] == [llm.split("-")[0] for llm in atlas.llm_ids]


def test_atlas_commands(trained: Path, run_cli: Run, tmp_path: Path) -> None:
    similar = run_cli("similar", "math-0", "--k", "3", "-w", trained, "--json")
    assert similar.exit_code == 0, similar.stderr
    payload = similar.json()
    assert isinstance(payload, dict)
    assert [group(n["llm_id"]) for n in payload["neighbours"]] == ["math"] * 3
    text = run_cli("similar", "math-0", "-w", trained)
    assert text.exit_code == 0 and "agreement" in text.stdout
    # no catalog families: every family shown is the name's guess, and says so
    assert {n["family_source"] for n in payload["neighbours"]} == {"name"}
    assert "math (guessed)" in text.stdout and "the LLM catalog gives none" in text.stdout
    geometry = run_cli("geometry", "-w", trained, "--json").json()
    assert isinstance(geometry, dict) and geometry["pairs"] == 66
    png = tmp_path / "tree.png"
    cluster = run_cli("cluster", "--k", "3", "-w", trained, "--dendrogram", png, "--json").json()
    assert isinstance(cluster, dict) and cluster["family_ari"] == pytest.approx(1.0)
    assert png.stat().st_size > 10_000
    curves = tmp_path / "portfolios.png"
    portfolio = run_cli(
        "portfolio", "--k", "3", "-w", trained, "--json", "--draws", "10", "--plot", curves
    ).json()
    assert isinstance(portfolio, dict) and curves.stat().st_size > 10_000
    assert {group(llm) for llm in portfolio["members"]} == {"math", "law", "biology"}
    assert portfolio["hit@1"] > portfolio["random_hit@1"]["mean"]
    proxy = run_cli("proxy", "law-2", "-w", trained)
    assert proxy.exit_code == 0 and "Fallback order" in proxy.stdout
    # one proxy order everywhere: the CLI's default is the atlas page's (by predicted success)
    listed = run_cli("proxy", "law-2", "-w", trained, "--json").json()
    assert isinstance(listed, dict) and listed["by"] == "predicted"
    with Store.open(trained) as store:
        atlas = WorkspaceAtlas(store)
        page_order = [row["llm_id"] for row in atlas.proxies("law-2", 5, by="predicted")]
    assert [row["llm_id"] for row in listed["proxies"]] == page_order
    html = tmp_path / "atlas.html"
    made = run_cli("atlas", "--out", html, "-w", trained, "--png", tmp_path / "map.png", "--json")
    assert made.exit_code == 0, made.stderr
    page = html.read_text(encoding="utf-8")
    assert all(f'"{llm}"' in page for llm in planted_rows()["llm_id"].unique())
    assert (tmp_path / "map.png").stat().st_size > 10_000
    # the PNG draws what the page shows first: its projection and its colouring
    summary = made.json()
    assert isinstance(summary, dict)
    shown = page.split('id="atlas-data">', 1)[1]
    first = json.loads(shown.split("</script>", 1)[0])
    assert summary["projection"] == next(iter(first["projections"]))
    assert summary["colour_by"] == first["colour_by"][0] == "cluster"
    help_text = " ".join(run_cli("atlas", "--help").stdout.replace("│", " ").split())
    assert "the page's default view" in help_text and "t-SNE map" not in help_text


def test_identify_and_search_commands(trained: Path, run_cli: Run, tmp_path: Path) -> None:
    rows = planted_rows()
    probe = rows[rows["llm_id"] == "biology-2"].sample(140, random_state=0)
    path = tmp_path / "endpoint.csv"
    probe[["query_text", "score"]].to_csv(path, index=False)
    found = run_cli("identify", path, "-w", trained, "--json")
    assert found.exit_code == 0, found.stderr
    [result] = found.json()  # type: ignore[misc]
    assert result["endpoint"] == "endpoint" and result["mode"] == "shared queries"
    assert result["verdict"] == "biology-2"
    shown = run_cli("identify", path, "-w", trained)
    assert shown.exit_code == 0 and "the same LLM as biology-2" in " ".join(shown.stdout.split())
    assert "agreement" in shown.stdout
    reworded = probe.assign(query_text=probe["query_text"] + " (reworded)")
    reworded[["query_text", "score"]].to_csv(path, index=False)
    fresh = run_cli("identify", path, "-w", trained)
    assert fresh.exit_code == 0, fresh.stderr
    words = " ".join(fresh.stdout.split())
    assert "new queries" in words and "chosen on the pool" in words
    search = run_cli(
        "search", "--profile", "math=0.9,law=0.2", "--queries", "512", "-w", trained, "--json"
    ).json()
    assert isinstance(search, dict) and group(search["matches"][0]["llm_id"]) == "math"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("similar", "gpt-5"), "unknown LLM 'gpt-5'"),
        (("cluster", "--k", "2", "--threshold", "1"), "not both"),
        (("cluster", "--k", "40"), "expected 1 to 12"),
        (("portfolio",), "exactly one of --k"),
        (("portfolio", "--max-usd", "1"), "no LLM of the pool has cost_per_query"),
        (("portfolio", "--k", "3", "--method", "best"), "expected k-center or k-medoids"),
        (("search", "--profile", "chemistry=0.5"), "the pool's tasks are: biology, law, math"),
        (("search", "--profile", "math=2"), "rate in [0, 1]"),
        (("geometry", "--metric", "manhattan"), "expected one of euclidean, cosine"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    trained: Path, run_cli: Run, args: tuple[str, ...], message: str
) -> None:
    result = run_cli(*args, "-w", trained)
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_identify_rejects_bad_files(trained: Path, run_cli: Run, tmp_path: Path) -> None:
    cases = {
        "empty.csv": ("", "empty"),
        "no-score.csv": ("query_text\nhello\n", "no 'score' column"),
        "bad-score.csv": ("query_text,score\nhello,1.5\n", "line 2: score"),
        "no-text.jsonl": ('{"query_text": " ", "score": 1}\n', "empty query_text"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_text(content, encoding="utf-8")
        result = run_cli("identify", path, "-w", trained)
        assert result.exit_code == 2, (name, result.stdout)
        assert message in result.stderr, (name, result.stderr)
    missing = run_cli("identify", tmp_path / "nowhere.csv", "-w", trained)
    assert missing.exit_code == 2
    frame = pd.DataFrame({"query_text": ["a"], "score": [1.0]})
    assert not frame.empty


def test_the_atlas_runs_without_torch(trained: Path) -> None:
    """Everything but embedding new evidence works on numpy: torch is never imported."""
    import json
    import subprocess
    import sys

    script = (
        "import json, sys\n"
        "from locus.store import Store\n"
        "from locus.atlas.pool_atlas import WorkspaceAtlas\n"
        "from locus.atlas.page import atlas_payload\n"
        "from locus.atlas.html import atlas_html\n"
        f"store = Store.open({str(trained)!r}, create=False)\n"
        "atlas = WorkspaceAtlas(store)\n"
        "page = atlas_html(atlas_payload(atlas))\n"
        "near = atlas.similar('law-0', 1)[0]['llm_id']\n"
        "atlas.geometry(); atlas.clusters(); atlas.retention(); atlas.portfolio(3, 'k-medoids')\n"
        "print(json.dumps({'near': near, 'torch': 'torch' in sys.modules, 'page': len(page)}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["near"].startswith("law-") and result["page"] > 1_000_000
    assert result["torch"] is False


def test_the_default_view_is_the_projection_that_keeps_the_most_neighbours(trained: Path) -> None:
    from locus.atlas.page import atlas_payload

    with Store.open(trained) as store:
        payload = atlas_payload(WorkspaceAtlas(store), max_portfolio=3)
    kept = payload["projection_kept"]
    first = next(iter(payload["projections"]))
    assert kept[first] == max(kept.values())
    assert (
        f"shown: {first}, the projection that keeps the most true neighbours"
        in (payload["subtitle"])
    )
    assert payload["projection_k"] == 5  # 12 LLMs: at most half the other 11


@pytest.fixture
def copied(trained: Path, tmp_path: Path) -> Path:
    """A copy of the trained planted workspace, for a test that changes it."""
    import shutil

    return Path(shutil.copytree(trained, tmp_path / "copy"))


def test_an_onboarded_llm_without_test_scores_maps_without_warnings(copied: Path) -> None:
    """The issue's "Mean of empty slice": an LLM onboarded from a few training queries has no
    test score, and its proxies' measured means were a numpy warning (an error under -W error);
    now they are None and the page builds."""
    import warnings

    from locus.atlas.page import atlas_payload
    from locus.data.batch import ImportBatch
    from locus.pipeline.embed import embed_workspace_llms

    with Store.open(copied) as store:
        atlas = WorkspaceAtlas(store)
        train = {atlas.data.table.query_ids[i] for i in atlas.data.rows("train")}
        rows = planted_rows()
        newcomer = rows[(rows["llm_id"] == "law-0") & rows["query_id"].isin(train)].head(40)
        store.write_batch(
            ImportBatch.from_long(
                newcomer.assign(llm_id="newcomer"), source="onboard:newcomer", origin="probe.csv"
            ),
            kind="table",
        )
        embed_workspace_llms(store, ["newcomer"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Store.open(copied) as store:
            atlas = WorkspaceAtlas(store)
            assert "newcomer" in atlas.llm_ids
            column = atlas.llm_ids.index("newcomer")
            assert np.isnan(atlas.test_scores[:, column]).all()  # no test score at all
            near = atlas.proxies("math-0", len(atlas.llm_ids) - 1, by="predicted")
            assert {row["llm_id"]: row["measured"] for row in near}["newcomer"] is None
            payload = atlas_payload(atlas, max_portfolio=3)
    assert "newcomer" in {llm["llm_id"] for llm in payload["llms"]}


def test_families_come_from_the_catalog_and_a_guess_says_it_is_one(
    copied: Path, run_cli: Run, tmp_path: Path
) -> None:
    from locus.atlas.page import GUESSED_FAMILY, atlas_payload
    from locus.palette import family_colour

    with Store.open(copied) as store:
        guessed = atlas_payload(WorkspaceAtlas(store), max_portfolio=2)
    # no catalog: coloured by cluster, and the page says why; the names' guess is labelled one
    assert guessed["colour_by"] == ["cluster", GUESSED_FAMILY]
    assert "the LLM catalog gives no families" in guessed["colour_notes"]["cluster"]
    assert "guess" in guessed["colour_notes"][GUESSED_FAMILY]
    assert all("family" not in llm for llm in guessed["llms"])
    catalog = tmp_path / "catalog.csv"
    names = {"math": "Euler", "law": "Solon", "biology": "Darwin"}
    lines = ["llm_id,family"] + [f"{g}-{i},{names[g]}" for g in names for i in range(4)]
    catalog.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert run_cli("import", "llms", catalog, "-w", copied).exit_code == 0
    with Store.open(copied) as store:
        atlas = WorkspaceAtlas(store)
        payload = atlas_payload(atlas, max_portfolio=2)
    assert payload["colour_by"] == ["family", "cluster"]  # no guess where the catalog says
    assert {llm["llm_id"]: llm["family"] for llm in payload["llms"]} == {
        llm: names[group(llm)] for llm in atlas.llm_ids
    }
    assert payload["colours"]["family"] == {name: family_colour(name) for name in names.values()}
    assert payload["colour_notes"]["family"] == "from the LLM catalog: 3 families"


def _pool(families: list[str | None]) -> object:
    """What `colourings` reads of a WorkspaceAtlas."""
    from types import SimpleNamespace

    return SimpleNamespace(
        llm_ids=[f"acme/{i}" for i in range(len(families))],
        catalog_families=families,
        guessed_families=["acme"] * len(families),
    )


@pytest.mark.parametrize(
    ("families", "default", "why"),
    [
        ([f"family-{i}" for i in range(20)], "cluster", "20 families are too many"),
        (["a", "b", "c"] + [None] * 9, "cluster", "families for only 3 of 12 LLMs"),
        (["a", "b"] * 5 + [None] * 2, "family", None),
    ],
)
def test_the_default_colouring_is_families_only_when_they_fit_a_legend(
    families: list[str | None], default: str, why: str | None
) -> None:
    from locus.atlas.page import GUESSED_FAMILY, colourings

    found = colourings(_pool(families), [i % 3 for i in range(len(families))])  # type: ignore[arg-type]
    assert found.default == default
    if why is not None:
        assert why in found.notes["cluster"]
    assert len(found.colours("family")) <= 12
    assert (GUESSED_FAMILY in found.fields) == (None in families)
