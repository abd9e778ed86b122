"""The public API is small and pinned: a change to it is a deliberate change to this test."""

from __future__ import annotations

import subprocess
import sys

import pytest

import locus


def test_exported_names_are_pinned() -> None:
    assert sorted(locus.__all__) == sorted(
        [
            "ImportBatch",
            "Locus",
            "LocusArtifactError",
            "LocusConflictError",
            "LocusError",
            "LocusInputError",
            "LocusNotFittedError",
            "LocusNotFoundError",
            "LocusStoreError",
            "ScoreTable",
            "TrainingConfig",
            "__version__",
        ]
    )
    for name in locus.__all__:
        assert getattr(locus, name) is not None


def test_import_is_light() -> None:
    """`import locus` pulls in neither torch, typer, nor sentence-transformers."""
    code = (
        "import sys, locus; "
        "print(','.join(m for m in ('torch', 'typer', 'sentence_transformers', 'sqlalchemy') "
        "if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == ""


def test_torch_backed_names_load_on_first_use() -> None:
    from locus.locus import Locus
    from locus.nn import TrainingConfig

    assert locus.Locus is Locus
    assert locus.TrainingConfig is TrainingConfig
    with pytest.raises(AttributeError, match="NoSuchName"):
        locus.NoSuchName  # noqa: B018
