"""The LLM catalog: what each LLM is and how to reach it, as data (`locus import llms`).

One row per LLM: `llm_id` (required), `display_name`, `family`, `params_b` (billions; or
`params`, a count such as 70e9), `price_in_per_mtok`, `price_out_per_mtok` (USD per million
tokens), `cost_per_query` (USD), and, to serve it, `base_url` (an OpenAI-compatible API, e.g.
https://api.openai.com/v1), `upstream_model` (the name that API knows it by; default the
llm_id) and `api_key_env` (the NAME of the environment variable holding its API key: never the
key itself). CSV, TSV, JSON, JSONL, Parquet or YAML (a list of mappings, or `{llms: [...]}`).

    >>> record = LLMRecord.from_mapping({"llm_id": "gpt-4o", "params": "2e11"}, "row 1")
    >>> record.params_b
    200.0
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from locus.data.files import check_file, load_json, open_text
from locus.data.readers import read_table, table_suffix
from locus.errors import LocusInputError

__all__ = ["Endpoint", "LLMRecord", "read_llm_catalog"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEY_LIKE = re.compile(r"^(sk-|sk_|xai-|gsk_|AIza|hf_)|^[A-Za-z0-9_\-]{32,}$")
_NUMBERS = ("params_b", "price_in_per_mtok", "price_out_per_mtok", "cost_per_query")
_TEXTS = ("display_name", "family")
KNOWN_COLUMNS = (
    "llm_id",
    *_TEXTS,
    *_NUMBERS,
    "params",
    "base_url",
    "upstream_model",
    "api_key_env",
)


@dataclass(frozen=True)
class Endpoint:
    """How to reach an LLM: an OpenAI-compatible `base_url`, the `model` name it expects and
    the environment variable holding the API key (`api_key_env`, None for none)."""

    base_url: str
    model: str
    api_key_env: str | None = None

    def to_json(self) -> str:
        return json.dumps(
            {"base_url": self.base_url, "model": self.model, "api_key_env": self.api_key_env},
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | None) -> Endpoint | None:
        """The endpoint stored in the llms table (None when there is none or it is not ours)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(str(data["base_url"]), str(data["model"]), data.get("api_key_env"))
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class LLMRecord:
    """One catalog row, validated."""

    llm_id: str
    display_name: str | None = None
    family: str | None = None
    params_b: float | None = None
    price_in_per_mtok: float | None = None
    price_out_per_mtok: float | None = None
    cost_per_query: float | None = None
    endpoint: Endpoint | None = None
    removes_endpoint: bool = False  # the file has a base_url column, blank on this row

    def metadata(self) -> dict[str, Any]:
        """The llms-table columns this record sets (unset fields are left as they are; a
        blank base_url in a catalog with that column removes the LLM's endpoint)."""
        values: dict[str, Any] = {
            name: getattr(self, name)
            for name in (*_TEXTS, *_NUMBERS)
            if getattr(self, name) is not None
        }
        if self.endpoint is not None:
            values["endpoint"] = self.endpoint.to_json()
        elif self.removes_endpoint:
            values["endpoint"] = None
        return values

    @classmethod
    def from_mapping(cls, row: Mapping[str, Any], where: str) -> LLMRecord:
        """Validate one row; `where` names it in errors ("line 3")."""

        def text(name: str) -> str | None:
            value = row.get(name)
            if value is None or (isinstance(value, float) and value != value):
                return None
            value = str(value).strip()
            return value or None

        llm_id = text("llm_id")
        if llm_id is None:
            raise LocusInputError(f"{where}: no llm_id; expected the LLM's id in every row")
        numbers: dict[str, float | None] = {}
        for name in (*_NUMBERS, "params"):
            raw = text(name)
            if raw is None:
                numbers[name] = None
                continue
            try:
                number = float(raw)
            except ValueError:
                number = float("nan")
            if not number >= 0 or number == float("inf"):
                raise LocusInputError(
                    f"{where}: {name} {raw!r} for {llm_id!r}; expected a number >= 0"
                )
            numbers[name] = number
        params_b = numbers.pop("params")
        if params_b is not None:
            if numbers["params_b"] is not None:
                raise LocusInputError(f"{where}: both params and params_b for {llm_id!r}; give one")
            numbers["params_b"] = params_b / 1e9
        endpoint = None
        base_url, key_env = text("base_url"), text("api_key_env")
        if base_url is not None:
            if not re.match(r"^https?://[^\s/]+", base_url):
                raise LocusInputError(
                    f"{where}: base_url {base_url!r} for {llm_id!r}; expected an http(s) URL such "
                    "as https://api.openai.com/v1"
                )
            if key_env is not None and (_KEY_LIKE.match(key_env) or not _ENV_NAME.match(key_env)):
                raise LocusInputError(
                    f"{where}: api_key_env for {llm_id!r} is not an environment variable name"
                    " (it may be a key itself); expected a name such as OPENAI_API_KEY, never "
                    "the key"
                )
            endpoint = Endpoint(base_url.rstrip("/"), text("upstream_model") or llm_id, key_env)
        elif key_env is not None or text("upstream_model") is not None:
            raise LocusInputError(
                f"{where}: upstream_model / api_key_env for {llm_id!r} without a base_url; "
                "expected the endpoint's base_url too"
            )
        return cls(
            llm_id=llm_id,
            display_name=text("display_name"),
            family=text("family"),
            endpoint=endpoint,
            removes_endpoint=endpoint is None and "base_url" in row,
            **numbers,
        )


# a catalog column -> the names people give it (compared without case, spaces or dashes)
CATALOG_SYNONYMS: dict[str, tuple[str, ...]] = {
    "llm_id": ("llm_id", "model", "llm", "model_id", "model_name", "name"),
    "price_in_per_mtok": (
        "price_in_per_mtok", "input_usd_per_1m", "input_price_per_1m", "input_cost_per_1m",
        "input_per_1m", "price_input", "input_price", "prompt_price_per_1m", "usd_per_1m_input",
        "input_usd_per_mtok", "input_cost_per_mtok",
    ),
    "price_out_per_mtok": (
        "price_out_per_mtok", "output_usd_per_1m", "output_price_per_1m", "output_cost_per_1m",
        "output_per_1m", "price_output", "output_price", "completion_price_per_1m",
        "usd_per_1m_output", "output_usd_per_mtok", "output_cost_per_mtok",
    ),
    "cost_per_query": ("cost_per_query", "usd_per_query", "price_per_query"),
    "params_b": ("params_b", "parameters_b", "size_b"),
    "base_url": ("base_url", "api_base", "endpoint"),
}  # fmt: skip


def _key(name: object) -> str:
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


def _catalog_columns(
    found: list[str], given: Mapping[str, str], path: Path
) -> tuple[dict[str, str], list[str]]:
    """file column -> catalog column: `given` (catalog column -> file column, `-c`), then
    each catalog column the file lacks by its own name that exactly one file column names by a
    synonym (`CATALOG_SYNONYMS`); the notes say which were recognised.

    Raises:
        LocusInputError: a mapping to an unknown catalog column or from a missing file column.
    """
    rename: dict[str, str] = {}
    for canonical, column in given.items():
        if canonical not in KNOWN_COLUMNS:
            raise LocusInputError(
                f"-c {canonical}={column}: {canonical!r} is not a catalog column; expected one "
                f"of {', '.join(KNOWN_COLUMNS)}"
            )
        if column not in found:
            raise LocusInputError(
                f"-c {canonical}={column}: {path} has no column {column!r}; its columns: "
                f"{', '.join(found)}"
            )
        rename[column] = canonical
    recognised = []
    for canonical, names in CATALOG_SYNONYMS.items():
        if canonical in found or canonical in rename.values():
            continue
        matches = [c for c in found if _key(c) in names and c not in rename]
        if len(matches) == 1:
            rename[matches[0]] = canonical
            recognised.append(f"{canonical} <- {matches[0]!r}")
    notes = [f"columns recognised by name: {', '.join(recognised)}"] if recognised else []
    return rename, notes


def read_llm_catalog(
    path: Path, columns: Mapping[str, str] | None = None, notes: list[str] | None = None
) -> list[LLMRecord]:
    """Every row of a catalog file, validated (one line naming the row on the first error).
    `columns`: catalog column -> the file's column (`locus import llms -c`); columns named as
    people name them (`model`, `input_usd_per_1m`, `output_usd_per_1m`, ...) are recognised,
    each said in `notes` where given.

    Raises:
        LocusInputError: unreadable file, no rows, an unknown column, a bad value, an llm_id
            given twice.
    """
    path = Path(path)
    name = path.name.lower()
    if name.endswith((".yaml", ".yml")):
        rows, where = _read_yaml(path), (lambda i: f"{path}, item {i + 1}")
    elif name.endswith(".json") and table_suffix(path) == ".json":
        data = load_json(check_file(path, "a JSON list of LLMs"), "a JSON list of LLMs")
        rows, where = _rows_of(data, path), (lambda i: f"{path}, item {i + 1}")
    else:
        table = read_table(path)
        rows = [{str(k): v for k, v in row.items()} for row in table.frame.to_dict("records")]
        where = lambda i: f"{path}, {table.describe_row(i)}"  # noqa: E731
    if not rows:
        raise LocusInputError(f"{path}: no LLMs; expected one row per LLM with an llm_id")
    found = list(dict.fromkeys(str(k) for row in rows for k in row))
    rename, said = _catalog_columns(found, columns or {}, path)
    if notes is not None:
        notes.extend(said)
    rows = [{rename.get(str(k), str(k)): v for k, v in row.items()} for row in rows]
    unknown = sorted({str(k) for row in rows for k in row} - set(KNOWN_COLUMNS))
    if unknown:
        raise LocusInputError(
            f"{path}: unknown column {unknown[0]!r}; expected some of "
            f"{', '.join(KNOWN_COLUMNS)}, or map it with -c CATALOG_COLUMN={unknown[0]}"
        )
    records, seen = [], set()
    for i, row in enumerate(rows):
        record = LLMRecord.from_mapping(row, where(i))
        if record.llm_id in seen:
            raise LocusInputError(f"{where(i)}: llm_id {record.llm_id!r} given twice; keep one row")
        seen.add(record.llm_id)
        records.append(record)
    return records


def _read_yaml(path: Path) -> list[dict[str, Any]]:
    import yaml

    check_file(path, "a YAML list of LLMs")
    try:
        with open_text(path) as handle:
            data = yaml.safe_load(handle)
    except yaml.YAMLError as error:
        raise LocusInputError(f"{path}: not valid YAML ({' '.join(str(error).split())})") from None
    return _rows_of(data, path)


def _rows_of(data: Any, path: Path) -> list[dict[str, Any]]:
    if isinstance(data, Mapping) and "llms" in data:
        data = data["llms"]
    if not isinstance(data, list) or not all(isinstance(row, Mapping) for row in data):
        raise LocusInputError(
            f"{path}: expected a list of LLMs (mappings with llm_id, ...), or {{llms: [...]}}"
        )
    return [dict(row) for row in data]
