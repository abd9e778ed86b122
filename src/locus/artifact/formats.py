"""Every format an artifact folder holds, each version it had, and the one upgrade step.

An artifact folder (`locus.routing.router_artifact` writes and reads it whole) holds three
kinds of versioned file:

    file (format)                       version  since       what the version added
    config.json, anchors.json,          1        2026-11-30  the networks, the fit-time pool, the
    weights.safetensors                                      fit's metadata
    ("locus-artifact/N")                2        2026-12-01  `network` apart from `training`,
                                                             `evidence_bound`; the stack and guard
                                                             in the metadata (`ensemble`, `guard`)
                                        3        2026-12-02  the stack and guard in stacked.json
    stacked.json ("locus-stacked/N")    1        2026-12-02  `stack`, `guard`, `knn`
                                        2        2026-12-04  the stack's `tasks` (written under
                                                             version 1 since 2026-12-03)
                                        3        2026-12-04  `thin`: how an LLM joined since the
                                                             fit is read (`locus.routing.thin`)
                                        4        2026-12-05  `factors`: the folder of the factor
                                                             models `thin`'s "factor" and
                                                             "ability" readings onboard in (a
                                                             router folder per model and half);
                                                             `thin`'s weights of those readings
                                        5        2026-12-05  the stack's `level` (the task vote
                                                             can read it in the kNN vote's
                                                             place) and `given_weights` (for
                                                             queries whose task is named);
                                                             small pools fit them
                                        6        2026-12-05  the stack's `smoothed`: its level's
                                                             kNN vote smoothed as its parts'
                                                             are (a vote of 0 of 5 neighbours
                                                             read as 1e-6 made small pools
                                                             overconfident); since 2026-12-07
                                                             `given_weights` is not written,
                                                             and dropped where read
    router.json + arrays.safetensors    1        2026-12-01  `kind`, `llm_ids`, the kind's settings
    (a router folder: knn/, costs/,     2        2026-12-04  the kNN router's and the cost model's
    every saved baseline; "format": N)                       `ann_from`; the kNN router's `search`,
                                                             `task_names`, `task_voting_rows`
                                                             (written under 1 since 2026-12-03)
                                        3        2026-12-06  the kNN router's task reader
                                                             (`task_reader_weights`, `_bias`,
                                                             `_share`: a query's task read by a
                                                             classifier beside its neighbours,
                                                             `locus.routing.task_reader`), where
                                                             the fit kept one

A field added to a file bumps its version. A file of a readable older version is upgraded in
memory here, and only here: fields are only ever added, so each one missing from a file gets
the value that reproduces how locus read the file before the field existed (`_ADDED_TO_STACK`,
`_ADDED_TO_ROUTER_FOLDER`, format 1's flat network in `upgrade_config`). A file of a version
not readable here (a newer locus wrote it, or it is no locus file) is a `LocusArtifactError`
naming the file, the version found, the versions read and the fix. The readers of the files
(`locus.artifact.layout`, `locus.routing.router_artifact`) read the upgraded fields as they
are, with no defaults of their own.

    >>> old = {"format": "locus-stacked/1", "guard": None, "knn": "knn", "stack": {"ks": [5],
    ...        "deviation_weights": [1.0, 0.0], "mix_weight": 0.5, "mix_k": 5, "shift": 0.1}}
    >>> upgrade_stacked(old, {}, "stacked.json")["stack"]["tasks"]
    False
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusArtifactError

__all__ = [
    "ARTIFACT_FORMAT",
    "READABLE_FORMATS",
    "READABLE_ROUTER_FOLDER_FORMATS",
    "READABLE_STACKED_FORMATS",
    "ROUTER_FOLDER_FORMAT",
    "STACKED_FORMAT",
    "check_format",
    "upgrade_config",
    "upgrade_router_folder",
    "upgrade_stack",
    "upgrade_stacked",
]

ARTIFACT_FORMAT = "locus-artifact/3"
READABLE_FORMATS = ("locus-artifact/1", "locus-artifact/2", ARTIFACT_FORMAT)
STACKED_FORMAT = "locus-stacked/6"
READABLE_STACKED_FORMATS = (
    "locus-stacked/1",
    "locus-stacked/2",
    "locus-stacked/3",
    "locus-stacked/4",
    "locus-stacked/5",
    STACKED_FORMAT,
)
ROUTER_FOLDER_FORMAT = 3
READABLE_ROUTER_FOLDER_FORMATS = (1, 2, ROUTER_FOLDER_FORMAT)

# format 1 kept these network fields flat inside `training` (the names they had then)
_FLAT_NETWORK = (
    "dim",
    "inducing_points",
    "heads",
    "feed_forward",
    "layers",
    "predictor_hidden",
    "dropout",
)
# a stack of locus-stacked/1 (or of format 2's `ensemble`) without these: written before them
_ADDED_TO_STACK: Mapping[str, Any] = {
    "shift": 0.0,  # stacks fitted before the base-rate shift had none
    "tasks": False,  # stacks fitted before the task vote had no task part
    "level": "knn",  # stacks fitted before locus-stacked/5 read the level from the kNN vote
    "smoothed": False,  # stacks fitted before locus-stacked/6 read the level's kNN vote raw
}
# the graph threshold (`locus.routing.ann.ANN_FROM`) every version before router folder 2 used
_ANN_FROM_BEFORE = 100_000
_ADDED_TO_ROUTER_FOLDER: Mapping[str, Mapping[str, Any]] = {
    # exact search below ANN_FROM training queries, the graph from there: how "auto" has always
    # read a router saved before the graph
    "knn": {"search": "auto", "task_names": None, "ann_from": _ANN_FROM_BEFORE},
    "cost-model": {"ann_from": _ANN_FROM_BEFORE},
}


def check_format(found: Any, readable: tuple[Any, ...], where: str | Path) -> None:
    """Raise the error every reader of a versioned file gives for a version it cannot read.

    Raises:
        LocusArtifactError: `found` is not one of `readable`.
    """
    if found in readable:
        return
    versions = ", ".join(repr(version) for version in readable)
    raise LocusArtifactError(
        f"{where}: format {found!r} is not one this version of locus reads ({versions}); "
        "not a locus artifact, or one written by a newer locus: upgrade locus, or re-run "
        "`locus fit` to write the artifact again"
    )


def upgrade_config(config: Any, where: str | Path) -> dict[str, Any]:
    """`config.json` of any readable `locus-artifact` version, as the current one holds it (its
    `format` left as found: `artifact_is_current` reads it).

    Raises:
        LocusArtifactError: not a JSON object, or a format not in `READABLE_FORMATS`.
    """
    found = config.get("format") if isinstance(config, dict) else type(config).__name__
    check_format(found, READABLE_FORMATS, where)
    out = dict(config)
    if found == "locus-artifact/1":
        training = dict(out.get("training") or {})
        out["network"] = {name: training.pop(name) for name in _FLAT_NETWORK if name in training}
        out["training"] = training
        # format 1 recorded no bound: its encoder was trained on sets of up to `anchors`
        if "anchors" in training:
            out["evidence_bound"] = training["anchors"]
    return out


def upgrade_stacked(
    parts: Mapping[str, Any] | None, metadata: Mapping[str, Any], where: str | Path
) -> dict[str, Any]:
    """The stacked router's parts {"format", "stack", "guard", "knn", "thin", "factors"} (each
    None where the router has none; `thin` None before locus-stacked/3: a joined LLM read by the
    stack as a fitted one; `factors` None before locus-stacked/4: no factor reading, which
    `ThinEvidence.from_dict` reads as a weight of 0) from `stacked.json` (`parts`), or, where
    the folder has none (format 2, or the networks saved alone), from the config's `metadata`
    as format 2 kept them.

    Raises:
        LocusArtifactError: a format not in `READABLE_STACKED_FORMATS`, or format 2's
            probability mixture (an `ensemble` without a stack), which no version reads since.
    """
    if parts is None:
        ensemble = metadata.get("ensemble") or {}
        if ensemble and not ensemble.get("stack"):
            raise LocusArtifactError(
                f"{where}: fitted by an earlier version of locus, whose router mixed LOCUS's "
                "and kNN's probabilities; re-run `locus fit` to rewrite it with the stack"
            )
        parts = {
            "format": None,
            "stack": ensemble.get("stack"),
            "guard": metadata.get("guard"),
            "knn": str(ensemble.get("folder", "knn")) if ensemble else None,
        }
    else:
        found = parts.get("format") if isinstance(parts, Mapping) else type(parts).__name__
        check_format(found, READABLE_STACKED_FORMATS, where)
    out = {key: parts.get(key) for key in ("format", "stack", "guard", "knn", "thin", "factors")}
    if out["stack"]:
        out["stack"] = upgrade_stack(out["stack"])
    return out


def upgrade_stack(stack: Mapping[str, Any]) -> dict[str, Any]:
    """A stack's fields (`locus.routing.stack.Stack.as_dict`) as the current version writes
    them, from a stack of any readable version (`Stack.from_dict` reads through this)."""
    found = {**_ADDED_TO_STACK, **stack}
    # weights of their own for a query whose task is named (locus-stacked/5 to /6, small
    # pools): dropped by the ablation of issue 53; such a query is read by the stack's weights
    found.pop("given_weights", None)
    return found


def upgrade_router_folder(
    description: Any, arrays: Mapping[str, NDArray[Any]], where: str | Path
) -> tuple[dict[str, Any], dict[str, NDArray[Any]]]:
    """`router.json` and the arrays of any readable router folder version, as the current one
    holds them (the description's `format` left as found).

    Raises:
        LocusArtifactError: not a JSON object, or a format not in
            `READABLE_ROUTER_FOLDER_FORMATS`.
    """
    found = description.get("format") if isinstance(description, dict) else None
    check_format(found, READABLE_ROUTER_FOLDER_FORMATS, where)
    kind = description.get("kind")
    out = {**_ADDED_TO_ROUTER_FOLDER.get(kind, {}), **description}
    upgraded = dict(arrays)
    if "task_codes" in upgraded and "task_voting_rows" not in upgraded:
        # saved before joined LLMs' rows were kept out of the task vote: every row votes
        upgraded["task_voting_rows"] = np.array([len(upgraded["task_codes"])], dtype=np.int64)
    # a folder saved before task readers has none: its task vote reads the neighbours alone,
    # as it was read (`TaskReader.from_arrays`)
    return out, upgraded
