"""The atlas as one self-contained, interactive HTML page (plotly.js inlined; no server, no
network).

The page is built from a plain, JSON-serialisable payload, embedded as
`<script type="application/json" id="atlas-data">`; the page's own script draws the figure from
it, so the page recolours, reprojects, highlights and shows portfolios without Python.

Payload keys (required unless marked optional):

    title            str
    subtitle         str or None (optional)
    projections      {name: {llm_id: [x, y]}}, at least one, every LLM in each; the first is shown
    projection_k     int (optional): the neighbourhood size `projection_kept` measures (10, at
                     most half the other LLMs)
    projection_kept  {name: share in 0..1 or None} (optional): share of each LLM's k true nearest
                     neighbours the projection keeps
    colour_by        [field, ...]: fields of the LLM entries offered as colourings; first is default
    llms             [{llm_id, display_name (optional), accuracy (0..1 or None, sizes the point),
                       <colour_by fields> (str, number or None; None is shown as "unknown"),
                       metadata {key: scalar or None} (optional; None values are not shown),
                       neighbours [{llm_id, distance, agreement (0..1 or None)}] (optional,
                       nearest first), proxies [same] (optional, fallback order)}, ...]
    portfolios       {method: {"k": [llm_id, ...]}}, may be empty {}
    colours          {field: {category: "#rrggbb"}} (optional): each colouring's legend, in
                     order; categories left out are drawn as "other". Where a field has none,
                     `locus.palette.legend_colours` gives it (at most 12 entries): families by
                     name, clusters by number, the same on every page
    colour_notes     {field: str} (optional): what a colouring is, shown under its legend

The page draws every LLM: its name beside the point where it fits without overlapping another
label or point, else (pools of at most 100) its number, which is its place in the list beside
the map; the list holds every LLM, and a search box finds one by name (highlighted on the map).

In the page, `window.locusAtlas` (set once the plot is drawn, with `document.body.dataset.ready`
set to "1") scripts it: `highlight(llm_id)`, `clear()`, `portfolio(method, k)`,
`setProjection(name)`, `setColourBy(field)`, `search(text)` (the ids found),
`showGroup(category)`, `labels()` ({named, numbered, total}), `llmIds`.

    >>> page = atlas_html({
    ...     "title": "demo",
    ...     "projections": {"PCA": {"a": [0.0, 0.0], "b": [1.0, 1.0]}},
    ...     "colour_by": ["family"],
    ...     "llms": [{"llm_id": "a", "family": "x", "accuracy": 0.5},
    ...              {"llm_id": "b", "family": None, "accuracy": 0.7}],
    ...     "portfolios": {},
    ... })
    >>> page.startswith("<!DOCTYPE html>"), 'id="atlas-data"' in page
    (True, True)
"""

from __future__ import annotations

import html
import json
import os
import re
import tempfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from locus.errors import LocusInputError
from locus.palette import legend_colours

__all__ = ["MAX_LEGEND", "atlas_html", "colour_kind", "write_atlas_html"]

_REQUIRED_KEYS = ("title", "projections", "colour_by", "llms", "portfolios")
_OPTIONAL_KEYS = ("subtitle", "projection_kept", "projection_k", "colours", "colour_notes")
_COLOUR = re.compile(r"^#[0-9a-fA-F]{6}$")
MAX_LEGEND = 12
# Fields of an LLM entry that are not a scalar property and so cannot colour the points.
_STRUCTURED_FIELDS = ("llm_id", "display_name", "metadata", "neighbours", "proxies")


def atlas_html(payload: Mapping[str, Any]) -> str:
    """The atlas page for `payload` (see the module docstring for its keys), as one HTML string.

    The page needs no server and no network: plotly.js is inlined (about 4.8 MB), the data is
    embedded as JSON. Raises `LocusInputError` naming the first thing wrong with the payload.
    """
    data = _validated(payload)
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise LocusInputError("the HTML atlas needs plotly: pip install 'plotly>=5.20'") from None
    plotly_js = re.sub(r"</(script)", r"<\\/\1", get_plotlyjs(), flags=re.IGNORECASE)
    title = html.escape(data["title"])
    subtitle = data.get("subtitle")
    subtitle_html = (
        f'<p id="subtitle" title="{html.escape(subtitle)}">{html.escape(subtitle)}</p>'
        if subtitle
        else ""
    )
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            f"<title>{title}</title>\n<style>{_asset('atlas.css')}</style>\n</head>\n<body>\n",
            f'<header><h1 id="title">{title}</h1>{subtitle_html}</header>\n',
            _asset("atlas-body.html"),
            '<script type="application/json" id="atlas-data">',
            _script_json(data),
            "</script>\n<script>",
            plotly_js,
            "</script>\n<script>",
            _asset("atlas.js"),
            "</script>\n</body>\n</html>\n",
        ]
    )


def write_atlas_html(payload: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write `atlas_html(payload)` to `path` atomically (a temporary file in the same folder,
    then a rename), creating the folder if needed; returns the path."""
    target = Path(path)
    page = atlas_html(payload)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(page)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def _script_json(data: Any) -> str:
    """JSON that no text can break out of a <script> element with: `<`, `>` and `&` are written
    as \\u escapes (valid only inside JSON strings, which is the only place they can occur)."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    for character, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(character, escape)
    return text


# --- validation ------------------------------------------------------------------------------


def _fail(message: str) -> NoReturn:
    raise LocusInputError(f"atlas payload: {message}")


def _to_builtin(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _check_share(value: Any, where: str) -> None:
    if value is not None and not (_is_number(value) and 0 <= value <= 1):
        _fail(f"{where} must be a number in 0..1 or None, got {value!r}")


def _validated(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A plain-JSON copy of `payload` (numpy values turned into numbers, keys into strings),
    checked; raises LocusInputError naming the first problem."""
    if not isinstance(payload, Mapping):
        _fail(f"expected a mapping, got {type(payload).__name__}")
    missing = [key for key in _REQUIRED_KEYS if key not in payload]
    if missing:
        _fail(f"missing key {missing[0]!r}; a payload needs {', '.join(_REQUIRED_KEYS)}")
    unknown = sorted(str(key) for key in payload if key not in _REQUIRED_KEYS + _OPTIONAL_KEYS)
    if unknown:
        allowed = ", ".join(_REQUIRED_KEYS + _OPTIONAL_KEYS)
        _fail(f"unknown key {unknown[0]!r}; expected only {allowed}")
    try:
        data = json.loads(json.dumps(dict(payload), default=_to_builtin, allow_nan=False))
    except (TypeError, ValueError) as error:
        _fail(f"not JSON-serialisable ({error}); use numbers, strings, lists, dicts, None for gaps")
    if not isinstance(data["title"], str) or not data["title"]:
        _fail(f"'title' must be a non-empty string, got {data['title']!r}")
    if data.get("subtitle") is not None and not isinstance(data["subtitle"], str):
        _fail(f"'subtitle' must be a string or None, got {data['subtitle']!r}")
    llm_ids = _check_llms(data["llms"])
    _check_colour_by(data["colour_by"], data["llms"])
    _check_projections(data["projections"], data.get("projection_kept"), llm_ids)
    k = data.get("projection_k")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
        _fail(f"'projection_k' must be a whole number >= 0, got {k!r}")
    _check_portfolios(data["portfolios"], llm_ids)
    data["colours"] = _colours(data.get("colours"), data["colour_by"], data["llms"])
    notes = data.get("colour_notes")
    if notes is not None and not (
        isinstance(notes, dict) and all(isinstance(v, str) for v in notes.values())
    ):
        _fail(f"'colour_notes' must map colour_by fields to text, got {notes!r}")
    return data


def colour_kind(field: str) -> str:
    """How a colouring's categories take their colours (`locus.palette.category_colour`)."""
    if field == "cluster":
        return "cluster"
    return "family" if field.startswith("family") else "category"


def _colours(given: Any, fields: list[str], llms: list[dict[str, Any]]) -> dict[str, Any]:
    """Each colour_by field's legend: as given, else from `locus.palette`."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        _fail(f"'colours' must map colour_by fields to {{category: colour}}, got {given!r}")
    colours: dict[str, Any] = {}
    for field, table in given.items():
        if field not in fields:
            _fail(f"'colours' names {field!r}, which is not in 'colour_by' {fields!r}")
        if not isinstance(table, dict) or not all(
            isinstance(c, str) and _COLOUR.match(c) for c in table.values()
        ):
            _fail(f"'colours' {field!r} must map categories to '#rrggbb' colours, got {table!r}")
        colours[field] = table
    for field in fields:
        if field not in colours:
            values = [llm.get(field) for llm in llms]
            colours[field] = legend_colours(values, kind=colour_kind(field), limit=MAX_LEGEND)
    return colours


def _check_llms(llms: Any) -> set[str]:
    if not isinstance(llms, list):
        _fail(f"'llms' must be a list of LLM entries, got {type(llms).__name__}")
    if not llms:
        _fail("no LLMs: 'llms' is empty; expected at least one LLM entry")
    first_seen: dict[str, int] = {}
    for position, llm in enumerate(llms):
        if not isinstance(llm, dict):
            _fail(f"llms[{position}] must be a mapping, got {type(llm).__name__}")
        llm_id = llm.get("llm_id")
        if not isinstance(llm_id, str) or not llm_id:
            _fail(f"llms[{position}] needs a non-empty string 'llm_id', got {llm_id!r}")
        if llm_id in first_seen:
            _fail(f"duplicate llm_id {llm_id!r} (llms[{first_seen[llm_id]}] and llms[{position}])")
        first_seen[llm_id] = position
        where = f"llms[{position}] ({llm_id!r})"
        if llm.get("display_name") is not None and not isinstance(llm["display_name"], str):
            _fail(f"{where} 'display_name' must be a string or None, got {llm['display_name']!r}")
        if "accuracy" not in llm:
            _fail(f"{where} is missing 'accuracy' (mean score in 0..1, or None)")
        _check_share(llm["accuracy"], f"{where} 'accuracy'")
        metadata = llm.get("metadata", {})
        if not isinstance(metadata, dict):
            _fail(f"{where} 'metadata' must be a mapping, got {type(metadata).__name__}")
        for key, value in metadata.items():
            if not _is_scalar(value):
                _fail(f"{where} metadata {key!r} must be a string, number or None, got {value!r}")
    known = set(first_seen)
    for llm in llms:
        for kind in ("neighbours", "proxies"):
            _check_relations(llm.get(kind, []), f"llms[{first_seen[llm['llm_id']]}] {kind}", known)
    return known


def _check_relations(relations: Any, where: str, known: set[str]) -> None:
    if not isinstance(relations, list):
        _fail(f"{where} must be a list, got {type(relations).__name__}")
    for position, relation in enumerate(relations):
        here = f"{where}[{position}]"
        if not isinstance(relation, dict):
            _fail(f"{here} must be a mapping with llm_id, distance, agreement, got {relation!r}")
        if relation.get("llm_id") not in known:
            _fail(f"{here} names unknown LLM {relation.get('llm_id')!r}; it is not in 'llms'")
        if not _is_number(relation.get("distance")):
            _fail(f"{here} 'distance' must be a number, got {relation.get('distance')!r}")
        _check_share(relation.get("agreement"), f"{here} 'agreement'")


def _check_colour_by(fields: Any, llms: list[dict[str, Any]]) -> None:
    if not isinstance(fields, list) or not all(isinstance(field, str) for field in fields):
        _fail(f"'colour_by' must be a list of field names, got {fields!r}")
    if len(set(fields)) != len(fields):
        _fail(f"'colour_by' names a field twice: {fields!r}")
    for field in fields:
        if field in _STRUCTURED_FIELDS:
            _fail(f"'colour_by' field {field!r} cannot colour points; use a scalar field")
        if not any(field in llm for llm in llms):
            _fail(f"'colour_by' field {field!r} is in no LLM entry; add it or drop it")
        for llm in llms:
            if not _is_scalar(llm.get(field)):
                _fail(f"LLM {llm['llm_id']!r} field {field!r} must be a scalar or None")


def _check_projections(projections: Any, kept: Any, llm_ids: set[str]) -> None:
    if not isinstance(projections, dict) or not projections:
        _fail("'projections' must map at least one projection name to {llm_id: [x, y]}")
    for name, coordinates in projections.items():
        if not isinstance(coordinates, dict):
            _fail(f"projection {name!r} must map llm_id to [x, y]")
        absent = sorted(llm_ids - set(coordinates))
        if absent:
            _fail(f"projection {name!r} has no coordinates for LLM {absent[0]!r}")
        for llm_id, point in coordinates.items():
            if llm_id not in llm_ids:
                _fail(f"projection {name!r} places unknown LLM {llm_id!r}; it is not in 'llms'")
            if not (isinstance(point, list) and len(point) == 2 and all(map(_is_number, point))):
                _fail(f"projection {name!r} point of {llm_id!r} must be [x, y], got {point!r}")
    if kept is None:
        return
    if not isinstance(kept, dict):
        _fail(f"'projection_kept' must map projection names to shares, got {kept!r}")
    for name, share in kept.items():
        if name not in projections:
            _fail(f"'projection_kept' names unknown projection {name!r}")
        _check_share(share, f"'projection_kept' {name!r}")


def _check_portfolios(portfolios: Any, llm_ids: set[str]) -> None:
    if not isinstance(portfolios, dict):
        _fail(f"'portfolios' must map method to {{k: [llm_id, ...]}}, got {portfolios!r}")
    for method, by_size in portfolios.items():
        if not isinstance(by_size, dict) or not by_size:
            _fail(f"portfolio method {method!r} must map at least one k to a list of llm_ids")
        for k, chosen in by_size.items():
            if not (k.isdigit() and int(k) > 0):
                _fail(f"portfolio {method!r} size {k!r} must be a positive integer")
            if not isinstance(chosen, list) or not chosen:
                _fail(f"portfolio {method!r} k={k} must be a non-empty list of llm_ids")
            for llm_id in chosen:
                if llm_id not in llm_ids:
                    _fail(f"portfolio {method!r} k={k} names unknown LLM {llm_id!r}")
            if len(set(chosen)) != len(chosen):
                _fail(f"portfolio {method!r} k={k} names an LLM twice")


# --- the page: its style, body and script live beside this module, in assets/ ------------------


def _asset(name: str) -> str:
    return (resources.files("locus.atlas") / "assets" / name).read_text(encoding="utf-8")
