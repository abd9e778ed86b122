"""The runnable examples in docstrings run (modules whose examples need no workspace)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "locus.metrics",
    "locus.errors",
    "locus.calibration",
    "locus.routing.guard",
    "locus.routing.stack",
    "locus.routing.thin",
    "locus.routing.level",
    "locus.routing.posterior",
    "locus.routing.task_vote",
    "locus.data.graders",
    "locus.data.score_cells",
    "locus.pipeline.onboard",
    "locus.artifact.manifest",
    "locus.routing.router",
    "locus.routing.evidence",
    "locus.routing.baselines",
    "locus.routing.neighbours",
    "locus.routing.registry",
    "locus.benchmark.efficiency",
    "locus.data.families",
    "locus.atlas.geometry",
    "locus.atlas.clusters",
    "locus.atlas.projection",
    "locus.atlas.portfolio",
    "locus.atlas.proxy",
    "locus.atlas.fingerprint",
    "locus.atlas.agreement",
    "locus.atlas.search",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result
