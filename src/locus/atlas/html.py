"""The atlas as one self-contained, interactive HTML page (plotly.js inlined; no server, no
network).

The page is built from a plain, JSON-serialisable payload, embedded as
`<script type="application/json" id="atlas-data">`; the page's own script draws the figure from
it, so the page recolours, reprojects, highlights and shows portfolios without Python.

Payload keys (required unless marked optional):

    title            str
    subtitle         str or None (optional)
    projections      {name: {llm_id: [x, y]}}, at least one, every LLM in each; the first is shown
    projection_kept  {name: share in 0..1 or None} (optional): share of each LLM's 10 true nearest
                     neighbours the projection keeps
    colour_by        [field, ...]: fields of the LLM entries offered as colourings; first is default
    llms             [{llm_id, display_name (optional), accuracy (0..1 or None, sizes the point),
                       <colour_by fields> (str, number or None; None is shown as "unknown"),
                       metadata {key: scalar or None} (optional; None values are not shown),
                       neighbours [{llm_id, distance, agreement (0..1 or None)}] (optional,
                       nearest first), proxies [same] (optional, fallback order)}, ...]
    portfolios       {method: {"k": [llm_id, ...]}}, may be empty {}

In the page, `window.locusAtlas` (set once the plot is drawn, with `document.body.dataset.ready`
set to "1") scripts it: `highlight(llm_id)`, `clear()`, `portfolio(method, k)`,
`setProjection(name)`, `setColourBy(field)`, `llmIds`.

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
from pathlib import Path
from typing import Any, NoReturn

from locus.errors import LocusInputError

__all__ = ["atlas_html", "write_atlas_html"]

_REQUIRED_KEYS = ("title", "projections", "colour_by", "llms", "portfolios")
_OPTIONAL_KEYS = ("subtitle", "projection_kept")
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
    subtitle_html = f'<p id="subtitle">{html.escape(subtitle)}</p>' if subtitle else ""
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            f"<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n",
            f'<header><h1 id="title">{title}</h1>{subtitle_html}</header>\n',
            _BODY,
            '<script type="application/json" id="atlas-data">',
            _script_json(data),
            "</script>\n<script>",
            plotly_js,
            "</script>\n<script>",
            _JS,
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
    _check_portfolios(data["portfolios"], llm_ids)
    return data


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


# --- the page ----------------------------------------------------------------------------------

_CSS = """
:root {
  --ink: #1d2433; --muted: #667085; --line: #e4e7ec; --soft: #f2f4f7; --bg: #f6f7f9;
  --accent: #2563eb; --proxy: #d97706;
  --font: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "Noto Sans",
    "Liberation Sans", Arial, sans-serif;
}
* { box-sizing: border-box; }
[hidden] { display: none !important; }
html, body { margin: 0; height: 100%; }
body { display: flex; flex-direction: column; background: var(--bg); color: var(--ink);
  font: 14px/1.45 var(--font); }
header { padding: 14px 22px 10px; background: #fff; }
header h1 { margin: 0; font-size: 19px; font-weight: 650; letter-spacing: -0.01em; }
header p { margin: 2px 0 0; color: var(--muted); font-size: 13px; }
#controls { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 22px;
  padding: 8px 22px 10px; background: #fff; border-bottom: 1px solid var(--line); font-size: 13px; }
.control { display: flex; align-items: center; gap: 7px; }
.control > label, .control > .label { color: var(--muted); }
.note { color: var(--muted); font-size: 12px; }
select, button, input[type=number] { font: inherit; color: var(--ink); background: #fff;
  border: 1px solid #d0d5dd; border-radius: 6px; padding: 3px 8px; }
input[type=number] { width: 4.2em; }
input[type=range] { width: 110px; accent-color: var(--accent); }
input[type=checkbox] { accent-color: var(--accent); margin: 0; }
button { cursor: pointer; } button:hover { background: var(--soft); }
select:disabled, input:disabled { opacity: 0.45; }
.spacer { flex: 1; }
main { flex: 1; display: flex; min-height: 0; }
#plot-column { flex: 1; min-width: 0; display: flex; flex-direction: column; padding: 12px; }
#plot-card { flex: 1; min-height: 0; display: flex; flex-direction: column; background: #fff;
  border: 1px solid var(--line); border-radius: 10px; overflow: hidden; }
#plot { flex: 1; min-height: 360px; }
#caption { color: var(--muted); font-size: 12px; padding: 6px 14px 8px;
  border-top: 1px solid var(--soft); }
aside { width: 360px; flex: none; overflow-y: auto; background: #fff;
  border-left: 1px solid var(--line); padding: 16px 18px; }
aside h2 { margin: 0; font-size: 16px; font-weight: 650; word-break: break-word; }
aside h3 { margin: 18px 0 6px; font-size: 11.5px; font-weight: 600; letter-spacing: 0.05em;
  text-transform: uppercase; color: var(--muted); }
aside h3:first-child { margin-top: 0; }
aside section + section { margin-top: 18px; padding-top: 16px; border-top: 1px solid var(--line); }
aside .id { color: var(--muted); font-size: 12px; word-break: break-all; }
aside .hint { color: var(--muted); }
aside .hint kbd { font: 11px var(--font); border: 1px solid var(--line); border-radius: 4px;
  padding: 0 4px; }
dl.facts { display: grid; grid-template-columns: auto 1fr; gap: 2px 12px; margin: 10px 0 0;
  font-size: 13px; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; word-break: break-word; }
table { width: 100%; border-collapse: collapse; font-size: 12.5px; }
th { text-align: left; font-weight: 500; color: var(--muted); padding: 3px 4px;
  border-bottom: 1px solid var(--line); }
td { padding: 4px; border-bottom: 1px solid var(--soft); vertical-align: middle; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.rank { color: var(--muted); width: 1.6em; }
.llm { display: inline-flex; align-items: center; gap: 6px; border: 0; background: none;
  padding: 0; color: var(--ink); text-align: left; font: inherit; cursor: pointer; }
.llm:hover { color: var(--accent); background: none; text-decoration: underline; }
.swatch { width: 9px; height: 9px; border-radius: 50%; flex: none; }
.bar { display: inline-block; height: 6px; border-radius: 3px; background: var(--accent);
  opacity: 0.55; vertical-align: middle; margin-left: 6px; }
.proxies .bar { background: var(--proxy); }
ol.portfolio { margin: 0; padding-left: 22px; font-size: 13px; } ol.portfolio li { padding: 2px 0; }
.key { display: inline-flex; align-items: center; gap: 5px; margin-right: 12px; }
.key i { width: 14px; height: 0; border-top: 2px solid var(--accent); }
.key i.proxy { border-top: 2px dashed var(--proxy); }
#error { display: none; margin: 12px 22px; padding: 10px 12px; border-radius: 8px;
  background: #fef3f2; color: #b42318; border: 1px solid #fecdca; }
"""

_BODY = """<div id="controls">
  <div class="control" id="projection-control">
    <label for="projection">Projection</label><select id="projection"></select>
    <span class="label" id="projection-name"></span><span class="note" id="projection-kept"></span>
  </div>
  <div class="control" id="colour-control">
    <label for="colour-by">Colour by</label><select id="colour-by"></select>
  </div>
  <div class="control"><input type="checkbox" id="labels"><label for="labels">Labels</label></div>
  <div class="control" id="portfolio-control">
    <label for="portfolio-method">Portfolio</label>
    <select id="portfolio-method"><option value="">off</option></select>
    <span class="control" id="portfolio-size"><label for="portfolio-k">k</label>
      <input type="range" id="portfolio-k-range" aria-label="portfolio size">
      <input type="number" id="portfolio-k" step="1"></span>
  </div>
  <div class="spacer"></div>
  <button type="button" id="clear" title="Clear the highlight (Esc)">Clear</button>
</div>
<div id="error" role="alert"></div>
<main>
  <div id="plot-column">
    <div id="plot-card"><div id="plot"></div><div id="caption"></div></div>
  </div>
  <aside id="panel" aria-live="polite"></aside>
</main>
"""

_JS = r"""
(function () {
  "use strict";
  const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "Noto Sans", ' +
    '"Liberation Sans", Arial, sans-serif';
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948",
    "#9c755f", "#ff9da7", "#17becf", "#8cd17d", "#d37295", "#a0cbe8", "#b6992d", "#499894",
    "#fabfd2", "#86bcb6", "#79706e"];
  const UNKNOWN = "#b8c0cc", SINGLE = "#4e79a7", ACCENT = "#2563eb", PROXY = "#d97706";
  const INK = "#101828", LABEL = "#475467";
  const CONFIG = {displaylogo: false, responsive: true, scrollZoom: true,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"],
    toImageButtonOptions: {filename: "locus-atlas", scale: 2}};

  const $ = (id) => document.getElementById(id);
  window.addEventListener("error", (e) => {
    const box = $("error");
    box.textContent = "The atlas failed to draw: " + e.message;
    box.style.display = "block";
  });
  const data = JSON.parse($("atlas-data").textContent);
  const llms = data.llms;
  const indexOf = new Map(llms.map((llm, i) => [llm.llm_id, i]));
  const projections = Object.keys(data.projections);
  const portfolios = data.portfolios || {};
  const methods = Object.keys(portfolios);
  const colourFields = data.colour_by || [];
  const kept = data.projection_kept || {};
  const plot = $("plot"), panel = $("panel");
  const state = {projection: projections[0], colourBy: colourFields[0] || null,
    labels: llms.length <= 40, selected: null, method: null, k: null};

  const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const nameOf = (llm) => llm.display_name || llm.llm_id;
  const llmById = (id) => llms[indexOf.get(id)];
  const missing = (v) => v === null || v === undefined;
  const percent = (v, digits) => missing(v) ? "–" : (100 * v).toFixed(digits) + "%";
  const fixed = (v) => missing(v) ? "–" : Number(v).toFixed(3);
  function show(v) {
    if (v === null || v === undefined || v === "") return "unknown";
    if (typeof v === "boolean") return v ? "yes" : "no";
    if (typeof v === "number") {
      if (Number.isInteger(v)) return v.toLocaleString("en-US");
      const a = Math.abs(v);
      return (a < 1e-3 || a >= 1e6) ? v.toExponential(2) : String(Number(v.toPrecision(4)));
    }
    return String(v);
  }
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "dataset") Object.assign(node.dataset, value);
      else if (key === "style") node.style.cssText = value;
      else if (key === "onclick") node.addEventListener("click", value);
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  // Categorical colours per field, stable across projections: numbers in numeric order,
  // strings alphabetically, "unknown" (null) last and grey.
  const categoryCache = new Map();
  const categoryOf = (llm, field) => {
    const v = field === null ? null : llm[field];
    return (v === null || v === undefined || v === "") ? "unknown" : String(v);
  };
  function categories(field) {
    if (categoryCache.has(field)) return categoryCache.get(field);
    const raw = new Map();
    for (const llm of llms) {
      const v = field === null ? null : llm[field];
      if (v !== null && v !== undefined && v !== "") raw.set(String(v), v);
    }
    const order = [...raw.keys()].sort((a, b) => {
      const x = raw.get(a), y = raw.get(b);
      if (typeof x === "number" && typeof y === "number") return x - y;
      return a.localeCompare(b, "en", {numeric: true});
    });
    const colour = new Map(order.map((c, i) => [c, PALETTE[i % PALETTE.length]]));
    if (llms.some((llm) => categoryOf(llm, field) === "unknown")) {
      order.push("unknown");
      colour.set("unknown", field === null ? SINGLE : UNKNOWN);
    }
    const result = {order, colour};
    categoryCache.set(field, result);
    return result;
  }

  // Marker diameter grows with accuracy across the pool's range.
  const accuracies = llms.map((llm) => llm.accuracy).filter((v) => typeof v === "number");
  const lowest = Math.min(...accuracies), highest = Math.max(...accuracies);
  const baseSize = llms.map((llm) => {
    if (typeof llm.accuracy !== "number") return 8;
    return 9 + 17 * (highest > lowest ? (llm.accuracy - lowest) / (highest - lowest) : 0.5);
  });

  const factFields = ["family", "cluster", ...colourFields].filter(
    (f, i, all) => all.indexOf(f) === i && llms.some((llm) => f in llm));
  const hoverTexts = llms.map((llm) => {
    const lines = ["<b>" + esc(nameOf(llm)) + "</b>"];
    if (llm.display_name && llm.display_name !== llm.llm_id) {
      lines.push('<span style="color:#667085">' + esc(llm.llm_id) + "</span>");
    }
    const facts = factFields.filter((f) => f in llm).map((f) => esc(f) + ": " + esc(show(llm[f])));
    facts.push("accuracy: " + percent(llm.accuracy, 1));
    lines.push(facts.join("  ·  "));
    for (const [key, value] of Object.entries(llm.metadata || {})) {
      if (value !== null && value !== undefined && value !== "") {
        lines.push('<span style="color:#667085">' + esc(key) + ":</span> " + esc(show(value)));
      }
    }
    const neighbours = (llm.neighbours || []).slice(0, 5);
    if (neighbours.length) {
      lines.push("<b>nearest neighbours</b> " +
        '<span style="color:#667085">distance · agreement</span>');
      neighbours.forEach((n, j) => lines.push((j + 1) + ". " + esc(nameOf(llmById(n.llm_id))) +
        '  <span style="color:#667085">' + fixed(n.distance) + " · " + percent(n.agreement, 0) +
        "</span>"));
    }
    return lines.join("<br>");
  });

  function portfolioSizes(method) {
    return Object.keys(portfolios[method] || {}).map(Number).sort((a, b) => a - b);
  }
  function chosenIds() {
    if (!state.method) return null;
    const chosen = portfolios[state.method][String(state.k)];
    return chosen ? chosen : [];
  }
  function focusRoles() {
    if (state.selected === null) return null;
    const llm = llmById(state.selected);
    const roles = new Map();
    for (const p of llm.proxies || []) roles.set(p.llm_id, "proxy");
    for (const n of llm.neighbours || []) roles.set(n.llm_id, "neighbour");
    roles.set(llm.llm_id, "self");
    return roles;
  }

  function linkTrace(from, relations, colour, dash, coords) {
    const x = [], y = [];
    for (const r of relations) {
      x.push(coords[from][0], coords[r.llm_id][0], null);
      y.push(coords[from][1], coords[r.llm_id][1], null);
    }
    return {type: "scatter", mode: "lines", x, y, hoverinfo: "skip", showlegend: false,
      line: {color: colour, width: 1.6, dash}, opacity: 0.7};
  }

  function traces() {
    const coords = data.projections[state.projection];
    const roles = focusRoles();
    const chosenList = chosenIds();
    const chosen = chosenList === null || !chosenList.length ? null : new Set(chosenList);
    const result = [];
    if (roles !== null) {
      const llm = llmById(state.selected);
      const neighbours = llm.neighbours || [];
      const near = new Set(neighbours.map((n) => n.llm_id));
      const proxies = (llm.proxies || []).filter((p) => !near.has(p.llm_id));
      if (proxies.length) result.push(linkTrace(llm.llm_id, proxies, PROXY, "dot", coords));
      if (neighbours.length) {
        result.push(linkTrace(llm.llm_id, neighbours, ACCENT, "solid", coords));
      }
    }
    const {order, colour} = categories(state.colourBy);
    // The legend gets its own empty traces, so dimmed points never fade a legend symbol.
    if (state.colourBy !== null) {
      for (const category of order) {
        result.push({type: "scatter", mode: "markers", x: [null], y: [null], name: category,
          legendgroup: category, hoverinfo: "skip",
          marker: {color: colour.get(category), size: 10}});
      }
    }
    for (const category of order) {
      const trace = {type: "scatter", mode: state.labels ? "markers+text" : "markers",
        name: category, legendgroup: category, showlegend: false, cliponaxis: false,
        x: [], y: [], text: [], hovertext: [], customdata: [],
        hovertemplate: "%{hovertext}<extra></extra>", textposition: "top center",
        textfont: {size: 11, color: []},
        marker: {color: colour.get(category), size: [], opacity: [], line: {width: [], color: []}}};
      llms.forEach((llm, i) => {
        if (categoryOf(llm, state.colourBy) !== category) return;
        const id = llm.llm_id;
        const inPortfolio = chosen !== null && chosen.has(id);
        const role = roles === null ? undefined : roles.get(id);
        let size = baseSize[i], opacity = 0.88, width = 1, ring = "#ffffff", label = LABEL;
        // Faded points lose their labels, so the highlighted ones stay readable.
        if (chosen !== null && !inPortfolio) { opacity = 0.25; label = null; }
        if (roles !== null && role === undefined) { opacity = 0.12; label = null; }
        if (roles !== null && role !== undefined) { opacity = 1; label = INK; width = 2.5; }
        if (role === "neighbour") ring = ACCENT;
        if (role === "proxy") ring = PROXY;
        // Portfolio members keep their dark ring (fainter when the highlight leaves them out).
        if (inPortfolio) {
          size += 8; width = 3; ring = INK;
          if (role === undefined) { opacity = roles === null ? 1 : 0.45; label = INK; }
        }
        if (role === "self") { size += 5; width = 3.5; ring = INK; }
        trace.x.push(coords[id][0]); trace.y.push(coords[id][1]);
        trace.text.push(state.labels && label !== null ? esc(nameOf(llm)) : "");
        trace.hovertext.push(hoverTexts[i]); trace.customdata.push(id);
        trace.textfont.color.push(label || LABEL);
        trace.marker.size.push(size); trace.marker.opacity.push(opacity);
        trace.marker.line.width.push(width); trace.marker.line.color.push(ring);
      });
      result.push(trace);
    }
    return result;
  }

  function layout() {
    const axis = (n) => ({
      title: {text: esc(state.projection) + " " + n, font: {size: 11, color: "#98a2b3"}},
      showticklabels: false, ticks: "", zeroline: false, showgrid: true, gridcolor: "#f0f2f5",
      showline: false});
    return {font: {family: FONT, size: 12, color: "#1d2433"}, paper_bgcolor: "#ffffff",
      plot_bgcolor: "#ffffff", margin: {l: 36, r: 12, t: 18, b: 36}, hovermode: "closest",
      dragmode: "pan", uirevision: state.projection, xaxis: axis(1), yaxis: axis(2),
      hoverlabel: {bgcolor: "#ffffff", bordercolor: "#d0d5dd", align: "left",
        font: {family: FONT, size: 12, color: "#1d2433"}},
      legend: {title: {text: esc(state.colourBy || "")}, bgcolor: "rgba(255,255,255,0.9)",
        itemsizing: "constant", font: {size: 12}}};
  }

  let drawn = false;
  function render() {
    renderPanel();
    const call = drawn ? Plotly.react : Plotly.newPlot;
    return call(plot, traces(), layout(), CONFIG).then(() => { drawn = true; });
  }

  const colourOf = (llm) => categories(state.colourBy).colour.get(categoryOf(llm, state.colourBy));
  function llmButton(id, role) {
    const llm = llmById(id);
    const swatch = el("span", {class: "swatch",
      style: "background:" + colourOf(llm)});
    return el("button", {type: "button", class: "llm", title: id, dataset: {llmId: id, role},
      onclick: () => highlight(id)}, swatch, nameOf(llm));
  }
  function relationTable(relations, role) {
    const rows = relations.map((r, j) => el("tr", {dataset: {role, llmId: r.llm_id}},
      el("td", {class: "rank"}, String(j + 1)), el("td", {}, llmButton(r.llm_id, role)),
      el("td", {class: "num"}, fixed(r.distance)),
      el("td", {class: "num"}, percent(r.agreement, 0),
        el("span", {class: "bar", style: "width:" + Math.round(30 * (r.agreement || 0)) + "px"}))));
    return el("table", {class: role === "proxy" ? "proxies" : "neighbours"},
      el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "LLM"),
        el("th", {class: "num"}, "distance"), el("th", {class: "num"}, "agreement"))),
      el("tbody", {}, ...rows));
  }
  function renderPanel() {
    panel.replaceChildren();
    if (state.method) {
      const chosen = chosenIds();
      const box = el("section", {id: "portfolio"},
        el("h3", {}, "Portfolio · " + state.method + " · k = " + state.k));
      if (chosen.length) {
        box.append(el("ol", {class: "portfolio", id: "portfolio-list"},
          ...chosen.map((id) => el("li", {dataset: {llmId: id}}, llmButton(id, "portfolio")))));
      } else {
        box.append(el("p", {class: "hint"}, "No " + state.method + " portfolio of size " +
          state.k + "; sizes: " + portfolioSizes(state.method).join(", ") + "."));
      }
      if (state.selected === null) {
        box.append(el("p", {class: "hint"}, "Click a point to see its neighbours and proxies."));
      }
      panel.append(box);
    }
    if (state.selected !== null) {
      const llm = llmById(state.selected);
      const box = el("section", {id: "selected", dataset: {llmId: llm.llm_id}});
      box.append(el("h3", {}, "Selected LLM"), el("h2", {}, nameOf(llm)));
      if (llm.display_name && llm.display_name !== llm.llm_id) {
        box.append(el("div", {class: "id"}, llm.llm_id));
      }
      const facts = el("dl", {class: "facts"});
      const fact = (key, value) => facts.append(el("dt", {}, key), el("dd", {}, value));
      for (const f of factFields) if (f in llm) fact(f, show(llm[f]));
      fact("accuracy", percent(llm.accuracy, 1));
      for (const [key, value] of Object.entries(llm.metadata || {})) {
        if (!missing(value) && value !== "") fact(key, show(value));
      }
      box.append(facts);
      box.append(el("h3", {}, "Nearest neighbours"));
      box.append((llm.neighbours || []).length ? relationTable(llm.neighbours, "neighbour")
        : el("p", {class: "hint"}, "None given."));
      box.append(el("h3", {}, "Proxies (fallback order)"));
      box.append((llm.proxies || []).length ? relationTable(llm.proxies, "proxy")
        : el("p", {class: "hint"}, "None given."));
      box.append(el("p", {class: "note", style: "margin-top:12px"},
        el("span", {class: "key"}, el("i"), "neighbour"),
        el("span", {class: "key"}, el("i", {class: "proxy"}), "proxy only"),
        "agreement: share of queries both LLMs get right or both get wrong"));
      panel.append(box);
    }
    if (!state.method && state.selected === null) {
      panel.append(el("h3", {}, "The pool"),
        el("p", {class: "hint"}, llms.length + " LLMs. Hover over a point for its details; " +
          "click it to highlight its nearest neighbours and proxies and list them here."),
        el("p", {class: "hint"}, "Click empty space, press ", el("kbd", {}, "Esc"),
          " or Clear to reset. Drag to pan, scroll to zoom, double-click to fit."));
      if (methods.length) {
        panel.append(el("p", {class: "hint"}, "Pick a portfolio method above to see which few " +
          "LLMs cover the pool."));
      }
    }
  }

  // --- the scripting API (also what the controls call) ---
  function highlight(id) {
    if (id !== null && !indexOf.has(id)) throw new Error("unknown LLM " + JSON.stringify(id));
    state.selected = id;
    return render();
  }
  function clear() { return highlight(null); }
  function portfolio(method, k) {
    if (!method) {
      state.method = null; state.k = null; syncControls();
      return render().then(() => null);
    }
    if (!(method in portfolios)) {
      throw new Error("unknown portfolio method " + JSON.stringify(method));
    }
    const sizes = portfolioSizes(method);
    state.method = method;
    state.k = (k === undefined || k === null) ? sizes[Math.min(2, sizes.length - 1)] : Number(k);
    syncControls();
    return render().then(() => chosenIds());
  }
  function setProjection(name) {
    if (!(name in data.projections)) throw new Error("unknown projection " + JSON.stringify(name));
    state.projection = name; syncControls(); return render();
  }
  function setColourBy(field) {
    if (field !== null && !colourFields.includes(field)) {
      throw new Error("unknown colouring " + JSON.stringify(field));
    }
    state.colourBy = field; syncControls(); return render();
  }
  function setLabels(on) { state.labels = Boolean(on); syncControls(); return render(); }

  // --- controls ---
  function syncControls() {
    $("projection").value = state.projection;
    const share = kept[state.projection];
    $("projection-kept").textContent = (typeof share === "number")
      ? "keeps " + percent(share, 0) + " of each LLM's 10 nearest neighbours" : "";
    $("colour-by").value = state.colourBy || "";
    $("labels").checked = state.labels;
    $("portfolio-method").value = state.method || "";
    const sizes = state.method ? portfolioSizes(state.method) : [];
    $("portfolio-size").hidden = !state.method;
    for (const input of [$("portfolio-k-range"), $("portfolio-k")]) {
      input.disabled = !state.method;
      if (sizes.length) { input.min = sizes[0]; input.max = sizes[sizes.length - 1]; }
      if (state.k !== null) input.value = state.k;
    }
  }
  function setupControls() {
    const projection = $("projection");
    for (const name of projections) projection.append(el("option", {value: name}, name));
    projection.hidden = projections.length < 2;
    $("projection-name").textContent = projections.length < 2 ? projections[0] : "";
    $("projection-name").hidden = projections.length >= 2;
    projection.addEventListener("change", () => setProjection(projection.value));
    const colour = $("colour-by");
    for (const field of colourFields) colour.append(el("option", {value: field}, field));
    $("colour-control").hidden = colourFields.length === 0;
    colour.addEventListener("change", () => setColourBy(colour.value || null));
    $("labels").addEventListener("change", (e) => setLabels(e.target.checked));
    const method = $("portfolio-method");
    for (const name of methods) method.append(el("option", {value: name}, name));
    $("portfolio-control").hidden = methods.length === 0;
    method.addEventListener("change", () => portfolio(method.value || null, state.k));
    for (const input of [$("portfolio-k-range"), $("portfolio-k")]) {
      input.addEventListener("input", () => {
        const k = parseInt(input.value, 10);
        if (state.method && Number.isInteger(k) && k > 0) portfolio(state.method, k);
      });
    }
    $("clear").addEventListener("click", () => clear());
    document.addEventListener("keydown", (e) => { if (e.key === "Escape") clear(); });
    const low = accuracies.length ? percent(lowest, 0) : "–";
    const high = accuracies.length ? percent(highest, 0) : "–";
    $("caption").textContent = "Each point is an LLM; nearby points answer the same queries " +
      "alike. Point size: accuracy (mean score; smallest " + low + ", largest " + high + "). " +
      (state.colourBy ? "Colour: the chosen field; grey is unknown." : "");
    syncControls();
  }

  // A click on a point selects it; a click (not a drag) on empty plot area clears.
  function setupClicks() {
    let down = null, pointClicked = false;
    plot.on("plotly_click", (event) => {
      const point = event.points && event.points.find((p) => typeof p.customdata === "string");
      if (!point) return;
      pointClicked = true;
      highlight(point.customdata);
    });
    plot.addEventListener("mousedown", (e) => {
      pointClicked = false;
      const onPlotArea = e.target.classList && e.target.classList.contains("nsewdrag");
      down = onPlotArea ? [e.clientX, e.clientY] : null;
    }, true);
    document.addEventListener("mouseup", (e) => {
      const start = down; down = null;
      if (start === null) return;
      setTimeout(() => {
        const still = Math.hypot(e.clientX - start[0], e.clientY - start[1]) < 4;
        if (still && !pointClicked && state.selected !== null) clear();
      }, 30);
    });
  }

  setupControls();
  render().then(() => {
    setupClicks();
    window.locusAtlas = {ready: true, llmIds: llms.map((llm) => llm.llm_id), projections,
      portfolioMethods: methods, highlight, clear, portfolio, setProjection, setColourBy,
      setLabels, state: () => Object.assign({}, state)};
    document.body.dataset.ready = "1";
  });
})();
"""
