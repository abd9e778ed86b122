"""CHANGELOG.md's table of on-disk formats names the formats this locus writes: the artifact's,
`stacked.json`'s, a router folder's and the workspace store's schema (the store's row said 4
while locus wrote 6)."""

from __future__ import annotations

from pathlib import Path

from locus.artifact.formats import ARTIFACT_FORMAT, ROUTER_FOLDER_FORMAT, STACKED_FORMAT
from locus.store.schema import SCHEMA_VERSION

CHANGELOG = Path(__file__).resolve().parents[1] / "CHANGELOG.md"


def _current_column() -> dict[str, str]:
    """Each row of the formats table: its first cell's first words -> its "current" cell."""
    rows = {}
    for line in CHANGELOG.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] not in ("what", "---"):
            rows[" ".join(cells[0].split()[:2])] = cells[2]
    return rows


def test_the_changelog_names_the_formats_locus_writes() -> None:
    current = _current_column()
    assert current["artifact (`artifacts/NAME/`:"].startswith(f"`{ARTIFACT_FORMAT}`")
    assert current["the fitted"].startswith(f"`{STACKED_FORMAT}`")
    assert current["router folders"].startswith(f"`{ROUTER_FOLDER_FORMAT}`")
    assert current["workspace store"] == f"`{SCHEMA_VERSION}`"
