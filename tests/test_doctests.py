"""Every runnable example in the package's docstrings runs: the modules are discovered, not
listed, so a module that gains an example is tested by it. Examples that need a workspace or a
trained artifact are marked `# doctest: +SKIP` where they are written."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import locus


def _modules_with_examples() -> list[str]:
    """Every module of the package whose docstrings hold an example that runs (not skipped)."""
    found = []
    for info in pkgutil.walk_packages(locus.__path__, prefix="locus."):
        module = importlib.import_module(info.name)
        tests = doctest.DocTestFinder(exclude_empty=True).find(module, info.name)
        runnable = [
            example
            for test in tests
            for example in test.examples
            if not example.options.get(doctest.OPTIONFLAGS_BY_NAME["SKIP"], False)
        ]
        if runnable:
            found.append(info.name)
    return found


MODULES = _modules_with_examples()


def test_discovery_finds_the_modules_with_examples() -> None:
    """The walk reaches the whole package: subpackages' modules and top-level ones alike."""
    assert {"locus.metrics", "locus.routing.stack", "locus.atlas.geometry"} <= set(MODULES)
    assert len(MODULES) >= 40


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result
