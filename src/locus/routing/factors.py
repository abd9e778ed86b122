"""The factor model a newcomer's "factor" reading is onboarded in (`locus.routing.thin`): two
matrix factorisations (`locus.routing.learned.MFRouter`), each fitted on half of the pool's LLMs.

The reading's weights are fitted on the pool's own LLMs made thin (`fit_thin`). One MF over all
of them would read an LLM from n of its scores in a space its every training score shaped, far
better than it reads a newcomer it never saw: on split2_model7 (6 LLMs) the factor weight so
fitted lowered the newcomers' AUROC from 0.715 to 0.704, and the pool's gain with them at 32
probes from -0.0092 to -0.0120 (newcomers suite, 7 newcomers x 3 seeds). So an LLM made thin is
read by the half that never saw it, as a newcomer is; a newcomer is read by both halves, their
logits averaged (`SplitFactors.logits_of`).

    >>> factors = SplitFactors.fit(train, val)                        # doctest: +SKIP
    >>> rows = factors.onboarded(probe_vectors, probe_scores)        # (2, p): one per half
    >>> factors.logits_of(query_vectors, rows[None])[:, 0]           # its logit per query
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusArtifactError, LocusInputError
from locus.routing.evidence import Evidence
from locus.routing.learned import MFRouter

__all__ = ["HALVES", "SplitFactors"]

HALVES = 2
# fewer training steps than a baseline MF's 1,500 at least: two are fitted per `locus fit`
# (measured: BFCL's 70 LLMs, 25 s for one MF of 1,500 steps)
MIN_STEPS = 600


class SplitFactors:
    """Two MF models, each over half of a pool's LLMs (`fit`), or as read back (`load`).

    Args:
        halves: the MF models; no LLM in two of them.
    """

    def __init__(self, halves: Sequence[MFRouter]) -> None:
        seen: set[str] = set()
        for half in halves:
            if seen & set(half.llm_ids):
                raise LocusInputError("a split factor model's halves share an LLM")
            seen |= set(half.llm_ids)
        if len(halves) != HALVES:
            raise LocusInputError(f"a split factor model has {HALVES} halves, found {len(halves)}")
        self.halves = tuple(halves)

    @property
    def llm_ids(self) -> list[str]:
        """The pool's LLMs, each in one half."""
        return [llm for half in self.halves for llm in half.llm_ids]

    @classmethod
    def fit(
        cls, train: Evidence, val: Evidence | None = None, *, seed: int = 0, config: Any = None
    ) -> SplitFactors:
        """One MF per half of `train`'s LLMs (halves drawn with `seed`), each fitted on their
        training scores (`val`: the kept epoch's, else the last). `config`: the MF's
        `LearnedBaselineConfig` (default: `MIN_STEPS` training steps at least).

        Raises:
            LocusInputError: fewer than two LLMs.
        """
        from locus.nn.factor_models import LearnedBaselineConfig

        if len(train.llm_ids) < HALVES:
            raise LocusInputError("a split factor model needs two LLMs at least")
        config = config or LearnedBaselineConfig(min_steps=MIN_STEPS, seed=seed)
        order = np.random.default_rng(seed).permutation(len(train.llm_ids))
        halves = []
        for part in range(HALVES):
            columns = np.sort(order[part::HALVES])
            ids = tuple(train.llm_ids[c] for c in columns)
            model = MFRouter(config)
            model.fit(
                Evidence(train.vectors, train.scores[:, columns], ids, train.tasks),
                None if val is None else _columns(val, ids),
            )
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
        """(n_queries, m) the mean over the halves of the logits of LLMs of `onboarded` vectors
        `rows` (m, 2, p)."""
        table = np.asarray(rows, np.float64)
        found = [half.logits_of(query_vectors, table[:, h]) for h, half in enumerate(self.halves)]
        return np.mean(found, axis=0)

    def thin_logits(
        self,
        llms: Sequence[str],
        evidence: Sequence[tuple[NDArray[np.float32], NDArray[np.float32]]],
        query_vectors: NDArray[np.float32],
    ) -> NDArray[np.float64]:
        """(n_queries, len(evidence)) the logits of LLMs of the pool, `llms`, each onboarded
        from its (vectors, scores) of `evidence` in the half that never saw it (an LLM of
        neither: in both, averaged; a `locus.routing.thin.FactorLogits`)."""
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
    def load(cls, path: str | Path) -> SplitFactors:
        """Read back what `save` wrote.

        Raises:
            LocusArtifactError: a missing, damaged or foreign half.
        """
        halves = []
        for h in range(HALVES):
            found = MFRouter.load(Path(path) / str(h))
            if not isinstance(found, MFRouter):  # MFRouter.load refuses another kind
                raise LocusArtifactError(f"{path}/{h}: not a matrix factorisation")
            halves.append(found)
        try:
            return cls(halves)
        except LocusInputError as error:
            raise LocusArtifactError(f"{path}: {error}") from error


def _columns(evidence: Evidence, llm_ids: Sequence[str]) -> Evidence:
    """`evidence` over `llm_ids` alone, in their order."""
    order = [list(evidence.llm_ids).index(llm) for llm in llm_ids]
    return Evidence(evidence.vectors, evidence.scores[:, order], tuple(llm_ids), evidence.tasks)
