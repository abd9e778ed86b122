"""`locus --help` lists the commands in working order, grouped by the job (issue 36)."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from locus.cli import app
from locus.cli._help import PANELS


def test_every_command_has_its_place_in_the_working_order() -> None:
    named = {name for _, names in PANELS for name in names}
    registered = {info.name for info in app.registered_commands} | {
        info.name for info in app.registered_groups
    }
    assert registered == named  # a new command is placed on purpose, not left in "More"


def test_help_shows_the_groups_in_order_with_demo_first() -> None:
    result = CliRunner().invoke(app, ["--help"], terminal_width=120)
    assert result.exit_code == 0
    panels = [p for p, _ in PANELS]
    positions = [result.output.index(f"─ {panel} ") for panel in panels]
    assert positions == sorted(positions)
    listed = re.findall(r"^│ ([a-z][a-z-]+) ", result.output, flags=re.MULTILINE)
    assert listed[:5] == ["demo", "import", "fit", "evaluate", "route"]
    assert listed == [name for _, names in PANELS for name in names]
