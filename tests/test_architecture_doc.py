"""docs/architecture.md stays the map of the code: every module of the package appears in its
layer map, every path the page names exists, and so does every symbol it names."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "locus"
PAGE = ROOT / "docs" / "architecture.md"
# a path in backticks: folder/file.ext or folder/ (what a reader would look for in the tree)
NAMED_PATH = re.compile(r"`([A-Za-z0-9_./-]+/(?:[A-Za-z0-9_.-]+\.(?:py|md|json|toml|txt|yaml))?)`")
# a symbol as the page names one: CamelCase (a class) or snake_case with an underscore (a
# function, constant or attribute); plain words are prose
NAMED_SYMBOL = re.compile(
    r"\b([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[A-Za-z][a-z0-9]*(?:_[A-Za-z0-9]+)+)\b"
)
# names from outside the package's code that the page uses as words
OUTSIDE = {
    "AsyncClient",  # httpx
    "EmbedLLM",  # the paper's data
    "FastAPI",
    "LinUCB",  # mabwiser's policy
    "MiniLM",
    "NaN",
    "OpenAI",
    "prometheus_client",
    "query_text",  # a column of the user's files
    "split2_model7",  # a pool of the real data
}


def _layer_map() -> str:
    """The fenced block under "## Layers"."""
    text = PAGE.read_text(encoding="utf-8")
    layers = text.split("## Layers", 1)[1]
    return layers.split("```", 2)[1]


def _sections(block: str) -> dict[str, str]:
    """The map's text per top-level entry: "routing" -> its lines; top-level modules under
    their own name ("metrics.py")."""
    out: dict[str, str] = {}
    current = ""
    for line in block.splitlines():
        head = re.match(r"^([A-Za-z_][\w.]*/?)\s", line + " ")
        if head and not line.startswith(" "):
            current = head.group(1).rstrip("/")
        out[current] = out.get(current, "") + line + "\n"
    return out


def _modules() -> list[Path]:
    return sorted(
        path.relative_to(PACKAGE)
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and "__pycache__" not in path.parts
    )


def test_every_module_appears_in_the_layer_map() -> None:
    sections = _sections(_layer_map())
    missing = []
    for module in _modules():
        if len(module.parts) == 1:  # a top-level module: named anywhere in the map
            if module.name not in _layer_map() and module.stem not in sections:
                missing.append(str(module))
            continue
        section = sections.get(module.parts[0], "")
        if not re.search(rf"(?<![\w.]){re.escape(module.stem)}(?![\w])", section):
            missing.append(str(module))
    assert not missing, f"docs/architecture.md's layer map does not name: {', '.join(missing)}"


def test_every_path_the_page_names_exists() -> None:
    text = PAGE.read_text(encoding="utf-8")
    missing = []
    for named in sorted(set(NAMED_PATH.findall(text))):
        candidates = [ROOT / named, PACKAGE / named, ROOT / "src" / named]
        if not any(path.exists() for path in candidates):
            missing.append(named)
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def _defined_names() -> set[str]:
    """Every name the package's code defines: functions, classes, assignments (module, class
    and instance attributes, dataclass fields), and the modules themselves, with the
    benchmark scripts' names."""
    names: set[str] = set()
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    for path in files:
        text = path.read_text(encoding="utf-8")
        names.add(path.stem)
        names |= set(re.findall(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", text, re.M))
        names |= set(re.findall(r"^\s*(\w+)\s*(?::[^=\n]*)?=", text, re.M))
        names |= set(re.findall(r"\bself\.(\w+)\s*(?::[^=\n]*)?=", text))
        names |= set(re.findall(r"^\s+(\w+):\s", text, re.M))
    return names


def _named_symbols(text: str) -> set[str]:
    without_paths = NAMED_PATH.sub("", text)
    return set(NAMED_SYMBOL.findall(without_paths)) - OUTSIDE


def test_every_symbol_the_page_names_exists() -> None:
    defined = _defined_names()
    missing = sorted(_named_symbols(PAGE.read_text(encoding="utf-8")) - defined)
    assert not missing, f"docs/architecture.md names symbols the code does not define: {missing}"


def test_the_symbol_check_can_fail() -> None:
    assert {"StackedRouter", "fit_stack", "NoSuchRouter"} <= _named_symbols(
        "`StackedRouter` fits `fit_stack` beside NoSuchRouter; plain words stay prose"
    )
    defined = _defined_names()
    assert {"StackedRouter", "fit_stack", "STACK_KS"} <= defined
    assert "NoSuchRouter" not in defined


def test_the_check_can_fail() -> None:
    """The map parser finds the layers it should: a map it cannot read would pass anything."""
    sections = _sections(_layer_map())
    assert {"cli", "server", "routing", "store", "data", "text"} <= set(sections)
    assert "decision.py" in sections["routing"]
