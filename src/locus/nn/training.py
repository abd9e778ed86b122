"""Training the encoder and predictor by meta-learning over LLMs.

Each step takes a batch of LLMs. For each LLM it draws an evidence subset of random size
K ~ log-uniform[min_evidence, A] from the LLM's observed training queries (`evidence_from=
"training"`, the default; the paper draws from its anchors only, "anchors") and an independent
target subset of them; the encoder embeds the evidence and the predictor is trained with BCE on
the targets. Embeddings therefore work from few scores as well as from many, and from scores on
any queries, not only the anchors (what refinement needs; see `locus.nn.config`).

Choices worth knowing:

- Anchors (`locus.data.anchor_choice`): one seeded permutation of the training queries is shared by
  all LLMs; an LLM's anchors are the first A of its observed training queries in that order.
  LLMs evaluated on the same queries get the same anchors (a common probe set); every LLM is
  embedded from them for validation and in the fit-time pool.
- Targets: likewise the first `targets_per_llm` observed queries in a fresh per-step permutation,
  so fully observed LLMs are scored on the same queries in a step (a like-for-like comparison,
  which is what routing needs); each LLM's targets are still a uniform subset of its queries.
- Query vectors are standardised by both networks with the training queries' mean and RMS
  coordinate (`standardise_queries`, a measured deviation from the paper), and the annealed
  noise is in those units.
- Each distinct query is noised and projected once per step (`LLMEncoder.project_queries`,
  `CorrectnessPredictor.project_queries`) and gathered per LLM.
- LLMs in a step are sorted by evidence count and split into `micro_batches` groups, so short
  evidence sets are not padded to the longest; the loss is still the mean over all target cells.
- Loss: BCE over the target cells; with `ranking_weight` > 0, plus a listwise softmax
  cross-entropy across the step's LLMs on each target query they share
  (`locus.nn.losses.listwise_loss`), a signal only in how LLMs compare on a query, which is
  what routing decides on.
- Learning rates: constant, or warm-up then cosine decay to zero at `max_steps`
  (`lr_schedule`); the optimiser is `locus.nn.optim.AdamW`, torch's update without its
  compiler import.
- Validation with every LLM embedded from all its anchors. The kept step is the best in validation
  routing accuracy (`select_on`); ties (common: on a pool with one dominant LLM it stays at
  "always that LLM" for hundreds of steps) go to the lower validation log-loss. Patience counts
  checks without a new lowest validation log-loss (`stop_on`): training stops once the networks
  overfit, not after routing accuracy has wandered for hundreds of steps.
- Reproducible: one seed, one machine, one thread count, the same networks bit for bit
  (`locus.nn.seeding.reproducible`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

from locus.data.anchor_choice import choose_anchors
from locus.nn.checks import better, check_inputs, validation_metrics
from locus.nn.config import TrainingConfig, build_networks
from locus.nn.embedding import embed_indexed, embed_many, evaluating, pad_rows
from locus.nn.encoder import LLMEncoder
from locus.nn.losses import listwise_loss
from locus.nn.optim import AdamW, lr_factor
from locus.nn.predictor import CorrectnessPredictor
from locus.nn.seeding import reproducible
from locus.offpolicy import overlap_of

__all__ = ["ProgressCallback", "TrainingResult", "train"]

ProgressCallback = Callable[[int, int, dict[str, float]], None]
"""progress(step, total_steps, info): info holds "loss" and, after the first evaluation,
"val_routing_accuracy", "val_correctness_accuracy", "val_log_loss",
"best_val_routing_accuracy" and "checks_left" (validation checks without a gain before early
stopping)."""


@dataclass
class TrainingResult:
    """What `train` returns.

    Attributes:
        encoder, predictor: the best networks (by validation routing accuracy), in eval mode.
        anchor_query_idx: per LLM (column of `scores`), the row indices into `query_vectors`
            of its anchors: up to `config.anchors` of its observed training queries.
        llm_embeddings: (n_llms, d) every LLM embedded from its anchors with the best encoder.
        history: one dict per evaluation: step, loss (mean training loss since the previous
            evaluation), val_routing_accuracy, val_correctness_accuracy, val_log_loss,
            noise_std, seconds.
        best_step: the step whose weights were kept (best validation routing accuracy, ties to
            the lower validation log-loss).
        config: the configuration used.
    """

    encoder: LLMEncoder
    predictor: CorrectnessPredictor
    anchor_query_idx: list[NDArray[np.int64]]
    llm_embeddings: NDArray[np.float32]
    history: list[dict[str, float]] = field(default_factory=list)
    best_step: int = 0
    config: TrainingConfig = field(default_factory=TrainingConfig)


def train(
    query_vectors: NDArray[np.float32],
    scores: NDArray[np.float32],
    train_query_idx: NDArray[np.integer[Any]],
    val_query_idx: NDArray[np.integer[Any]],
    config: TrainingConfig | None = None,
    progress: ProgressCallback | None = None,
    device: str | torch.device = "cpu",
) -> TrainingResult:
    """Train an encoder and a predictor on a score table.

    Args:
        query_vectors: (n_queries, dq) float32, one row per query.
        scores: (n_queries, n_llms) float32 in [0, 1]; NaN = not evaluated.
        train_query_idx: rows used for anchors, evidence and targets.
        val_query_idx: rows for early stopping (disjoint from training); may be empty, in which
            case training runs `max_steps` and keeps the final weights.
        config: hyper-parameters; default `TrainingConfig()`.
        progress: optional `progress(step, total_steps, info)`, called after every step.
        device: torch device to train on.

    Returns:
        a `TrainingResult` with the best networks in eval mode.

    Example:
        >>> config = TrainingConfig(max_steps=500)
        >>> result = train(vectors, scores, train_idx, val_idx, config)  # doctest: +SKIP
        >>> result.llm_embeddings.shape  # doctest: +SKIP
        (n_llms, 128)
    """
    config = config or TrainingConfig()
    vectors, table, train_idx, val_idx = check_inputs(
        query_vectors, scores, train_query_idx, val_query_idx
    )
    steps = config.schedule_steps(int((~np.isnan(table[train_idx])).sum()), table.shape[1])
    config = dataclasses.replace(config, max_steps=steps)  # a small pool: fewer steps
    with reproducible(config.seed):  # initialisation, dropout and noise; RNG restored
        return _train(vectors, table, train_idx, val_idx, config, progress, torch.device(device))


def _log_uniform_size(low: int, high: int, rng: np.random.Generator) -> int:
    if high <= low:
        return high
    return int(min(high, max(low, round(math.exp(rng.uniform(math.log(low), math.log(high)))))))


@dataclass(frozen=True)
class _Pool:
    """The training data as the step function needs it."""

    vectors: torch.Tensor  # (n_queries, dq) on the training device
    table: NDArray[np.float32]  # (n_queries, n_llms), NaN = not evaluated
    train_idx: NDArray[np.int64]  # (n_train,)
    train_observed: NDArray[np.bool_]  # (n_train, n_llms)
    anchors: list[NDArray[np.int64]]  # per LLM, rows of its anchors
    anchor_scores: list[NDArray[np.float32]]  # per LLM, its scores on them
    evidence_pools: list[NDArray[np.int64]]  # per LLM, rows evidence is drawn from
    evidence_bound: int  # largest evidence set drawn; larger ones are embedded in chunks


def _train(
    vectors: NDArray[np.float32],
    table: NDArray[np.float32],
    train_idx: NDArray[np.int64],
    val_idx: NDArray[np.int64],
    config: TrainingConfig,
    progress: ProgressCallback | None,
    device: torch.device,
) -> TrainingResult:
    started = time.perf_counter()
    rng = np.random.default_rng(config.seed)
    n_llms = table.shape[1]
    observed = ~np.isnan(table)  # (n_queries, n_llms)
    anchors = choose_anchors(observed, train_idx, config.anchors, rng)
    pool = _Pool(
        vectors=torch.from_numpy(vectors).to(device),
        table=table,
        train_idx=train_idx,
        train_observed=observed[train_idx],
        anchors=anchors,
        anchor_scores=[table[rows, llm] for llm, rows in enumerate(anchors)],
        evidence_pools=(
            anchors
            if config.evidence_from == "anchors"
            else [train_idx[observed[train_idx, llm]] for llm in range(n_llms)]
        ),
        evidence_bound=config.evidence_bound,
    )

    encoder, predictor = build_networks(vectors.shape[1], config.network)
    encoder.to(device).train()
    predictor.to(device).train()
    optimizer = AdamW(
        [
            {"params": list(encoder.parameters()), "lr": config.encoder_lr},
            {"params": list(predictor.parameters()), "lr": config.predictor_lr},
        ],
        weight_decay=config.weight_decay,
    )
    base_lrs = [config.encoder_lr, config.predictor_lr]
    val_vectors = pool.vectors[torch.from_numpy(val_idx).to(device)]  # (n_val, dq)
    val_scores = table[val_idx]  # (n_val, n_llms)
    validating = bool(observed[val_idx].any())  # else: run max_steps, keep the final weights
    # on sparse evidence (a log: one LLM per query) validation routing is an off-policy
    # estimate, too noisy to keep or stop on: the log-loss of the scored cells decides
    on_log_loss = validating and overlap_of(val_scores).sparse

    history: list[dict[str, float]] = []
    best_accuracy, best_log_loss = -math.inf, math.inf  # of the kept step
    highest_routing, lowest_log_loss = -math.inf, math.inf  # of any step, for patience
    best_state = _snapshot(encoder, predictor)
    best_step = 0
    evals_without_gain = 0
    losses: list[float] = []
    info: dict[str, float] = {}
    llm_queue: list[int] = []
    noise_scale = 1.0  # noise std in raw units = noise level x scale
    if config.standardise_queries:
        train_vectors = pool.vectors[torch.from_numpy(train_idx).to(device)]
        for network in (encoder, predictor):
            network.standardize.fit_statistics(train_vectors)
        noise_scale = float(encoder.standardize.scale)
    for step in range(1, config.max_steps + 1):
        fraction = (step - 1) / max(1, config.max_steps - 1)
        noise_level = config.noise_start + (config.noise_end - config.noise_start) * fraction
        noise_std = noise_level * noise_scale
        if len(llm_queue) < min(config.llms_per_step, n_llms):
            llm_queue.extend(rng.permutation(n_llms).tolist())
        batch_llms = llm_queue[: min(config.llms_per_step, n_llms)]
        del llm_queue[: len(batch_llms)]
        factor = lr_factor(step, config)
        for group, base_lr in zip(optimizer.param_groups, base_lrs, strict=True):
            group["lr"] = base_lr * factor

        loss = _training_step(
            encoder, predictor, optimizer, pool, batch_llms, noise_std, config, rng
        )
        losses.append(loss)
        info["loss"] = loss

        if step % config.eval_every == 0 or step == config.max_steps:
            record: dict[str, float] = {
                "step": step,
                "loss": float(np.mean(losses)),
                "noise_std": noise_std,
            }
            losses = []
            routing, correctness, log_loss = math.nan, math.nan, math.nan
            if validating:
                with evaluating(encoder, predictor), torch.inference_mode():
                    z = _embed_pool(encoder, pool)  # (n_llms, d)
                    logits = predictor.score_matrix(z, val_vectors)  # (n_val, n_llms)
                routing, correctness, log_loss = validation_metrics(
                    logits.cpu().numpy(), val_scores
                )
            record["val_routing_accuracy"] = routing
            record["val_correctness_accuracy"] = correctness
            record["val_log_loss"] = log_loss
            record["seconds"] = time.perf_counter() - started
            history.append(record)
            info.update(
                val_routing_accuracy=routing,
                val_correctness_accuracy=correctness,
                val_log_loss=log_loss,
            )
            if config.select_on == "final":
                keep = True
            elif config.select_on == "log_loss" or on_log_loss:
                keep = not validating or log_loss < best_log_loss
            else:
                keep = not validating or better((routing, log_loss), (best_accuracy, best_log_loss))
            if keep:
                best_accuracy, best_log_loss, best_step = routing, log_loss, step
                best_state = _snapshot(encoder, predictor)
            # patience counts evaluations without a gain in the `stop_on` signal (a routing
            # tie-break never prolongs training: letting log-loss gains reset a routing patience
            # tripled the MMLU-Pro fit, 413 s)
            if config.stop_on == "log_loss" or on_log_loss:
                gain = not validating or log_loss < lowest_log_loss
            else:
                gain = not validating or routing > highest_routing
            lowest_log_loss = min(lowest_log_loss, log_loss)
            highest_routing = max(highest_routing, routing)
            evals_without_gain = 0 if gain else evals_without_gain + 1
            info["best_val_routing_accuracy"] = best_accuracy
            info["checks_left"] = config.patience - evals_without_gain
        if progress is not None:
            progress(step, config.max_steps, dict(info))
        if evals_without_gain >= config.patience:
            break

    encoder.load_state_dict(best_state[0])
    predictor.load_state_dict(best_state[1])
    encoder.eval()
    predictor.eval()
    return TrainingResult(
        encoder=encoder,
        predictor=predictor,
        anchor_query_idx=anchors,
        llm_embeddings=_embed_pool(encoder, pool).cpu().numpy(),
        history=history,
        best_step=best_step,
        config=config,
    )


def _embed_pool(encoder: LLMEncoder, pool: _Pool) -> torch.Tensor:
    """Every LLM embedded from all its anchors (eval mode, clean vectors): (n_llms, d)."""
    vectors = pool.vectors.cpu().numpy()
    if max(len(rows) for rows in pool.anchors) > pool.evidence_bound:
        evidence = list(
            zip([vectors[rows] for rows in pool.anchors], pool.anchor_scores, strict=True)
        )
        z = embed_many(encoder, evidence, max_evidence=pool.evidence_bound)
    else:
        z = embed_indexed(encoder, vectors, pool.anchors, pool.anchor_scores)
    return torch.from_numpy(z).to(pool.vectors.device)


def _snapshot(
    encoder: LLMEncoder, predictor: CorrectnessPredictor
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    return copy.deepcopy(encoder.state_dict()), copy.deepcopy(predictor.state_dict())


def _training_step(
    encoder: LLMEncoder,
    predictor: CorrectnessPredictor,
    optimizer: AdamW,
    pool: _Pool,
    batch_llms: list[int],
    noise_std: float,
    config: TrainingConfig,
    rng: np.random.Generator,
) -> float:
    """One optimisation step on a batch of LLMs; returns the mean BCE over target cells."""
    device = pool.vectors.device
    table, train_idx, anchors = pool.table, pool.train_idx, pool.anchors
    # Evidence: the first K of the LLM's evidence pool (its anchors, or all its training
    # queries) in a per-step random order, nested across LLMs that share queries; K is at most
    # the anchor count either way. Targets: the first T observed training queries in another
    # per-step order.
    priority = rng.random(len(table))
    target_order = rng.permutation(len(train_idx))
    observed_in_order = pool.train_observed[:, batch_llms][target_order]  # (n_train, b)
    evidence_rows, target_rows = [], []
    for column, llm in enumerate(batch_llms):
        high = min(len(anchors[llm]), pool.evidence_bound)
        size = _log_uniform_size(config.min_evidence, high, rng)
        own = pool.evidence_pools[llm]
        evidence_rows.append(own[np.argsort(priority[own], kind="stable")[:size]])
        picked = np.flatnonzero(observed_in_order[:, column])[: config.targets_per_llm]
        target_rows.append(train_idx[target_order[picked]])

    # Each distinct query is noised and projected once, then gathered per LLM.
    unique, inverse = np.unique(np.concatenate(evidence_rows + target_rows), return_inverse=True)
    phi = pool.vectors[torch.from_numpy(unique).to(device)]  # (u, dq)
    phi = phi + noise_std * torch.randn_like(phi)
    p, q = encoder.project_queries(phi)  # (u, d) each
    u = predictor.project_queries(phi)  # (u, d)
    boundaries = np.cumsum([len(r) for r in evidence_rows + target_rows])[:-1]
    positions = np.split(inverse, boundaries)  # per LLM, rows of (p, q, u)

    def tensor(array: NDArray[Any]) -> torch.Tensor:
        return torch.from_numpy(array).to(device)

    n_batch = len(batch_llms)
    total_targets = sum(len(r) for r in target_rows)
    loss = torch.zeros((), device=device)
    ranked: list[tuple[NDArray[np.intp], torch.Tensor]] = []  # (group, logits) for ranking
    by_size = np.argsort([len(r) for r in evidence_rows], kind="stable")
    for group in np.array_split(by_size, min(config.micro_batches, n_batch)):
        evidence, evidence_mask = pad_rows([positions[i] for i in group])  # (g, K)
        evidence_y, _ = pad_rows([table[evidence_rows[i], batch_llms[i]] for i in group])  # (g, K)
        targets, target_mask = pad_rows([positions[n_batch + i] for i in group])  # (g, T)
        target_y, _ = pad_rows([table[target_rows[i], batch_llms[i]] for i in group])  # (g, T)
        z = encoder.forward_projected(
            p[tensor(evidence)], q[tensor(evidence)], tensor(evidence_y), tensor(evidence_mask)
        )  # (g, d)
        logits = predictor.forward_projected(z.unsqueeze(1), u[tensor(targets)])  # (g, T)
        cell_loss = F.binary_cross_entropy_with_logits(
            logits, tensor(target_y), reduction="none"
        )  # (g, T)
        loss = loss + (cell_loss * tensor(target_mask)).sum() / total_targets
        if config.ranking_weight > 0:
            ranked.append((group, logits))

    if ranked:
        target_scores = [
            table[rows, llm] for rows, llm in zip(target_rows, batch_llms, strict=True)
        ]
        loss = loss + config.ranking_weight * listwise_loss(
            ranked, positions[n_batch:], target_scores, n_rows=len(unique), device=device
        )
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(
        [param for group in optimizer.param_groups for param in group["params"]], config.grad_clip
    )
    optimizer.step()
    return float(loss.detach())
