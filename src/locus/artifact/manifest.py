"""`Manifest`: what a fit records about itself, typed; the `metadata` of `config.json`.

Every reader of an artifact's record goes through this class: no code outside it reads the
metadata by string keys. Keys it does not know (written by another version) are kept as they
are, so reading and writing an artifact never drops them.

    >>> manifest = Manifest(fit_id="f1", split_seed=2, evidence_means={"a": (0.5, 10)})
    >>> Manifest.from_dict(manifest.as_dict()) == manifest
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from locus.calibration import Calibration
from locus.errors import LocusArtifactError

__all__ = ["Manifest"]

_KNOWN = (
    "fit_id",
    "split_seed",
    "excluded_llms",
    "data_checksums",
    "calibration",
    "evidence_means",
)


@dataclass(frozen=True)
class Manifest:
    """One fit's record.

    Attributes:
        fit_id: names the fit: a workspace's pool rows count for the artifact only if written
            for this fit (`locus.pool`); None before a fit.
        split_seed: the seed of the workspace's query split the fit trained on (evaluation
            tests on the same split).
        excluded_llms: LLMs kept out of training (to onboard them later).
        data_checksums: the workspace's data checksums at fit time (the demo re-fits when they
            change); None where the fit ran outside a workspace.
        calibration: the map of the predictor's logits fitted on validation cells; None: raw.
        evidence_means: {llm_id: (mean score, count)} of each fit-time LLM's anchors.
        extra: keys this version does not read (kept, and written back, as they are).
    """

    fit_id: str | None = None
    split_seed: int = 0
    excluded_llms: tuple[str, ...] = ()
    data_checksums: Mapping[str, str] | None = None
    calibration: Calibration | None = None
    evidence_means: Mapping[str, tuple[float, int]] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def with_(self, **changes: Any) -> Manifest:
        """A copy with `changes` (`dataclasses.replace`)."""
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, in the keys `config.json` has always used."""
        out: dict[str, Any] = dict(self.extra)
        if self.fit_id is not None:
            out["fit_id"] = self.fit_id
        out["split_seed"] = self.split_seed
        out["excluded_llms"] = list(self.excluded_llms)
        if self.data_checksums is not None:
            out["data_checksums"] = dict(self.data_checksums)
        if self.calibration is not None:
            out["calibration"] = self.calibration.as_dict()
        if self.evidence_means:
            out["evidence_means"] = {llm: [m, n] for llm, (m, n) in self.evidence_means.items()}
        return out

    @classmethod
    def from_dict(cls, value: Mapping[str, Any] | None) -> Manifest:
        """Read a `config.json` metadata (any version's: a missing key takes its default).

        Raises:
            LocusArtifactError: a key of the wrong type.
        """
        value = dict(value or {})
        try:
            calibration = value.get("calibration")
            checksums = value.get("data_checksums")
            checksums = (
                None if checksums is None else {str(k): str(v) for k, v in checksums.items()}
            )
            return cls(
                fit_id=None if value.get("fit_id") is None else str(value["fit_id"]),
                split_seed=int(value.get("split_seed", 0)),
                excluded_llms=tuple(str(llm) for llm in value.get("excluded_llms") or ()),
                data_checksums=None
                if checksums is None
                else {str(k): str(v) for k, v in checksums.items()},
                calibration=Calibration.from_dict(calibration) if calibration else None,
                evidence_means={
                    str(llm): (float(m), int(n))
                    for llm, (m, n) in (value.get("evidence_means") or {}).items()
                },
                extra={k: v for k, v in value.items() if k not in _KNOWN},
            )
        except (TypeError, ValueError, AttributeError, KeyError) as error:
            raise LocusArtifactError(
                f"an artifact's metadata is damaged ({error}); re-run locus fit"
            ) from error
