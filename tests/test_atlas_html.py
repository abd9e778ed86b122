"""The HTML atlas: payload validation, a self-contained page, and the page working in a real
headless Chromium (hover labels, click highlight, portfolio mode), with the network blocked."""

from __future__ import annotations

import copy
import doctest
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import locus.atlas.html as atlas_html_module
from locus.atlas.html import atlas_html, write_atlas_html
from locus.errors import LocusInputError

FAMILIES = {"llama": (0.0, 0.0), "qwen": (10.0, 2.0), "mistral": (4.0, 9.0)}
BROWSER_TIMEOUT_MS = 30_000


def planted_payload() -> dict[str, Any]:
    """12 LLMs in 3 families, each family a tight cluster far from the others; neighbours are
    the true nearest by 2-D distance; k-center portfolios pick one LLM per family at k=3."""
    rng = np.random.default_rng(0)
    llm_ids: list[str] = []
    points: dict[str, list[float]] = {}
    family_of: dict[str, str] = {}
    for family, (cx, cy) in FAMILIES.items():
        for j in range(4):
            llm_id = f"{family}-{j + 1}b"
            llm_ids.append(llm_id)
            offset = rng.normal(scale=1.0, size=2)
            points[llm_id] = [round(cx + float(offset[0]), 3), round(cy + float(offset[1]), 3)]
            family_of[llm_id] = family
    coordinates = np.array([points[llm_id] for llm_id in llm_ids])
    distances = np.linalg.norm(coordinates[:, None, :] - coordinates[None, :, :], axis=-1)
    llms = []
    for i, llm_id in enumerate(llm_ids):
        order = [j for j in np.argsort(distances[i]) if j != i]
        relations = [
            {
                "llm_id": llm_ids[j],
                "distance": round(float(distances[i, j]), 4),
                "agreement": round(float(0.95 - 0.04 * distances[i, j]), 3),
            }
            for j in order[:5]
        ]
        llms.append(
            {
                "llm_id": llm_id,
                "display_name": f"{family_of[llm_id].title()} {i % 4 + 1}B",
                "family": family_of[llm_id] if i != 11 else None,
                "cluster": list(FAMILIES).index(family_of[llm_id]),
                "accuracy": round(0.35 + 0.04 * i, 3),
                "metadata": {"params_b": float(i % 4 + 1), "price_in_per_mtok": None},
                "neighbours": relations,
                "proxies": relations[1:3] + relations[:1],
            }
        )
    rotated = {llm_id: [-y, x] for llm_id, (x, y) in points.items()}
    return {
        "title": "locus atlas: planted (12 LLMs)",
        "subtitle": "planted payload · three families",
        "projections": {"t-SNE": points, "PCA": rotated},
        "projection_kept": {"t-SNE": 0.62, "PCA": 0.48},
        "colour_by": ["family", "cluster"],
        "llms": llms,
        "portfolios": {
            "k-center": {
                "1": ["llama-1b"],
                "2": ["llama-1b", "qwen-1b"],
                "3": ["llama-1b", "qwen-2b", "mistral-3b"],
                "4": ["llama-1b", "qwen-2b", "mistral-3b", "llama-4b"],
            },
            "k-medoids": {"2": ["llama-2b", "qwen-3b"], "3": ["llama-2b", "qwen-3b", "mistral-1b"]},
        },
    }


def embedded_payload(page: str) -> Any:
    found = re.search(r'<script type="application/json" id="atlas-data">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1))


# --- fast checks on the page text ---------------------------------------------------------------


def test_payload_round_trips_through_the_page() -> None:
    payload = planted_payload()
    page = atlas_html(payload)
    assert page.startswith("<!DOCTYPE html>")
    assert embedded_payload(page) == payload
    assert "Plotly.newPlot" in page and "<title>locus atlas: planted (12 LLMs)</title>" in page


def test_numpy_values_are_accepted_as_plain_numbers() -> None:
    payload = planted_payload()
    payload["llms"][0]["accuracy"] = np.float32(0.5)
    payload["projections"]["PCA"]["llama-1b"] = np.array([1.0, 2.0])
    data = embedded_payload(atlas_html(payload))
    assert data["llms"][0]["accuracy"] == 0.5
    assert data["projections"]["PCA"]["llama-1b"] == [1.0, 2.0]


def test_page_loads_nothing_from_the_network() -> None:
    from plotly.offline import get_plotlyjs

    page = atlas_html(planted_payload())
    # plotly.js holds URL strings in code (map attributions, a logo link) that load nothing; the
    # browser test blocks the network for it. Everything else (markup, CSS, our script) has none.
    bundle = get_plotlyjs()
    assert page.count(bundle) == 1
    rest = page.replace(bundle, "").lower()
    for construct in ('src="', "src='", 'href="', "href='", "@import", "url(", "<link", "http"):
        assert construct not in rest, construct
    assert len(re.findall(r"<script\b", rest)) == 3  # the data, plotly.js, the page's script


def test_script_end_tag_in_a_name_cannot_break_out() -> None:
    payload = planted_payload()
    hostile = "evil</script><script>window.pwned=1</script><!--"
    payload["llms"][0]["display_name"] = hostile
    payload["llms"][1]["metadata"]["note"] = "</SCRIPT >& <b>"
    page = atlas_html(payload)
    data_tag = page.split('id="atlas-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data_tag and ">" not in data_tag
    assert embedded_payload(page)["llms"][0]["display_name"] == hostile
    assert len(re.findall(r"</script", page, flags=re.IGNORECASE)) == 3


def test_title_is_escaped_in_the_page_markup() -> None:
    payload = planted_payload()
    payload["title"] = "<img src=x onerror=alert(1)>"
    page = atlas_html(payload)
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_write_is_atomic_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "reports" / "atlas.html"
    written = write_atlas_html(planted_payload(), target)
    assert written == target and target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in target.parent.iterdir()] == ["atlas.html"]
    with pytest.raises(LocusInputError):
        write_atlas_html({"title": "x"}, target)
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_module_example_runs() -> None:
    result = doctest.testmod(atlas_html_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def _broken(change: Any) -> dict[str, Any]:
    payload = copy.deepcopy(planted_payload())
    change(payload)
    return payload


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p.pop("llms"), "missing key 'llms'"),
        (lambda p: p.pop("portfolios"), "missing key 'portfolios'"),
        (lambda p: p.update(colours=[]), "unknown key 'colours'"),
        (lambda p: p.update(llms=[]), "no LLMs"),
        (lambda p: p["llms"][3].update(llm_id="llama-1b"), "duplicate llm_id 'llama-1b'"),
        (
            lambda p: p["llms"][2]["neighbours"][0].update(llm_id="gpt-9"),
            "names unknown LLM 'gpt-9'",
        ),
        (lambda p: p["llms"][2]["proxies"].append({"llm_id": "x", "distance": 1}), "unknown LLM"),
        (lambda p: p["llms"][0].pop("accuracy"), "missing 'accuracy'"),
        (lambda p: p["llms"][0].update(accuracy=71), "'accuracy' must be a number in 0..1"),
        (lambda p: p["llms"][0].update(accuracy=float("nan")), "not JSON-serialisable"),
        (lambda p: p["projections"]["PCA"].pop("qwen-2b"), "no coordinates for LLM 'qwen-2b'"),
        (lambda p: p["projections"]["PCA"].update(ghost=[0, 0]), "unknown LLM 'ghost'"),
        (lambda p: p["projections"]["PCA"].update({"qwen-2b": [1]}), "must be [x, y]"),
        (lambda p: p.update(projections={}), "'projections' must map at least one"),
        (lambda p: p.update(colour_by=["provider"]), "'colour_by' field 'provider' is in no LLM"),
        (lambda p: p["portfolios"]["k-center"]["3"].append("ghost"), "unknown LLM 'ghost'"),
        (lambda p: p["portfolios"]["k-center"].update(zero=["llama-1b"]), "positive integer"),
        (lambda p: p.update(projection_kept={"UMAP": 0.5}), "unknown projection 'UMAP'"),
    ],
)
def test_bad_payloads_are_rejected_with_a_one_line_message(change: Any, message: str) -> None:
    with pytest.raises(LocusInputError) as raised:
        atlas_html(_broken(change))
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_non_mapping_payload_is_rejected() -> None:
    with pytest.raises(LocusInputError, match="expected a mapping"):
        atlas_html(["not", "a", "payload"])  # type: ignore[arg-type]


# --- the page in a real browser -----------------------------------------------------------------


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium); browser test skipped")
    return found


POINTS_JS = """() => {
  const found = [];
  for (const group of document.querySelectorAll('.scatterlayer .trace')) {
    const calc = group.__data__;
    if (!calc || !calc[0] || !calc[0].trace) continue;
    const trace = calc[0].trace;
    for (const point of group.querySelectorAll('.points path.point')) {
      const box = point.getBoundingClientRect();
      found.push({llmId: trace.customdata[point.__data__.i],
                  x: box.x + box.width / 2, y: box.y + box.height / 2});
    }
  }
  return found;
}"""


# the drawn labels' boxes on the page, in pixels
LABEL_BOXES_JS = """
() => [...document.querySelectorAll('.scatterlayer .textpoint text')]
  .filter(t => t.textContent.trim())
  .map(t => { const b = t.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; })
"""


def _overlapping(boxes: list[list[float]]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, a in enumerate(boxes)
        for j, b in enumerate(boxes[:i])
        if a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1
    ]


def test_labels_never_overlap_at_laptop_size(tmp_path: Path) -> None:
    executable = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    page_path = write_atlas_html(planted_payload(), tmp_path / "atlas.html")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            args=["--headless", "--no-sandbox", "--disable-gpu"],
            timeout=BROWSER_TIMEOUT_MS,
        )
        try:
            for width, height in ((1024, 640), (1400, 1000)):
                page = browser.new_page(viewport={"width": width, "height": height})
                page.set_default_timeout(BROWSER_TIMEOUT_MS)
                page.goto(page_path.as_uri())
                page.wait_for_function("document.body.dataset.ready === '1'")
                boxes = page.evaluate(LABEL_BOXES_JS)
                assert boxes and not _overlapping(boxes), (width, _overlapping(boxes))
                page.close()
        finally:
            browser.close()


def test_page_works_in_headless_chromium(tmp_path: Path) -> None:
    executable = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    payload = planted_payload()
    names = {llm["llm_id"]: llm["display_name"] for llm in payload["llms"]}
    page_path = write_atlas_html(payload, tmp_path / "atlas.html")
    blocked: list[str] = []
    errors: list[str] = []

    def route(handled: Any) -> None:
        if handled.request.url.startswith("file:"):
            handled.continue_()
        else:
            blocked.append(handled.request.url)
            handled.abort()

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            args=["--headless", "--no-sandbox", "--disable-gpu"],
            timeout=BROWSER_TIMEOUT_MS,
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(BROWSER_TIMEOUT_MS)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.route("**/*", route)
            page.goto(page_path.as_uri())
            page.wait_for_function("document.body.dataset.ready === '1'")
            assert page.evaluate("window.locusAtlas.ready") is True
            assert page.evaluate("window.locusAtlas.llmIds") == list(names)

            points = page.evaluate(POINTS_JS)
            assert sorted(p["llmId"] for p in points) == sorted(names)
            boxes = page.evaluate(LABEL_BOXES_JS)
            assert boxes, "the map shows labels"
            assert not _overlapping(boxes), "labels overlap on the map"
            assert page.locator(".scatterlayer .trace .points path.point").count() == len(names)

            where = {p["llmId"]: p for p in points}
            ids = list(names)

            def hover(llm_id: str) -> str:
                page.mouse.move(where[llm_id]["x"], where[llm_id]["y"], steps=3)
                page.wait_for_function(
                    "name => [...document.querySelectorAll('.hoverlayer .hovertext')]"
                    ".some(t => t.textContent.includes(name))",
                    arg=names[llm_id],
                )
                return page.locator(".hoverlayer .hovertext").first.text_content() or ""

            for llm_id in (ids[0], ids[len(ids) // 2], ids[-1]):
                label = hover(llm_id)
                assert "accuracy" in label and "nearest neighbours" in label

            clicked = ids[5]
            neighbours = [n["llm_id"] for n in payload["llms"][5]["neighbours"]]
            proxies = [p["llm_id"] for p in payload["llms"][5]["proxies"]]
            hover(clicked)  # a click picks the point Plotly's hover is on
            page.mouse.click(where[clicked]["x"], where[clicked]["y"])
            page.wait_for_selector(f"#selected[data-llm-id='{clicked}']")
            listed = page.eval_on_selector_all(
                "#panel tr[data-role=neighbour]", "rows => rows.map(r => r.dataset.llmId)"
            )
            assert listed == neighbours
            listed_proxies = page.eval_on_selector_all(
                "#panel tr[data-role=proxy]", "rows => rows.map(r => r.dataset.llmId)"
            )
            assert listed_proxies == proxies
            panel_text = page.locator("#panel").inner_text()
            assert all(names[n] in panel_text for n in neighbours)
            assert page.evaluate("window.locusAtlas.state().selected") == clicked

            page.select_option("#portfolio-method", "k-center")
            page.fill("#portfolio-k", "3")
            page.wait_for_function("window.locusAtlas.state().k === 3")
            page.wait_for_selector("#portfolio-list li")
            chosen = page.eval_on_selector_all(
                "#portfolio-list li", "items => items.map(i => i.dataset.llmId)"
            )
            assert chosen == payload["portfolios"]["k-center"]["3"]
            assert page.locator(".scatterlayer .trace .points path.point").count() == len(names)

            page.mouse.move(4, 4)  # the picture without a hover label over the highlight
            screenshot = tmp_path / "atlas.png"
            page.screenshot(path=str(screenshot), full_page=True)

            # A still click on empty plot area clears the highlight; the portfolio stays.
            empty = page.locator(".nsewdrag").first.bounding_box()
            assert empty is not None
            page.mouse.click(empty["x"] + 6, empty["y"] + empty["height"] - 6)
            page.wait_for_function("window.locusAtlas.state().selected === null")
            assert page.locator("#selected").count() == 0
            assert page.locator("#portfolio-list li").count() == 3
        finally:
            browser.close()

    assert blocked == []
    assert errors == []
    assert screenshot.stat().st_size > 20_000
    if os.environ.get("LOCUS_SCREENSHOT_DIR"):
        folder = Path(os.environ["LOCUS_SCREENSHOT_DIR"])
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(screenshot, folder / "atlas.png")
