"""Configuration of the LOCUS networks (`NetworkConfig`) and of their training (`TrainingConfig`).

Loading an artifact needs only `NetworkConfig` and `build_networks`: the trainer is never
imported to rebuild trained networks.

    >>> config = TrainingConfig(network=NetworkConfig(dim=64, heads=4), anchors=256)
    >>> config.network.dim, config.anchors
    (64, 256)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from locus.errors import LocusInputError
from locus.nn.encoder import LLMEncoder
from locus.nn.predictor import CorrectnessPredictor

__all__ = ["MIN_SCHEDULE_STEPS", "NetworkConfig", "TrainingConfig", "build_networks"]

MIN_SCHEDULE_STEPS = 25  # the shortest schedule `TrainingConfig.schedule_steps` gives


def _check_positive_ints(owner: object, names: list[str]) -> None:
    for name in names:
        value = getattr(owner, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LocusInputError(
                f"{type(owner).__name__}.{name} must be an integer >= 1; got {value!r}"
            )


def _from_mapping(cls: type[Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """Check keys against the dataclass fields: an unknown key (a typo) is an error."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise LocusInputError(
            f"unknown {cls.__name__} fields {unknown}; expected a subset of {sorted(known)}"
        )
    return dict(values)


@dataclass(frozen=True)
class NetworkConfig:
    """Shapes of the encoder and predictor (defaults follow LOCUS).

    Attributes:
        dim: token and LLM embedding dimension d.
        inducing_points, heads, feed_forward, layers: the ISAB stack of the encoder.
        predictor_hidden, dropout: the predictor's MLP.
    """

    dim: int = 128
    inducing_points: int = 64
    heads: int = 4
    feed_forward: int = 256
    layers: int = 2
    predictor_hidden: int = 64
    dropout: float = 0.1

    def __post_init__(self) -> None:
        _check_positive_ints(
            self,
            ["dim", "inducing_points", "heads", "feed_forward", "layers", "predictor_hidden"],
        )
        if not 0.0 <= self.dropout < 1.0:
            raise LocusInputError(f"NetworkConfig.dropout must be in [0, 1); got {self.dropout}")
        if self.dim % self.heads != 0:
            raise LocusInputError(
                f"NetworkConfig.dim ({self.dim}) must be divisible by heads ({self.heads})"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> NetworkConfig:
        return cls(**_from_mapping(cls, values))


# the values each string field of TrainingConfig accepts
_CHOICES: dict[str, tuple[str, ...]] = {
    "evidence_from": ("anchors", "training"),
    "lr_schedule": ("constant", "cosine"),
    "select_on": ("routing", "log_loss", "final"),
    "stop_on": ("routing", "log_loss"),
}


@dataclass(frozen=True)
class TrainingConfig:
    """Every hyper-parameter of training, with the networks' shapes in `network`.

    Example:
        >>> TrainingConfig(anchors=256, max_steps=2000).llms_per_step
        32
    """

    network: NetworkConfig = field(default_factory=NetworkConfig)
    # optimisation (the paper's constant rates were 2e-4 and 8e-4; twice those, warmed up and
    # decayed over 150 steps, fit in half the time to the same or better figures on MMLU-Pro,
    # ZeroEval and split2_model7: benchmarks/README.md, "A 150-step schedule")
    encoder_lr: float = 4e-4
    predictor_lr: float = 1.6e-3
    weight_decay: float = 0.05
    grad_clip: float = 1.0
    noise_start: float = 0.10
    noise_end: float = 0.05
    # Deviation from the paper (on by default; False = the paper's raw query vectors): both
    # networks standardise query vectors with the training queries' mean and RMS coordinate
    # (`nn/standardize.py`), and the noise above is in those units.
    standardise_queries: bool = True
    # meta-learning episodes: evidence sizes are log-uniform in [min_evidence, anchors]
    min_evidence: int = 16
    anchors: int = 1024
    # Where each step draws an LLM's evidence from: "training" (all its training queries, the
    # default) or "anchors" (the paper). Trained on anchors only, the encoder embeds evidence on
    # other queries badly: on MMLU-Pro (3 seeds), re-embedding every LLM from all its non-test
    # scores took test hit@1 from 0.712 to 0.678; trained on all training queries, 0.715 at fit
    # time and 0.718 refined. See benchmarks/bench_refinement.py.
    evidence_from: str = "training"
    # Largest evidence set drawn in training (None = anchors). The encoder then reads at most this
    # many pairs at once; larger evidence (the anchors included) is embedded in chunks whose
    # embeddings are averaged (`locus.nn.embedding.evidence_chunks`).
    max_evidence: int | None = None
    llms_per_step: int = 32
    targets_per_llm: int = 256
    micro_batches: int = 8
    # Issue 10's ranking objective: the loss is BCE over target cells plus `ranking_weight` x a
    # listwise softmax cross-entropy across the step's LLMs on each target query they share
    # (the target distribution is the LLMs' scores on it, normalised; queries where every LLM
    # scores the same carry no ranking signal and are left out). 0 = BCE alone (the paper).
    ranking_weight: float = 0.0
    # schedule
    # Learning rates over the run: "constant" (after `warmup_steps` of linear warm-up), or
    # "cosine": warm-up, then a cosine decay to zero at `max_steps`, so max_steps becomes the
    # training budget rather than a bound early stopping is meant to cut short. The warm-up
    # stops short of max_steps in a run shorter than it.
    lr_schedule: str = "cosine"
    warmup_steps: int = 10
    max_steps: int = 150
    # The schedule's length is at most `max_passes` passes over the training cells (a step
    # draws `targets_per_llm` targets from each of its LLMs), and never under
    # `MIN_SCHEDULE_STEPS`; None: `max_steps` whatever the pool. The real pools fill 150 steps
    # in 4-17 passes (MMLU-Pro 4, RouterBench 17), so it binds only on small ones: a log of 600
    # prompts over 4 LLMs took 125 steps (the best at step 25, then patience) to learn 487
    # cells that LOCUS has no say over (its share in routing is chosen out of fold, and was 0).
    max_passes: float | None = 25.0
    eval_every: int = 25
    patience: int = 4  # evaluations without improvement before stopping
    # Which step is kept (`select_on`) and what patience counts (`stop_on`), each "routing"
    # (validation routing accuracy; for select_on, ties go to the lower log-loss) or
    # "log_loss" (validation log-loss over every evaluated cell); select_on may also be
    # "final" (the last step run, whatever validation says). Default: keep the best
    # routing step, stop when log-loss has not improved for `patience` checks. Validation
    # log-loss reaches its minimum after 200-300 steps on MMLU-Pro and rises from there (the
    # networks overfit), while routing accuracy on ~1,000 validation queries moves in 0.1-point
    # steps and wandered for 300 more steps under a routing patience; but the log-loss minimum
    # can come before routing has separated the LLMs (MMLU-Pro with int8 or static vectors:
    # kept at step 100-150, test hit@1 0.64 against 0.71), so the kept step stays on routing.
    # Measured in benchmarks/README.md ("Training to early stop").
    select_on: str = "routing"
    stop_on: str = "log_loss"
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.network, NetworkConfig):
            raise LocusInputError(
                f"TrainingConfig.network must be a NetworkConfig; got {type(self.network).__name__}"
            )
        _check_positive_ints(
            self,
            [
                "min_evidence", "anchors", "llms_per_step", "targets_per_llm", "micro_batches",
                "max_steps", "eval_every", "patience",
            ],
        )  # fmt: skip
        for name in ["encoder_lr", "predictor_lr", "grad_clip"]:
            if not getattr(self, name) > 0:
                raise LocusInputError(
                    f"TrainingConfig.{name} must be > 0; got {getattr(self, name)}"
                )
        for name in ["weight_decay", "noise_start", "noise_end", "ranking_weight"]:
            if not getattr(self, name) >= 0:
                raise LocusInputError(
                    f"TrainingConfig.{name} must be >= 0; got {getattr(self, name)}"
                )
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise LocusInputError(
                    f"TrainingConfig.{name} must be one of {', '.join(map(repr, allowed))}; "
                    f"got {getattr(self, name)!r}"
                )
        if self.max_passes is not None and not self.max_passes > 0:
            raise LocusInputError(
                f"TrainingConfig.max_passes must be None or > 0; got {self.max_passes!r}"
            )
        if isinstance(self.warmup_steps, bool) or not (
            isinstance(self.warmup_steps, int) and self.warmup_steps >= 0
        ):
            raise LocusInputError(
                f"TrainingConfig.warmup_steps must be an integer >= 0; got {self.warmup_steps!r}"
            )
        if self.max_evidence is not None and not (
            isinstance(self.max_evidence, int) and self.min_evidence <= self.max_evidence
        ):
            raise LocusInputError(
                f"TrainingConfig.max_evidence must be None or an integer >= min_evidence "
                f"({self.min_evidence}); got {self.max_evidence!r}"
            )
        if self.min_evidence > self.anchors:
            raise LocusInputError(
                f"TrainingConfig.min_evidence ({self.min_evidence}) must not exceed "
                f"anchors ({self.anchors}); lower --min-evidence or raise --anchors"
            )

    @property
    def evidence_bound(self) -> int:
        """The most evidence pairs the encoder reads in one set: max_evidence, else anchors."""
        return self.anchors if self.max_evidence is None else min(self.max_evidence, self.anchors)

    def schedule_steps(self, train_cells: int, n_llms: int) -> int:
        """The steps to train a pool of `train_cells` scored training cells over `n_llms`
        LLMs: `max_steps`, or fewer where that would pass over the cells more than
        `max_passes` times, never under `MIN_SCHEDULE_STEPS` (nor over `max_steps`).

            >>> TrainingConfig().schedule_steps(train_cells=275_000, n_llms=29)
            150
            >>> TrainingConfig().schedule_steps(train_cells=1_600, n_llms=5)
            32
        """
        if self.max_passes is None:
            return self.max_steps
        per_step = max(1, min(self.llms_per_step, n_llms)) * self.targets_per_llm
        steps = math.ceil(self.max_passes * max(train_cells, 1) / per_step)
        return min(self.max_steps, max(MIN_SCHEDULE_STEPS, steps))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field (the network as a nested dict)."""
        return dataclasses.asdict(self)

    def with_settings(self, pairs: Sequence[str]) -> TrainingConfig:
        """A copy with `NAME=VALUE` settings applied, each value read as its field's type.

        Network fields are set by their own names. Unknown names and unreadable values are a
        `LocusInputError` naming them; the result is validated like any config.

        Example:
            >>> TrainingConfig().with_settings(["ranking_weight=0.5", "dropout=0.2"]).ranking_weight
            0.5
        """
        current = self.to_dict()
        network = current.pop("network")
        flat = {**current, **network}
        for pair in pairs:
            name, sep, text = pair.partition("=")
            name, text = name.strip().replace("-", "_"), text.strip()
            if not sep or name not in flat:
                raise LocusInputError(
                    f"setting {pair!r}: expected NAME=VALUE with NAME one of {', '.join(flat)}"
                )
            flat[name] = _read_setting(name, text, flat[name], type(self).__dataclass_fields__)
        values = {k: v for k, v in flat.items() if k not in network}
        return TrainingConfig.from_dict({**values, "network": {k: flat[k] for k in network}})

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainingConfig:
        """Inverse of `to_dict`; unknown keys are an error (a typo must not pass silently).

        Also reads the flat layout of format-1 artifacts, where the network fields sat beside
        the training ones.
        """
        values = dict(values)
        network_names = {f.name for f in dataclasses.fields(NetworkConfig)}
        network = dict(values.pop("network", None) or {})
        for name in network_names & set(values):
            network[name] = values.pop(name)
        return cls(network=NetworkConfig.from_dict(network), **_from_mapping(cls, values))


def _read_setting(name: str, text: str, current: Any, fields: Mapping[str, Any]) -> Any:
    """`text` as the type of the field's current value (None where the field allows it)."""
    if text.lower() == "none" and (current is None or "None" in str(fields.get(name, ""))):
        return None
    try:
        if isinstance(current, bool):
            if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return text.lower() in ("true", "1", "yes")
        if isinstance(current, int) or (current is None and text.lstrip("-").isdigit()):
            return int(text)
        if isinstance(current, float):
            return float(text)
    except ValueError:
        kind = "true or false" if isinstance(current, bool) else type(current).__name__
        raise LocusInputError(f"setting {name}={text!r}: expected {kind}") from None
    return text


def build_networks(
    query_dim: int, network: NetworkConfig
) -> tuple[LLMEncoder, CorrectnessPredictor]:
    """Fresh (encoder, predictor) shaped by `network` (initialised from torch's global RNG)."""
    encoder = LLMEncoder(
        query_dim,
        dim=network.dim,
        inducing=network.inducing_points,
        heads=network.heads,
        feed_forward=network.feed_forward,
        layers=network.layers,
    )
    predictor = CorrectnessPredictor(
        query_dim, dim=network.dim, hidden=network.predictor_hidden, dropout=network.dropout
    )
    return encoder, predictor
