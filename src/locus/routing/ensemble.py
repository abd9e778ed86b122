"""Two routers' P(correct), mixed: `EnsembleRouter` and the validation choice of the mix.

LOCUS and a kNN vote over the same query vectors err differently: LOCUS reads each LLM through
its embedding, kNN reads the LLM's own scores on the nearest training queries. Their mean was
better calibrated and ranked cells better than either on three of four pools (benchmarks/README,
"locus+knn"). `choose_weight` picks the first router's weight by the lowest log-loss on
validation cells, a signal far steadier than validation routing accuracy.

    >>> import numpy as np
    >>> truth = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> sharp, flat = np.array([[0.9, 0.1], [0.2, 0.8]]), np.full((2, 2), 0.5)
    >>> choose_weight(sharp, flat, truth)
    1.0
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusArtifactError, LocusInputError
from locus.routing.base import Router

__all__ = ["ENSEMBLE_FILE", "ENSEMBLE_FOLDER", "EnsembleRouter", "choose_weight", "mix"]

# where an artifact keeps the router LOCUS is mixed with (`locus fit`: a kNN router)
ENSEMBLE_FOLDER = "knn"
# a saved EnsembleRouter: this file and its two routers' folders, `first/` and `second/`
ENSEMBLE_FILE = "ensemble.json"
_FORMAT = "locus-ensemble/1"


def mix(first: NDArray[Any], second: NDArray[Any], weight: float) -> NDArray[np.float64]:
    """weight x first + (1 - weight) x second, elementwise."""
    return weight * np.asarray(first, np.float64) + (1.0 - weight) * np.asarray(second, np.float64)


def _log_loss(proba: NDArray[np.float64], truth: NDArray[Any]) -> float:
    y = np.asarray(truth, dtype=np.float64)
    scored = ~np.isnan(y)
    p = np.clip(proba[scored], 1e-6, 1 - 1e-6)
    return float(-np.mean(y[scored] * np.log(p) + (1 - y[scored]) * np.log(1 - p)))


def choose_weight(
    first: NDArray[Any], second: NDArray[Any], truth: NDArray[Any], *, steps: int = 10
) -> float:
    """The weight of `first` in {0, 1/steps, ..., 1} with the lowest log-loss of the mix on
    `truth`'s scored cells (ties: the larger weight).

    Raises:
        LocusInputError: shapes that differ, or no scored cell.
    """
    a, b, y = np.asarray(first), np.asarray(second), np.asarray(truth, dtype=np.float64)
    if not a.shape == b.shape == y.shape:
        raise LocusInputError(f"choose_weight: shapes {a.shape}, {b.shape}, {y.shape} differ")
    if not (~np.isnan(y)).any():
        raise LocusInputError("choose_weight: no scored cell to choose a weight on")
    losses = {w: _log_loss(mix(a, b, w), y) for w in np.linspace(1.0, 0.0, steps + 1)}
    return float(min(losses, key=lambda w: (losses[w], -w)))


class EnsembleRouter(Router):
    """P(correct) = weight x `first`'s + (1 - weight) x `second`'s, over `first`'s LLMs.

    Args:
        first, second: fitted routers over the same LLMs (any column order).
        weight: `first`'s share, in [0, 1] (`choose_weight` picks one on validation).

    Raises:
        LocusInputError: a weight outside [0, 1], or routers over different LLMs.
    """

    def __init__(self, first: Router, second: Router, weight: float) -> None:
        if not 0.0 <= weight <= 1.0:
            raise LocusInputError(f"an ensemble weight must lie in [0, 1], found {weight}")
        ids, other = list(first.llm_ids), list(second.llm_ids)
        if sorted(ids) != sorted(other):
            missing = sorted(set(ids) ^ set(other))
            raise LocusInputError(
                f"an ensemble needs routers over the same LLMs; {missing[0]!r} is in one only"
            )
        self.first, self.second, self.weight = first, second, float(weight)
        self._order = [other.index(llm) for llm in ids]

    @property
    def llm_ids(self) -> Sequence[str]:  # type: ignore[override]
        return self.first.llm_ids

    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        a = self.first.predict_proba(query_vectors)
        b = np.asarray(self.second.predict_proba(query_vectors))[:, self._order]
        return mix(a, b, self.weight).astype(np.float32)

    def save(self, path: str | Path) -> Path:
        """The folder `path`: `ensemble.json` (the weight) and each router's own folder."""
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        self.first.save(folder / "first")
        self.second.save(folder / "second")
        description = {"format": _FORMAT, "weight": self.weight}
        (folder / ENSEMBLE_FILE).write_text(json.dumps(description, indent=2) + "\n")
        return folder

    @classmethod
    def load(cls, path: str | Path) -> EnsembleRouter:
        """Rebuild from a folder written by `save` (each part by `load_router`).

        Raises:
            LocusArtifactError: not an ensemble folder, or a damaged one.
        """
        from locus.routing.registry import load_router

        folder = Path(path)
        try:
            description = json.loads((folder / ENSEMBLE_FILE).read_text())
            weight = float(description["weight"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise LocusArtifactError(
                f"{folder / ENSEMBLE_FILE}: not a saved ensemble ({error})"
            ) from error
        if description.get("format") != _FORMAT:
            raise LocusArtifactError(
                f"{folder / ENSEMBLE_FILE}: format {description.get('format')!r}, expected "
                f"{_FORMAT!r}"
            )
        return cls(load_router(folder / "first"), load_router(folder / "second"), weight)
