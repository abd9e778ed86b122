"""Cost routing on the demo: the example price list, and `locus evaluate` on catalog prices
(issue 36, item 1: `--quality 0.95` and `evaluate --plot` after `make demo`)."""

from __future__ import annotations

import shutil
from importlib.resources import as_file, files
from pathlib import Path

import pytest

from locus.cli.demo import EXAMPLE_PRICES, example_prices
from locus.data.llm_catalog import read_llm_catalog
from locus.pipeline import evaluate_workspace, fit_workspace
from locus.store import Store
from tests.conftest import CliResult
from tests.nn.conftest import small_config
from tests.planted_workspace import build_planted_workspace

MMLU_PRO_LLMS = 29


def test_the_example_prices_cover_the_demo_pool_and_say_where_they_come_from() -> None:
    with as_file(files("locus.data.examples") / EXAMPLE_PRICES) as path:
        records = read_llm_catalog(path)
        header = path.read_text(encoding="utf-8").split("llms:")[0]
    assert len({r.llm_id for r in records}) == len(records) == MMLU_PRO_LLMS
    assert all(r.price_in_per_mtok and r.price_out_per_mtok for r in records)
    assert "NOT A QUOTE" in header and "2026-12-04" in header and "late 2024" in header


def test_the_demo_prices_its_llms_once_and_keeps_the_users_prices(tmp_path: Path) -> None:
    path = tmp_path / "ws"
    with Store.open(path) as store:
        store.upsert_llm_metadata([("gemini-1.5-pro-002", {}), ("someone-else", {})])
    example_prices(str(path))
    with Store.open(path) as store:
        metadata = store.llm_metadata()
    assert metadata["gemini-1.5-pro-002"]["price_in_per_mtok"] == 1.25
    assert "price_in_per_mtok" not in metadata["someone-else"]  # not in the list: unpriced
    # a price of the user's own: the example is not imported over it
    with Store.open(path) as store:
        store.upsert_llm_metadata([("gemini-1.5-pro-002", {"price_in_per_mtok": 9.0})])
    example_prices(str(path))
    with Store.open(path) as store:
        assert store.llm_metadata()["gemini-1.5-pro-002"]["price_in_per_mtok"] == 9.0


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A planted workspace without per-query costs, fitted, then every LLM given catalog
    prices: within each group of equal specialists (`<task>-<i>`), dearer as i grows."""
    path = build_planted_workspace(tmp_path_factory.mktemp("priced") / "ws")
    with Store.open(path) as store:
        fit_workspace(store, small_config())
        rows = [
            (llm, {"price_in_per_mtok": 2.0 ** int(llm.split("-")[-1]),
                   "price_out_per_mtok": 4.0 * 2.0 ** int(llm.split("-")[-1])})
            for llm in store.llm_ids()
        ]  # fmt: skip
        store.upsert_llm_metadata(rows)
    return path


def test_evaluate_prices_the_rules_on_catalog_prices_and_says_they_are_estimates(
    priced: Path, run_cli: object, tmp_path: Path
) -> None:
    with Store.open(priced) as store:
        result = evaluate_workspace(store)
    savings = result.savings
    assert savings is not None and savings.estimated
    rules = {(r["rule"], r["setting"]): r for r in savings.rules}
    # the quality rule spends less than accuracy routing and keeps most of its accuracy
    accuracy, quality = rules[("accuracy", None)], rules[("quality", 0.8)]
    assert quality["cost"] < accuracy["cost"]
    assert quality["accuracy"] >= accuracy["accuracy"] - 0.2
    assert savings.strong["cost"] > savings.cheapest["cost"]
    out = tmp_path / "frontier.png"
    workspace = tmp_path / "copy"
    shutil.copytree(priced, workspace)
    done: CliResult = run_cli("evaluate", "-w", workspace, "--plot", out)  # type: ignore[operator]
    assert done.exit_code == 0, done.stderr
    assert "costs estimated: catalog prices" in done.stdout.replace("\n", " ")
    assert out.stat().st_size > 10_000 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    routed: CliResult = run_cli(  # type: ignore[operator]
        "route", "integral of x", "-w", workspace, "--quality", "0.95"
    )
    assert routed.exit_code == 0, routed.stderr
    assert "expected $" in routed.stdout
