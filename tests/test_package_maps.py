"""Every package docstring is a true map of its modules: each module named, no name stale."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGES = sorted((Path(__file__).resolve().parents[1] / "src" / "locus").rglob("__init__.py"))


@pytest.mark.parametrize("init", PACKAGES, ids=lambda p: p.parent.name)
def test_every_module_is_in_its_package_map(init: Path) -> None:
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    modules = {p.name for p in init.parent.glob("*.py")} - {"__init__.py"}
    missing = sorted(name for name in modules if name not in doc)
    assert not missing, f"{init}: the package docstring does not name {missing}"
    # a module that moved or was renamed must leave the map too
    stale = sorted(set(re.findall(r"\b([A-Za-z_]\w*\.py)\b", doc)) - modules)
    assert not stale, f"{init}: the package docstring names {stale}, which are not here"
