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
from locus.atlas.plots import llm_numbers
from locus.errors import LocusInputError
from locus.palette import (
    CATEGORICAL,
    OTHER,
    UNKNOWN,
    cluster_colour,
    family_colour,
    legend_colours,
)

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


# The MMLU-Pro pool's 29 LLMs (the pool), by family: the names a new user looks for.
MMLU_PRO_FAMILIES = {
    "llama": [
        "Llama-2-7b-hf", "Llama-2-13b-hf", "Llama-2-70b-hf", "Meta-Llama-3-8B", "Meta-Llama-3-70B",
        "Meta-Llama-3_1-8B", "Meta-Llama-3_1-8B-Instruct", "Meta-Llama-3_1-70B",
        "Meta-Llama-3_1-70B-Instruct",
    ],
    "mistral": [
        "Mistral-7B-v0.1", "Mistral-7B-v0.2-hf", "Mistral-7B-Instruct-v0.1",
        "Mistral-7B-Instruct-v0.2", "Mixtral-8x7B-v0.1", "Mixtral-8x7B-Instruct-v0.1",
        "mathstral-7B",
    ],
    "qwen": ["Qwen1.5-7B-Chat", "Qwen1.5-72B-Chat", "Qwen1.5-110B"],
    "yi": ["Yi-6B", "Yi-6b-Chat", "Yi-34B"],
    "gemini": ["gemini-1.5-flash-002", "gemini-1.5-pro-002"],
    "gemma": ["gemma-7b"],
    "phi": ["Phi-3-mini-4k-instruct"],
    "command": ["c4ai-command-r-v01"],
    "jamba": ["jamba-1.5-large"],
    "deepseek": ["DeepSeek-Coder-V2"],
}  # fmt: skip


def pool_payload(
    families: dict[str, list[str]], *, seed: int = 0, spread: float = 0.9
) -> dict[str, Any]:
    """A pool laid out as a t-SNE map lays out a real one: each family a loose cloud around
    its own centre (a ring of centres), some LLMs almost on top of each other (a base LLM and
    its instruct fine-tune), accuracies spread over 0.18..0.70."""
    rng = np.random.default_rng(seed)
    llms, points = [], {}
    names = [name for members in families.values() for name in members]
    for f, (family, members) in enumerate(families.items()):
        angle = 2 * np.pi * f / len(families)
        centre = np.array([np.cos(angle), np.sin(angle)]) * 6.0
        for j, name in enumerate(members):
            if j and j % 3 == 2:  # a near twin of the previous member
                point = np.array(points[members[j - 1]]) + rng.normal(scale=0.05, size=2)
            else:
                point = centre + rng.normal(scale=spread * np.sqrt(len(members)), size=2)
            points[name] = [round(float(point[0]), 4), round(float(point[1]), 4)]
            llms.append(
                {
                    "llm_id": name,
                    "family": family,
                    "cluster": f % 5,
                    "accuracy": round(float(rng.uniform(0.18, 0.70)), 3),
                    "neighbours": [],
                }
            )
    assert len(set(names)) == len(names)
    return {
        "title": f"locus atlas: {len(llms)} LLMs",
        "subtitle": "artifact default · 128-d LLM embeddings, euclidean distance · agreement on "
        "1,204 test queries · shown: t-SNE, the projection that keeps the most true neighbours",
        "projections": {"t-SNE": points},
        "colour_by": ["family", "cluster"],
        "llms": llms,
        "portfolios": {},
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
    embedded = embedded_payload(page)
    colours = embedded.pop("colours")
    assert embedded == payload
    assert "Plotly.newPlot" in page and "<title>locus atlas: planted (12 LLMs)</title>" in page
    # a payload without colours gets the palette's: families by name, clusters by number
    assert colours["family"] == legend_colours(
        [llm["family"] for llm in payload["llms"]], kind="family"
    )
    assert colours["family"]["llama"] == family_colour("llama")
    assert colours["cluster"] == {
        "0": cluster_colour(0),
        "1": cluster_colour(1),
        "2": cluster_colour(2),
    }


def test_the_page_script_has_no_palette_of_its_own() -> None:
    """Category colours come from locus.palette through the payload; the script keeps only its
    marks (accent, proxy, ink, the single colour, other and unknown)."""
    script = (Path(atlas_html_module.__file__).parent / "assets" / "atlas.js").read_text()
    used = set(re.findall(r"#[0-9a-fA-F]{6}", script))
    assert len(used & set(CATEGORICAL)) <= 1  # the colour of a map coloured by nothing
    assert {OTHER, UNKNOWN} <= used  # the palette's greys for 'other' and 'unknown'


def test_given_colours_are_checked() -> None:
    payload = planted_payload()
    payload["colours"] = {"family": {"llama": "#4e79a7"}}
    data = embedded_payload(atlas_html(payload))
    assert data["colours"]["family"] == {"llama": "#4e79a7"}  # the rest are drawn as "other"
    assert "cluster" in data["colours"]
    for colours, message in (
        ({"provider": {}}, "'colours' names 'provider'"),
        ({"family": {"llama": "blue"}}, "'#rrggbb'"),
    ):
        with pytest.raises(LocusInputError, match=message):
            atlas_html({**planted_payload(), "colours": colours})


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
        (lambda p: p.update(colors={}), "unknown key 'colors'"),
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


# every name the page shows, where it shows it: labels on the map, entries in the list
NAMES_JS = """() => {
  const area = document.querySelector('#plot .nsewdrag').getBoundingClientRect();
  const labels = [...document.querySelectorAll('.scatterlayer .textpoint text')]
    .filter(t => t.textContent.trim())
    .map(t => { const b = t.getBoundingClientRect();
                return {text: t.textContent, box: [b.left, b.top, b.right, b.bottom],
                        size: parseFloat(getComputedStyle(t).fontSize)}; });
  return {area: [area.left, area.top, area.right, area.bottom], labels};
}"""

LIST_ENTRY_JS = """(id) => {
  const row = document.querySelector(`#llm-list li[data-llm-id="${CSS.escape(id)}"]`);
  row.scrollIntoView({block: 'nearest'});
  const name = row.querySelector('.name'), scroller = document.getElementById('side-scroll');
  const box = name.getBoundingClientRect(), view = scroller.getBoundingClientRect();
  const style = getComputedStyle(name);
  return {name: name.textContent, number: row.querySelector('.number').textContent,
          hidden: row.hidden || style.visibility !== 'visible',
          size: parseFloat(style.fontSize), clipped: name.scrollWidth > name.clientWidth + 1,
          inView: box.top >= view.top - 1 && box.bottom <= view.bottom + 1 &&
                  box.left >= view.left - 1 && box.right <= view.right + 1 &&
                  box.bottom <= window.innerHeight && box.right <= window.innerWidth};
}"""


# zoom into the upper-left quarter of the map, as a drag or a scroll does
ZOOM_JS = """() => {
  const plot = document.getElementById('plot'), x = plot._fullLayout.xaxis.range,
    y = plot._fullLayout.yaxis.range;
  return Plotly.relayout(plot, {'xaxis.range[0]': x[0], 'xaxis.range[1]': (x[0] + x[1]) / 2,
                                'yaxis.range[0]': (y[0] + y[1]) / 2, 'yaxis.range[1]': y[1]});
}"""


def _browser(playwright: Any, executable: str) -> Any:
    return playwright.chromium.launch(
        executable_path=executable,
        args=["--headless", "--no-sandbox", "--disable-gpu"],
        timeout=BROWSER_TIMEOUT_MS,
    )


def _open(browser: Any, path: Path, width: int, height: int) -> Any:
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    page.wait_for_function("document.body.dataset.ready === '1'")
    page.errors = errors
    return page


def _inside(box: list[float], area: list[float]) -> bool:
    return (
        box[0] >= area[0] - 1
        and box[1] >= area[1] - 1
        and box[2] <= area[2] + 1
        and (box[3] <= area[3] + 1)
    )


def test_every_llm_is_named_at_laptop_and_desktop_size(tmp_path: Path) -> None:
    """The issue's pool (29 LLMs): at 1024x640 and 1400x1000 every LLM's name is readable, on
    the map (a label that overlaps no other and lies inside the plot) or, where it does not
    fit, as its number on the map and its name in the list beside it; the list holds every
    LLM, each name whole and readable once scrolled to; the numbers are the PNG's."""
    executable = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    payload = pool_payload(MMLU_PRO_FAMILIES)
    ids = [llm["llm_id"] for llm in payload["llms"]]
    numbers = dict(zip(ids, llm_numbers(ids), strict=True))
    page_path = write_atlas_html(payload, tmp_path / "atlas.html")
    counts = {}
    with sync_api.sync_playwright() as playwright:
        browser = _browser(playwright, executable)
        try:
            for width, height in ((1024, 640), (1400, 1000)):
                page = _open(browser, page_path, width, height)
                drawn = page.evaluate(NAMES_JS)
                labels = drawn["labels"]
                boxes = [label["box"] for label in labels]
                assert not _overlapping(boxes), (width, _overlapping(boxes))
                assert all(_inside(box, drawn["area"]) for box in boxes), width
                assert all(label["size"] >= 11 for label in labels)
                texts = [label["text"] for label in labels]
                named = {text for text in texts if text in numbers}
                numbered = {text for text in texts if text not in numbers}
                by_number = {str(n): llm for llm, n in numbers.items()}
                assert numbered <= set(by_number), numbered  # a label is a name or a number
                on_map = named | {by_number[text] for text in numbered}
                assert on_map == set(ids), (width, sorted(set(ids) - on_map))
                counts[width] = (len(named), len(numbered))
                assert page.evaluate("window.locusAtlas.labels()") == {
                    "named": len(named),
                    "numbered": len(numbered),
                    "total": len(ids),
                }
                for llm in ids:
                    entry = page.evaluate(LIST_ENTRY_JS, llm)
                    assert entry["name"] == llm and entry["number"] == str(numbers[llm])
                    assert not entry["hidden"] and not entry["clipped"], (width, llm, entry)
                    assert entry["inView"] and entry["size"] >= 11, (width, llm, entry)
                assert page.errors == []
                page.close()
        finally:
            browser.close()
    # the larger window names more of the pool on the map itself
    assert counts[1400][0] >= counts[1024][0] > len(ids) // 3, counts


def test_a_search_finds_and_highlights_an_llm(tmp_path: Path) -> None:
    executable = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    payload = pool_payload(MMLU_PRO_FAMILIES)
    page_path = write_atlas_html(payload, tmp_path / "atlas.html")
    with sync_api.sync_playwright() as playwright:
        browser = _browser(playwright, executable)
        try:
            page = _open(browser, page_path, 1024, 640)
            page.fill("#search", "deepseek coder")  # case, spaces and dashes ignored
            page.wait_for_function("window.locusAtlas.state().query === 'deepseek coder'")
            shown = page.eval_on_selector_all(
                "#llm-list li:not([hidden])", "rows => rows.map(r => r.dataset.llmId)"
            )
            assert shown == ["DeepSeek-Coder-V2"]
            assert "1 found" in page.inner_text("#find")
            texts = [label["text"] for label in page.evaluate(NAMES_JS)["labels"]]
            assert texts == ["DeepSeek-Coder-V2"]  # named on the map, the rest faded
            opacity = page.evaluate(
                """() => { const t = document.querySelector('.scatterlayer .trace').__data__[0]
                .trace; return t.customdata.map((id, i) => [id, t.marker.opacity[i]]); }"""
            )
            assert dict(opacity)["DeepSeek-Coder-V2"] == 1
            assert max(v for llm, v in opacity if llm != "DeepSeek-Coder-V2") < 0.3
            page.press("#search", "Enter")
            page.wait_for_selector("#selected[data-llm-id='DeepSeek-Coder-V2']")
            found = page.evaluate("window.locusAtlas.search('llama-3')")
            assert found == [
                "Meta-Llama-3-8B", "Meta-Llama-3-70B", "Meta-Llama-3_1-8B",
                "Meta-Llama-3_1-8B-Instruct", "Meta-Llama-3_1-70B", "Meta-Llama-3_1-70B-Instruct",
            ]  # fmt: skip
            page.keyboard.press("Escape")  # the selection first, then the search
            page.keyboard.press("Escape")
            page.wait_for_function("window.locusAtlas.state().query === ''")
            assert page.locator("#llm-list li:not([hidden])").count() == 29
            page.click("#legend .chip[data-category='gemini']")  # a legend entry shows its group
            page.wait_for_function("window.locusAtlas.state().group === 'gemini'")
            assert page.eval_on_selector_all(
                "#llm-list li:not([hidden])", "rows => rows.map(r => r.dataset.llmId)"
            ) == ["gemini-1.5-flash-002", "gemini-1.5-pro-002"]
            page.keyboard.press("Escape")
            page.wait_for_function("window.locusAtlas.state().group === null")
            # a zoom re-places the labels for the new view: still none overlapping or outside
            page.evaluate(ZOOM_JS)
            page.wait_for_function("window.locusAtlas.state().view !== null")
            page.wait_for_timeout(200)
            drawn = page.evaluate(NAMES_JS)
            boxes = [label["box"] for label in drawn["labels"]]
            assert boxes and not _overlapping(boxes)
            assert all(_inside(box, drawn["area"]) for box in boxes)
            assert page.errors == []
        finally:
            browser.close()


def _leaderboard_families() -> dict[str, list[str]]:
    """755 LLMs whose names guess 300 'families' (`again`, `al`, `alita`, ...), like the open
    leaderboard's."""
    rng = np.random.default_rng(1)
    words = [f"{a}{b}" for a in ("al", "ba", "co", "de", "ex", "fi") for b in range(50)]
    families: dict[str, list[str]] = {}
    for i in range(755):
        word = words[int(rng.integers(len(words)))] if i >= 300 else words[i]
        families.setdefault(word, []).append(f"org{i % 40}/{word}-{i}-7b-v{i % 3}")
    return families


def test_a_leaderboard_scale_map_stays_readable(tmp_path: Path) -> None:
    """755 LLMs in 300 guessed families: a legend of at most 12 entries, labels that never
    overlap, every LLM in the list, and a search that finds one."""
    executable = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    payload = pool_payload(_leaderboard_families(), spread=0.25)
    payload["colour_by"] = ["cluster", "family (guessed from name)"]
    for llm in payload["llms"]:
        llm["family (guessed from name)"] = llm.pop("family")
    payload["colour_notes"] = {"cluster": "coloured by cluster: the LLM catalog gives no families"}
    page_path = write_atlas_html(payload, tmp_path / "atlas.html")
    with sync_api.sync_playwright() as playwright:
        browser = _browser(playwright, executable)
        try:
            page = _open(browser, page_path, 1400, 1000)
            assert page.locator("#legend .chip").count() == 5  # five clusters
            assert "LLM catalog gives no families" in page.inner_text("#legend")
            page.evaluate("window.locusAtlas.setColourBy('family (guessed from name)')")
            chips = page.eval_on_selector_all(
                "#legend .chip", "c => c.map(x => x.dataset.category)"
            )
            assert len(chips) <= 12 and chips[-1] == "other"
            boxes = page.evaluate(LABEL_BOXES_JS)
            assert boxes and not _overlapping(boxes)
            assert page.locator("#llm-list li").count() == 755
            found = page.evaluate("window.locusAtlas.search('alita')")
            assert found == []
            name = payload["llms"][400]["llm_id"]
            assert page.evaluate("n => window.locusAtlas.search(n)", name) == [name]
            assert page.evaluate(LABEL_BOXES_JS) and page.errors == []
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
            # the page says what its axes are (t-SNE first: it keeps the most neighbours)
            said = page.locator("#projection-kept").text_content() or ""
            assert "keeps 62% of each LLM's" in said and "axes: t-SNE" in said, said

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
