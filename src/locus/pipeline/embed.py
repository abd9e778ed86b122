"""Onboard or refine LLMs from the scores a workspace holds, with no retraining.

>>> [report] = embed_workspace_llms(store, ["new-llm"])             # doctest: +SKIP
>>> report.evidence, report.new  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from locus.errors import LocusInputError, LocusNotFoundError, did_you_mean
from locus.pipeline.data import workspace_table
from locus.pipeline.fit import load_workspace_locus
from locus.pipeline.workspace_artifacts import DEFAULT_ARTIFACT
from locus.store import Store

__all__ = ["EmbedReport", "embed_workspace_llms"]


@dataclass(frozen=True)
class EmbedReport:
    """One LLM (re)embedded: from how many scores, how long the forward pass took, how far it
    moved (Euclidean and cosine distance from its previous embedding; None when new)."""

    llm_id: str
    artifact: str
    evidence: int
    seconds: float
    moved: float | None
    cosine_moved: float | None
    new: bool

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def embed_workspace_llms(
    store: Store,
    llm_ids: Sequence[str] | None = None,
    *,
    name: str = DEFAULT_ARTIFACT,
    include_test: bool = False,
    model: Any = None,
) -> list[EmbedReport]:
    """(Re)compute LLM embeddings from the scores the workspace holds, one forward pass each.

    Args:
        llm_ids: the LLMs to embed (default: every LLM of the workspace).
        name: the artifact whose encoder embeds them and whose pool receives them.
        include_test: also use scores on test-split queries (by default they are left out, so
            `evaluate` stays honest).

    `model`: the artifact's `Locus`, where the caller has it loaded (default: loaded here, and
    closed after).

    Other LLMs' embeddings do not move. Each new embedding is written to the workspace's pool
    as soon as it is computed.
    """
    loaded_here = model is None
    model = load_workspace_locus(store, name) if model is None else model
    known = store.llm_ids()
    wanted = list(known) if llm_ids is None else list(dict.fromkeys(llm_ids))
    known_set = set(known)
    unknown = [llm for llm in wanted if llm not in known_set]
    if unknown:
        raise LocusNotFoundError(
            f"unknown LLM {unknown[0]!r}{did_you_mean(unknown[0], known)}; expected an LLM of "
            "the workspace (see `locus llms`); import its scores first"
        )
    data = workspace_table(store, split_seed=model.manifest.split_seed, llm_ids=wanted)
    allowed = np.ones(len(data.splits), dtype=bool) if include_test else data.splits != "test"
    evidence, counts = [], []
    for llm_id in wanted:
        column = data.table.scores[:, data.table.llm_index(llm_id)]
        usable = ~np.isnan(column) & allowed
        if not usable.any():
            raise LocusInputError(
                f"LLM {llm_id!r} has no usable scores (scored queries with text"
                f"{'' if include_test else ', outside the test split'}); import some first"
            )
        evidence.append((data.vectors[usable], column[usable]))
        counts.append(int(usable.sum()))
    reports = []
    for llm_id, (vectors, scores), count in zip(wanted, evidence, counts, strict=True):
        started = time.perf_counter()
        vector = model.embed(vectors, scores)
        seconds = time.perf_counter() - started
        previous = model.pool_.upsert(llm_id, vector, count, float(np.mean(scores)))
        moved = cosine = None
        if previous is not None:
            moved = float(np.linalg.norm(previous - vector))
            norms = float(np.linalg.norm(previous) * np.linalg.norm(vector))
            cosine = float(1.0 - previous @ vector / norms) if norms > 0 else None
        reports.append(
            EmbedReport(
                llm_id=llm_id,
                artifact=name,
                evidence=count,
                seconds=seconds,
                moved=moved,
                cosine_moved=cosine,
                new=previous is None,
            )
        )
    if loaded_here:
        model.close()
    return reports
