"""The LLM catalog: `locus import llms` from CSV and YAML, validated at the boundary."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from locus.data.llm_catalog import Endpoint, read_llm_catalog
from locus.errors import LocusInputError
from locus.store import Store
from tests.conftest import CliResult

Run = Callable[..., CliResult]

HEADER = (
    "llm_id,display_name,family,params,price_in_per_mtok,price_out_per_mtok,base_url,"
    "upstream_model,api_key_env\n"
)
CSV = (
    HEADER
    + """gpt-4o,GPT-4o,gpt,,2.5,10,https://api.openai.com/v1/,gpt-4o-2024-08-06,OPENAI_API_KEY
llama-70b,Llama 3.1 70B,llama,70e9,0.5,0.5,http://127.0.0.1:8000/v1,,
"""
)

YAML = """llms:
  - llm_id: gpt-4o
    cost_per_query: 0.002
  - llm_id: claude
    family: claude
    params_b: 175
"""


def test_csv_and_yaml_catalogs_read_and_merge_in_the_store(tmp_path: Path) -> None:
    csv = tmp_path / "llms.csv"
    csv.write_text(CSV, encoding="utf-8")
    records = read_llm_catalog(csv)
    assert [r.llm_id for r in records] == ["gpt-4o", "llama-70b"]
    assert records[0].endpoint == Endpoint(
        "https://api.openai.com/v1", "gpt-4o-2024-08-06", "OPENAI_API_KEY"
    )
    assert records[1].params_b == pytest.approx(70.0)
    assert records[1].endpoint == Endpoint("http://127.0.0.1:8000/v1", "llama-70b", None)
    yaml = tmp_path / "more.yaml"
    yaml.write_text(YAML, encoding="utf-8")
    with Store.open(tmp_path / "ws") as store:
        first = store.upsert_llm_metadata([(r.llm_id, r.metadata()) for r in records])
        assert first == {"new": 2, "updated": 0}
        again = store.upsert_llm_metadata([(r.llm_id, r.metadata()) for r in records])
        assert again == {"new": 0, "updated": 0}
        more = read_llm_catalog(yaml)
        assert store.upsert_llm_metadata([(r.llm_id, r.metadata()) for r in more]) == {
            "new": 1,
            "updated": 1,
        }
        stored = store.llm_metadata()
    assert stored["gpt-4o"]["cost_per_query"] == pytest.approx(0.002)
    assert stored["gpt-4o"]["price_in_per_mtok"] == pytest.approx(2.5)  # kept
    assert Endpoint.from_json(stored["gpt-4o"]["endpoint"]) == records[0].endpoint
    assert stored["claude"] == {"family": "claude", "params_b": 175.0}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("llm_id,params_b\n,3\n", "line 2: no llm_id"),
        ("llm_id,params_b\na,-3\n", "params_b '-3' for 'a'; expected a number >= 0"),
        ("llm_id,params_b\na,many\n", "expected a number >= 0"),
        ("llm_id,colour\na,red\n", "unknown column 'colour'"),
        ("llm_id\na\na\n", "given twice"),
        ("llm_id,base_url\na,api.example.com\n", "expected an http(s) URL"),
        (
            "llm_id,base_url,api_key_env\na,https://x.test/v1,sk-abcdef0123456789\n",
            "never the key",
        ),
        ("llm_id,api_key_env\na,OPENAI_API_KEY\n", "without a base_url"),
        ("llm_id,params,params_b\na,7e9,7\n", "give one"),
        ("llm_id\n", "no LLMs"),
    ],
)
def test_bad_catalog_rows_are_one_line_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "llms.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(LocusInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_llm_catalog(path)


def test_bad_yaml_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "llms.yaml"
    path.write_text("llms: [a, b\n", encoding="utf-8")
    with pytest.raises(LocusInputError, match="not valid YAML"):
        read_llm_catalog(path)
    path.write_text("just text\n", encoding="utf-8")
    with pytest.raises(LocusInputError, match="expected a list of LLMs"):
        read_llm_catalog(path)


def test_import_llms_command_and_llms_listing(
    tmp_path: Path, run_cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "220")  # the table's cells unfolded
    path = tmp_path / "llms.csv"
    path.write_text(CSV, encoding="utf-8")
    ws = tmp_path / "ws"
    done = run_cli("import", "llms", path, "-w", ws, "--json")
    assert done.exit_code == 0, done.stderr
    assert done.json() == {"llms": 2, "with_endpoint": 2, "new": 2, "updated": 0}
    listed = run_cli("llms", "-w", ws, "--json").json()
    assert isinstance(listed, list)
    by_id = {row["llm_id"]: row for row in listed}
    assert by_id["gpt-4o"]["endpoint"]["api_key_env"] == "OPENAI_API_KEY"
    shown = run_cli("llms", "-w", ws)
    assert shown.exit_code == 0 and "gpt-4o-2024-08-06 at https://api.openai.com/v1" in shown.stdout
    bad = run_cli("import", "llms", "-w", ws)
    assert bad.exit_code == 2 and "expected one catalog FILE" in bad.stderr


def test_a_price_list_in_the_users_own_columns(tmp_path: Path, run_cli: Run) -> None:
    """The columns people have (`model,input_usd_per_1m,output_usd_per_1m`) are recognised and
    said; any other column is mapped with -c; a mapping to no catalog column is refused."""
    path = tmp_path / "prices.csv"
    path.write_text("model,input_usd_per_1m,output_usd_per_1m\ngpt-x,2.5,10\nmini,0.15,0.6\n")
    ws = tmp_path / "ws"
    done = run_cli("import", "llms", path, "-w", ws)
    assert done.exit_code == 0, done.stderr
    assert "price_in_per_mtok <- 'input_usd_per_1m'" in done.stdout + done.stderr
    from locus.store import Store

    with Store.open(ws, create=False) as store:
        catalog = store.llm_metadata()
    assert catalog["gpt-x"]["price_in_per_mtok"] == 2.5
    assert catalog["mini"]["price_out_per_mtok"] == 0.6
    other = tmp_path / "other.csv"
    other.write_text("name,in_price,out_price\ngpt-x,3,12\n")
    refused = run_cli("import", "llms", other, "-w", ws)
    assert refused.exit_code == 2 and "map it with -c CATALOG_COLUMN=in_price" in refused.stderr
    mapped = run_cli(
        "import", "llms", other, "-w", ws, "-c", "price_in_per_mtok=in_price",
        "-c", "price_out_per_mtok=out_price",
    )  # fmt: skip
    assert mapped.exit_code == 0, mapped.stderr
    with Store.open(ws, create=False) as store:
        assert store.llm_metadata()["gpt-x"]["price_out_per_mtok"] == 12.0
    wrong = run_cli("import", "llms", other, "-w", ws, "-c", "price=in_price")
    assert wrong.exit_code == 2 and "'price' is not a catalog column" in wrong.stderr
