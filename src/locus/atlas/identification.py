"""`locus identify` over a workspace's pool: which known LLM is behind an endpoint.

Where known LLMs were scored on the endpoint's queries (at least `MIN_SHARED` each, for at
least two of them), the endpoint is compared with their actual scores
(`locus.atlas.agreement`); otherwise with what the pool's LLMs are measured to do per task and
with their embeddings, weighted and thresholded on a draw of the pool at the endpoint's
evidence size (`locus.atlas.fingerprint`). A query the workspace does not hold takes the task
of the nearest query it does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from locus.atlas.agreement import MIN_SHARED, shared_matches
from locus.atlas.fingerprint import (
    calibrate,
    calibration_draws,
    fingerprint_report,
    identify,
)
from locus.atlas.probe_file import ProbeEvidence
from locus.data.query_identity import text_hash

if TYPE_CHECKING:
    from locus.atlas.pool_atlas import WorkspaceAtlas

__all__ = [
    "describe_weight",
    "identify_endpoint",
    "identify_endpoints",
    "nearest_rows",
    "rows_of",
]


def identify_endpoints(
    atlas: WorkspaceAtlas, evidence: Mapping[str, ProbeEvidence], *, top: int = 5, seed: int = 0
) -> list[dict[str, Any]]:
    """For each unknown endpoint (name -> its scored queries), the known LLMs most like it and
    a verdict."""
    return [
        identify_endpoint(atlas, name, probe, top=top, seed=seed)
        for name, probe in evidence.items()
    ]


def identify_endpoint(
    atlas: WorkspaceAtlas, name: str, probe: ProbeEvidence, *, top: int = 5, seed: int = 0
) -> dict[str, Any]:
    """The `top` known LLMs most like one endpoint and the verdict (the LLM it is, or None)."""
    rows = rows_of(atlas.data.table.text_hashes, probe.texts)
    scores = np.asarray(probe.scores, dtype=np.float64)
    known = rows >= 0
    pool = np.full((len(rows), len(atlas.llm_ids)), np.nan)
    pool[known] = atlas.scores()[rows[known]]
    head = {"endpoint": name, "scores": len(scores)}
    if ((~np.isnan(pool)).sum(axis=0) >= MIN_SHARED).sum() >= 2:
        shared, threshold = shared_matches(scores, pool, atlas.llm_ids, top=top)
        return {
            **head,
            "mode": "shared queries",
            "threshold": threshold,
            "verdict": shared[0].llm_id if shared[0].same else None,
            "matches": [m.as_dict() for m in shared],
        }
    k = min(len(scores), atlas.max_probe())
    draws = calibration_draws(lambda s: atlas.fingerprint_draw(k, seed=s), seed=seed)
    weight, threshold = calibrate(draws)
    draw = draws[0]
    embedding = np.asarray(atlas.embed([(probe.vectors, probe.scores)]), dtype=np.float64)[0]
    tasks = atlas.task_index()[nearest_rows(atlas.data.vectors, probe.vectors, rows)]
    matches = identify(
        draw.score_probe(embedding, tasks, scores, weight), draw.llm_ids, threshold, top=top
    )
    return {
        **head,
        "mode": "new queries",
        "threshold": threshold,
        "signal": describe_weight(weight),
        "calibration": {
            **fingerprint_report(draw, weight, threshold),
            "weight": None if np.isinf(weight) else weight,
        },
        "verdict": matches[0].llm_id if matches[0].same else None,
        "matches": [m.as_dict() for m in matches],
    }


def describe_weight(weight: float) -> str:
    """What an embedding weight means, in words."""
    if np.isinf(weight):
        return "embedding distance alone"
    if weight == 0:
        return "per-task likelihood alone"
    return f"per-task likelihood + {weight:g} x embedding distance (standardised)"


def rows_of(text_hashes: Sequence[str], texts: Sequence[str]) -> NDArray[np.int64]:
    """(n,) the row of each text among `text_hashes` (-1: not there)."""
    index = {h: i for i, h in enumerate(text_hashes)}
    return np.array([index.get(text_hash(t), -1) for t in texts], dtype=np.int64)


def nearest_rows(
    pool_vectors: NDArray[Any], vectors: NDArray[Any], rows: NDArray[np.int64]
) -> NDArray[np.int64]:
    """`rows`, each -1 replaced by the row of the nearest of `pool_vectors` (cosine) to that
    text's vector."""
    out = np.array(rows, dtype=np.int64)
    missing = np.flatnonzero(out < 0)
    if len(missing):
        pool = np.asarray(pool_vectors, dtype=np.float64)
        pool = pool / np.linalg.norm(pool, axis=1, keepdims=True)
        new = np.asarray(vectors, dtype=np.float64)[missing]
        new = new / np.linalg.norm(new, axis=1, keepdims=True)
        out[missing] = np.argmax(new @ pool.T, axis=1)
    return out
