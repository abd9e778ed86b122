"""The factor models a newcomer's "factor" and "ability" readings are onboarded in
(`locus.routing.thin`): an EmbedLLM-style matrix factorisation (`MFRouter`) and an IRT model
(`IRTRouter`), each fitted as two halves over half of the pool's LLMs (`SplitFactors`).

The readings' weights are fitted on the pool's own LLMs made thin (`fit_thin`). One model over
all of them would read an LLM from n of its scores in a space its every training score shaped,
far better than it reads a newcomer it never saw: on split2_model7 (6 LLMs) the MF weight so
fitted lowered the newcomers' AUROC from 0.715 to 0.704, and the pool's gain with them at 32
probes from -0.0092 to -0.0120 (newcomers suite, 7 newcomers x 3 seeds). So an LLM made thin is
read by the half that never saw it, as a newcomer is; a newcomer is read by both halves, their
logits averaged.

    >>> factors = Factors.fit(train, val)                             # doctest: +SKIP
    >>> rows = factors.onboarded(probe_vectors, probe_scores)  # (2, p)  # doctest: +SKIP
    >>> found = factors.logits_of(query_vectors, {"factor": rows["factor"][None]})  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusArtifactError, LocusInputError
from locus.routing.evidence import Evidence
from locus.routing.learned import IRTRouter, MFRouter
from locus.routing.thin import FACTOR_READINGS

__all__ = ["BATCHES", "HALVES", "MIN_STEPS", "PATIENCE", "READINGS", "Factors", "SplitFactors"]

HALVES = 2
# the thin reading each model gives (`locus.routing.thin.FACTOR_READINGS`), and its kind
READINGS = dict(zip(FACTOR_READINGS, ("mf", "irt"), strict=True))
_KINDS: dict[str, type[MFRouter] | type[IRTRouter]] = {"mf": MFRouter, "irt": IRTRouter}
# fewer training steps than a baseline's 1,500 at least: four models are fitted per `locus fit`
# (measured: BFCL's 70 LLMs, 25 s for one MF of 1,500 steps, 7.5 s for one IRT)
MIN_STEPS = 600
# epochs without a better validation loss before a model stops (a baseline's 5): measured on
# the newcomers suite, BFCL's and split2_model7's newcomers read within 0.001 in AUROC and
# log-loss at every k, at a third less of the models' fit time (docs/decisions.md)
PATIENCE = 2
# each training batch whole queries with all their cells: a query's projection (MF) or hidden
# layer (IRT) computed once for its LLMs, not once per cell (`LearnedBaselineConfig.batches`)
BATCHES: Final = "queries"

Rows = Mapping[str, NDArray[Any]]  # per reading, an LLM's vectors (2, p) or LLMs' (m, 2, p)


class SplitFactors:
    """One kind of factor model ("mf" or "irt") as two halves, each over half of a pool's LLMs
    (`fit`), or as read back (`load`).

    Args:
        halves: the two models, of one kind; no LLM in both.
    """

    def __init__(self, halves: Sequence[MFRouter | IRTRouter]) -> None:
        if len(halves) != HALVES or len({half.kind for half in halves}) != 1:
            raise LocusInputError(f"a split factor model is {HALVES} halves of one kind")
        if set(halves[0].llm_ids) & set(halves[1].llm_ids):
            raise LocusInputError("a split factor model's halves share an LLM")
        self.halves = tuple(halves)
        self.kind = halves[0].kind

    @property
    def llm_ids(self) -> list[str]:
        """The pool's LLMs, each in one half."""
        return [llm for half in self.halves for llm in half.llm_ids]

    @classmethod
    def fit(
        cls, kind: str, train: Evidence, val: Evidence | None = None, *, seed: int = 0,
        config: Any = None,
    ) -> SplitFactors:  # fmt: skip
        """Two models of `kind`, each over half of `train`'s LLMs (halves drawn with `seed`),
        fitted on their training scores (`val`: the kept epoch's, else the last). `config`:
        the `LearnedBaselineConfig` (default: `MIN_STEPS` training steps at least, `PATIENCE`).

        Raises:
            LocusInputError: an unknown kind, or fewer than two LLMs.
        """
        from locus.nn.factor_models import LearnedBaselineConfig

        if kind not in _KINDS:
            raise LocusInputError(f"factor model {kind!r}: expected one of {sorted(_KINDS)}")
        if len(train.llm_ids) < HALVES:
            raise LocusInputError("a split factor model needs two LLMs at least")
        config = config or LearnedBaselineConfig(
            min_steps=MIN_STEPS, patience=PATIENCE, seed=seed, batches=BATCHES
        )
        order = np.random.default_rng(seed).permutation(len(train.llm_ids))
        halves = []
        for part in range(HALVES):
            ids = tuple(train.llm_ids[c] for c in np.sort(order[part::HALVES]))
            model = _KINDS[kind](config)
            model.fit(_columns(train, ids), None if val is None else _columns(val, ids))
            halves.append(model)
        return cls(halves)

    def onboarded(
        self, vectors: NDArray[np.float32], scores: NDArray[np.floating[Any]]
    ) -> NDArray[np.float32]:
        """(2, p) an LLM's vector in each half, onboarded from its `scores` (n,) on queries of
        `vectors` (n, dq) (`MFRouter.onboarded_vector`)."""
        return np.stack([half.onboarded_vector(vectors, scores) for half in self.halves])

    def logits_of(
        self, query_vectors: NDArray[np.float32], rows: NDArray[np.floating[Any]]
    ) -> NDArray[np.float64]:
        """(n_queries, m) the mean over the halves of the logits of LLMs of `onboarded`
        vectors `rows` (m, 2, p)."""
        table = np.asarray(rows, np.float64)
        found = [half.logits_of(query_vectors, table[:, h]) for h, half in enumerate(self.halves)]
        return np.mean(found, axis=0)

    def thin_logits(
        self,
        llms: Sequence[str],
        evidence: Sequence[tuple[NDArray[np.float32], NDArray[np.float32]]],
        query_vectors: NDArray[np.float32],
    ) -> NDArray[np.float64]:
        """(n_queries, len(evidence)) the logits of the pool's LLMs `llms`, each onboarded from
        its (vectors, scores) of `evidence` in the half that never saw it (an LLM of neither:
        in both, averaged)."""
        total = np.zeros((len(query_vectors), len(evidence)))
        count = np.zeros(len(evidence))
        for half in self.halves:
            mine = set(half.llm_ids)
            draws = [i for i, llm in enumerate(llms) if llm not in mine]
            if draws:
                rows = np.stack([half.onboarded_vector(*evidence[i]) for i in draws])
                total[:, draws] += half.logits_of(query_vectors, rows)
                count[draws] += 1
        return total / np.maximum(count, 1)

    def save(self, path: str | Path) -> Path:
        """Each half into its own router folder, `path`/0 and `path`/1."""
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        for h, half in enumerate(self.halves):
            half.save(folder / str(h))
        return folder

    @classmethod
    def load(cls, path: str | Path, kind: str) -> SplitFactors:
        """Read back what `save` wrote for a model of `kind`.

        Raises:
            LocusArtifactError: a missing, damaged or foreign half.
        """
        halves = []
        for h in range(HALVES):
            found = _KINDS[kind].load(Path(path) / str(h))  # refuses another kind
            assert isinstance(found, (MFRouter, IRTRouter))
            halves.append(found)
        try:
            return cls(halves)
        except LocusInputError as error:
            raise LocusArtifactError(f"{path}: {error}") from error


class Factors:
    """The factor models of a router's newcomer readings, by reading (`READINGS`).

    Args:
        models: per reading, its `SplitFactors` (of the kind `READINGS` names).
    """

    def __init__(self, models: Mapping[str, SplitFactors]) -> None:
        for name, model in models.items():
            if READINGS.get(name) != model.kind:
                raise LocusInputError(f"factor reading {name!r}: not a {model.kind} model")
        self.models = dict(models)

    @property
    def llm_ids(self) -> list[str]:
        """The pool's LLMs (every model's)."""
        return sorted({llm for model in self.models.values() for llm in model.llm_ids})

    @classmethod
    def fit(cls, train: Evidence, val: Evidence | None = None, *, seed: int = 0) -> Factors:
        """Every reading's model fitted on `train` (`SplitFactors.fit`)."""
        return cls({
            name: SplitFactors.fit(kind, train, val, seed=seed) for name, kind in READINGS.items()
        })  # fmt: skip

    def onboarded(self, vectors: NDArray[np.float32], scores: NDArray[np.floating[Any]]) -> Rows:
        """Per reading, an LLM's vectors (2, p) onboarded from its `scores` (n,) on queries of
        `vectors` (n, dq)."""
        return {name: model.onboarded(vectors, scores) for name, model in self.models.items()}

    def logits_of(
        self, query_vectors: NDArray[np.float32], rows: Rows
    ) -> dict[str, NDArray[np.float64]]:
        """Per reading, (n_queries, m) the logits of LLMs of `onboarded` vectors (m, 2, p)."""
        return {
            name: model.logits_of(query_vectors, rows[name])
            for name, model in self.models.items()
        }  # fmt: skip

    def by_llm(
        self, query_vectors: NDArray[np.float32], rows: Mapping[str, Rows]
    ) -> dict[str, dict[str, NDArray[np.float64]]]:
        """Per LLM of `rows` (its `onboarded` vectors), per reading, its logits (n_queries,)."""
        names = list(rows)
        if not names:
            return {}
        stacked = {
            reading: np.stack([rows[name][reading] for name in names]) for reading in self.models
        }
        found = self.logits_of(query_vectors, stacked)
        return {
            name: {reading: logits[:, i] for reading, logits in found.items()}
            for i, name in enumerate(names)
        }

    def thin_logits(
        self,
        llms: Sequence[str],
        evidence: Sequence[tuple[NDArray[np.float32], NDArray[np.float32]]],
        query_vectors: NDArray[np.float32],
    ) -> dict[str, NDArray[np.float64]]:
        """Per reading, `SplitFactors.thin_logits` (a `locus.routing.thin.FactorLogits`)."""
        return {
            name: model.thin_logits(llms, evidence, query_vectors)
            for name, model in self.models.items()
        }  # fmt: skip

    def save(self, path: str | Path) -> Path:
        """Each model into `path`/<kind>/ (`SplitFactors.save`)."""
        folder = Path(path)
        for model in self.models.values():
            model.save(folder / model.kind)
        return folder

    @classmethod
    def load(cls, path: str | Path) -> Factors:
        """Read back what `save` wrote: each reading whose model's folder is there.

        Raises:
            LocusArtifactError: a damaged or foreign model, or none.
        """
        folder = Path(path)
        models = {
            name: SplitFactors.load(folder / kind, kind)
            for name, kind in READINGS.items()
            if (folder / kind).is_dir()
        }
        if not models:
            raise LocusArtifactError(f"{folder}: no factor model")
        return cls(models)


def _columns(evidence: Evidence, llm_ids: Sequence[str]) -> Evidence:
    """`evidence` over `llm_ids` alone, in their order."""
    order = [list(evidence.llm_ids).index(llm) for llm in llm_ids]
    return Evidence(evidence.vectors, evidence.scores[:, order], tuple(llm_ids), evidence.tasks)
