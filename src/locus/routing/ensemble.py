"""LOCUS and a kNN router combined: the `Stack` that `locus fit` keeps, and the older mixture.

LOCUS and a kNN vote over the same query vectors err differently: LOCUS reads each LLM through
its embedding, kNN reads the LLM's own scores on the nearest training queries. LOCUS's networks
rank queries by difficulty well but explain little of which LLM suits which query (on
split2_model7 the interaction is under 1% of its logit variance), which is what the votes
carry. `fit_stack` gives each part two weights, one for how hard the query is and one for which
LLM suits it, fitted by log-loss on validation cells (benchmarks/README, "Stacked"). `mix` and
`choose_weight` are the mixture of probabilities at one weight that artifacts of earlier
versions keep, and `EnsembleRouter` mixes any two routers that way.

    >>> import numpy as np
    >>> truth = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> sharp, flat = np.array([[0.9, 0.1], [0.2, 0.8]]), np.full((2, 2), 0.5)
    >>> choose_weight(sharp, flat, truth)
    1.0
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusArtifactError, LocusInputError
from locus.routing.base import Router

__all__ = [
    "ENSEMBLE_FILE",
    "ENSEMBLE_FOLDER",
    "STACK_KS",
    "EnsembleRouter",
    "Stack",
    "choose_weight",
    "fit_stack",
    "knn_logits",
    "mix",
]

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


# the kNN router's neighbourhood sizes the stack reads: a local vote and a regional one (about a
# task's worth of queries); capped per LLM at its training evidence by the router itself
STACK_KS = (50, 500)


def knn_logits(proba: NDArray[Any], k: int) -> NDArray[np.float64]:
    """Logits of kNN means over `k` neighbours, smoothed by one pseudo-success and one
    pseudo-failure so that an unanimous vote stays finite: logit((k p + 1) / (k + 2))."""
    smoothed = (k * np.asarray(proba, np.float64) + 1.0) / (k + 2.0)
    return np.log(smoothed) - np.log1p(-smoothed)


def _stack_features(locus_logits: NDArray[Any], knn_probas: Sequence[NDArray[Any]],
                    ks: Sequence[int]) -> NDArray[np.float64]:  # fmt: skip
    """(n_queries, n_llms, 2 (1 + len(ks))): per part, its mean over the LLMs on the query (how
    hard the query is) and each LLM's deviation from that mean (which LLM suits it)."""
    parts = [np.asarray(locus_logits, np.float64)]
    parts += [knn_logits(p, k) for p, k in zip(knn_probas, ks, strict=True)]
    features = []
    for logits in parts:
        level = np.broadcast_to(logits.mean(axis=1, keepdims=True), logits.shape)
        features += [level, logits - level]
    return np.stack(features, axis=-1)


@dataclass(frozen=True)
class Stack:
    """LOCUS and a kNN router combined in logit space, each part split in two.

    logit P(correct) = c + sum over parts of (a_p x level_p(query) + b_p x deviation_p(query,
    LLM)), the parts being LOCUS's calibrated logit and the kNN router's smoothed logits at each
    k of `ks`, level the part's mean over the LLMs on the query and deviation an LLM's distance
    from it. A mixture of probabilities gives one weight to both: the part that ranks queries
    by difficulty best (LOCUS) then also decides which LLM a query goes to, where LOCUS's
    networks explain little beyond each LLM's quality. Split, the kNN votes' deviations can
    carry the routing while LOCUS carries the difficulty (benchmarks/README, "Stacked").

    Attributes:
        ks: the kNN neighbourhood sizes, in the order of `weights`' kNN parts.
        weights: (level, deviation) weight pairs, LOCUS's first, flattened.
        bias: c.
    """

    ks: tuple[int, ...]
    weights: tuple[float, ...]
    bias: float

    def __post_init__(self) -> None:
        if len(self.weights) != 2 * (1 + len(self.ks)):
            raise LocusInputError(
                f"a stack over LOCUS and {len(self.ks)} kNN parts needs "
                f"{2 * (1 + len(self.ks))} weights, found {len(self.weights)}"
            )

    def logits(
        self, locus_logits: NDArray[Any], knn_probas: Sequence[NDArray[Any]]
    ) -> NDArray[np.float64]:
        """Combined logits (n_queries, n_llms) from LOCUS's calibrated logits and the kNN
        router's P(correct) at each k of `ks`, all over the same LLMs (n_queries, n_llms)."""
        features = _stack_features(locus_logits, knn_probas, self.ks)
        return features @ np.asarray(self.weights) + self.bias

    def part_names(self) -> list[str]:
        """ "locus", then "knn<k>" for each k."""
        return ["locus", *(f"knn{k}" for k in self.ks)]

    def describe(self) -> str:
        """One line: each part's weight on which LLM suits the query (deviation) and on how
        hard the query is (level)."""
        pairs = zip(self.part_names(), self.weights[0::2], self.weights[1::2], strict=True)
        return ", ".join(f"{name} {dev:.2f} / {level:.2f}" for name, level, dev in pairs)

    def as_dict(self) -> dict[str, Any]:
        return {"ks": list(self.ks), "weights": list(self.weights), "bias": self.bias}

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> Stack:
        return cls(
            ks=tuple(int(k) for k in value["ks"]),
            weights=tuple(float(w) for w in value["weights"]),
            bias=float(value["bias"]),
        )


def fit_stack(
    locus_logits: NDArray[Any],
    knn_probas: Sequence[NDArray[Any]],
    truth: NDArray[Any],
    ks: Sequence[int] = STACK_KS,
    *,
    penalty: float = 1e-4,
) -> Stack:
    """The `Stack` of lowest log-loss on `truth`'s scored cells (graded scores are soft
    targets), its weights pulled towards LOCUS alone (1 on both LOCUS parts, 0 elsewhere) by
    `penalty` x their squared distance, which keeps a few validation queries from fitting noise.

    Raises:
        LocusInputError: shapes that differ, or no scored cell.
    """
    y = np.asarray(truth, dtype=np.float64)
    shapes = {np.shape(locus_logits), y.shape, *(np.shape(p) for p in knn_probas)}
    if len(shapes) != 1 or len(knn_probas) != len(ks):
        raise LocusInputError(
            f"fit_stack: LOCUS logits {np.shape(locus_logits)}, truth {y.shape} and "
            f"{len(knn_probas)} kNN tables for ks {list(ks)} must all have one shape"
        )
    scored = ~np.isnan(y)
    if not scored.any():
        raise LocusInputError("fit_stack: no scored cell to fit the stack on")
    from scipy.optimize import minimize

    x, target = _stack_features(locus_logits, knn_probas, ks)[scored], y[scored]  # (cells, f)
    start = np.zeros(x.shape[1])
    start[:2] = 1.0

    def loss(params: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        weights, bias = params[:-1], params[-1]
        z = x @ weights + bias
        p = 0.5 * (1.0 + np.tanh(0.5 * z))  # sigmoid without overflow
        value = np.mean(np.logaddexp(0.0, z) - target * z)
        value += penalty * np.sum((weights - start) ** 2)
        gradient = x.T @ (p - target) / len(target) + 2 * penalty * (weights - start)
        return float(value), np.append(gradient, np.mean(p - target))

    found = minimize(loss, np.append(start, 0.0), jac=True, method="L-BFGS-B").x
    return Stack(tuple(int(k) for k in ks), tuple(float(w) for w in found[:-1]), float(found[-1]))


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
