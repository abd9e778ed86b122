"""Training of the learned baseline routers (torch): EmbedLLM-style matrix factorisation and
IRT-style. Inference and onboarding run in numpy (`locus.routing.learned`); this module only
fits the parameters and hands them back as numpy arrays.

    MF   logit(q, m) = w . (P_m * (W q + b)) + c        P_m: a learned vector per LLM
    IRT  logit(q, m) = a(q) . theta_m - b(q)            a, b: a small network over q

Both are trained with binary cross-entropy (soft targets for graded scores) on every observed
training cell, Adam, batches of about 2,048 cells; validation log-loss is checked once per epoch
and the best epoch is kept (patience in epochs). A batch is 2,048 cells drawn at random
(`batches="cells"`, EmbedLLM's way and the baselines'), or whole queries with all their cells
(`batches="queries"`): each query's projection (MF) or hidden layer (IRT) is then computed once
for all the LLMs scored on it, with one draw of noise or dropout, not once per cell.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from locus.errors import LocusInputError

__all__ = ["LearnedBaselineConfig", "TrainedBaseline", "train_baseline"]


@dataclass(frozen=True)
class LearnedBaselineConfig:
    """Hyper-parameters of MF / IRT training.

    MF defaults follow EmbedLLM (Zhuang et al., 2024, `algorithm/mf.py`): a 232-d vector per
    LLM, Gaussian noise of 0.05 on the query vector while training, batches of 2,048, Adam with
    weight decay 1e-5, 50 epochs. Their learning rate of 1e-4 was set for 112 LLMs x 36k
    queries; here an epoch is 10-100x fewer steps, so the rate is 1e-3 and every run takes at
    least `min_steps`. IRT: a 256-unit hidden layer gives a 32-d discrimination a(q) and a
    difficulty b(q) (after IRT-Router, Song et al., 2025, and the IRT-Net baseline of LOCUS).
    """

    dim: int = 232
    hidden: int = 256
    dropout: float = 0.1
    noise: float = 0.05
    batch_size: int = 2048
    lr: float = 1e-3
    weight_decay: float = 1e-5
    max_epochs: int = 50
    min_steps: int = 1500
    patience: int = 5
    seed: int = 0
    batches: Literal["cells", "queries"] = "cells"  # "queries": whole queries, all their cells

    def __post_init__(self) -> None:
        if self.batches not in ("cells", "queries"):
            raise LocusInputError(f"batches {self.batches!r}: expected 'cells' or 'queries'")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TrainedBaseline:
    """Learned arrays (numpy) and the training history."""

    arrays: dict[str, NDArray[np.float32]]
    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int = 0
    seconds: float = 0.0


class _MF(nn.Module):
    def __init__(self, n_llms: int, query_dim: int, config: LearnedBaselineConfig) -> None:
        super().__init__()
        self.llm_vectors = nn.Embedding(n_llms, config.dim)
        self.project = nn.Linear(query_dim, config.dim)
        self.head = nn.Linear(config.dim, 1)
        self.noise = config.noise

    def forward(
        self, queries: torch.Tensor, llms: torch.Tensor, rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Each cell's logit: of query `queries[i]` (or, given `rows`, `queries[rows[i]]`:
        each query once) and LLM `llms[i]`."""
        if self.training and self.noise > 0:
            queries = queries + torch.randn_like(queries) * self.noise
        projected = self.project(queries)
        if rows is not None:
            projected = projected[rows]
        return self.head(self.llm_vectors(llms) * projected).squeeze(-1)

    def arrays(self) -> dict[str, torch.Tensor]:
        return {
            "llm_vectors": self.llm_vectors.weight,
            "project_weight": self.project.weight,
            "project_bias": self.project.bias,
            "head_weight": self.head.weight[0],
            "head_bias": self.head.bias,
        }


class _IRT(nn.Module):
    def __init__(self, n_llms: int, query_dim: int, config: LearnedBaselineConfig) -> None:
        super().__init__()
        irt_dim = 32
        self.hidden = nn.Linear(query_dim, config.hidden)
        self.dropout = nn.Dropout(config.dropout)
        self.discrimination = nn.Linear(config.hidden, irt_dim)
        self.difficulty = nn.Linear(config.hidden, 1)
        self.ability = nn.Embedding(n_llms, irt_dim)
        nn.init.normal_(self.ability.weight, std=0.1)

    def forward(
        self, queries: torch.Tensor, llms: torch.Tensor, rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """As `_MF.forward`."""
        hidden = self.dropout(torch.relu(self.hidden(queries)))
        a = self.discrimination(hidden)  # (B, D)
        b = self.difficulty(hidden).squeeze(-1)  # (B,)
        if rows is not None:
            a, b = a[rows], b[rows]
        return (a * self.ability(llms)).sum(-1) - b

    def arrays(self) -> dict[str, torch.Tensor]:
        return {
            "hidden_weight": self.hidden.weight,
            "hidden_bias": self.hidden.bias,
            "discrimination_weight": self.discrimination.weight,
            "discrimination_bias": self.discrimination.bias,
            "difficulty_weight": self.difficulty.weight[0],
            "difficulty_bias": self.difficulty.bias,
            "ability": self.ability.weight,
        }


def _cells(
    scores: NDArray[np.float32],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rows, columns = np.nonzero(~np.isnan(scores))
    return (
        torch.from_numpy(rows.astype(np.int64)),
        torch.from_numpy(columns.astype(np.int64)),
        torch.from_numpy(scores[rows, columns].astype(np.float32)),
    )


class _CellBatches:
    """Batches of `cells` training cells drawn at random (`batches="cells"`): per batch each
    cell's query, None (no query is shared), and the cells' indices."""

    def __init__(self, rows: torch.Tensor, cells: int) -> None:
        self.rows = rows
        self.per_batch = min(cells, len(rows))
        self.steps = max(1, math.ceil(len(rows) / self.per_batch))

    def epoch(
        self, generator: torch.Generator
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]]:
        order = torch.randperm(len(self.rows), generator=generator)
        for start in range(0, len(self.rows), self.per_batch):
            cells = order[start : start + self.per_batch]
            yield self.rows[cells], None, cells


class _QueryBatches:
    """Batches of whole queries (`batches="queries"`): the training cells (`rows`, sorted by
    query as `np.nonzero` gives them) of about `cells` per batch, each query with all of its
    cells; per batch the queries (their indices), each cell's position among them, and the
    cells' indices."""

    def __init__(self, rows: torch.Tensor, n_queries: int, cells: int) -> None:
        counts = np.bincount(rows.numpy(), minlength=n_queries)
        self.starts = np.concatenate([[0], np.cumsum(counts)])
        self.counts = counts
        self.queries = np.flatnonzero(counts)
        mean = float(counts[self.queries].mean())
        self.per_batch = max(1, round(cells / mean))
        self.steps = max(1, math.ceil(len(self.queries) / self.per_batch))

    def epoch(
        self, generator: torch.Generator
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]]:
        order = self.queries[torch.randperm(len(self.queries), generator=generator).numpy()]
        for start in range(0, len(order), self.per_batch):
            chosen = order[start : start + self.per_batch]
            counts = self.counts[chosen]
            local = np.repeat(np.arange(len(chosen)), counts)
            within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
            cells = np.repeat(self.starts[chosen], counts) + within
            yield (torch.from_numpy(chosen), torch.from_numpy(local),
                   torch.from_numpy(cells))  # fmt: skip


def _train(
    model: _MF | _IRT,
    vectors: NDArray[np.float32],
    scores: NDArray[np.float32],
    val_vectors: NDArray[np.float32] | None,
    val_scores: NDArray[np.float32] | None,
    config: LearnedBaselineConfig,
) -> TrainedBaseline:
    started = time.perf_counter()
    rows, columns, targets = _cells(scores)
    if len(rows) == 0:
        raise LocusInputError("a learned baseline needs at least one observed training score")
    queries = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32))
    validation = None
    if val_vectors is not None and val_scores is not None and (~np.isnan(val_scores)).any():
        validation = (torch.from_numpy(np.ascontiguousarray(val_vectors, np.float32)),
                      *_cells(val_scores))  # fmt: skip
    generator = torch.Generator().manual_seed(config.seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    by_query = config.batches == "queries"
    batches = (
        _QueryBatches(rows, len(vectors), config.batch_size)
        if by_query
        else _CellBatches(rows, config.batch_size)
    )
    epochs = max(config.max_epochs, math.ceil(config.min_steps / batches.steps))
    best: tuple[float, int, dict[str, torch.Tensor]] | None = None
    history: list[dict[str, float]] = []
    for epoch in range(1, epochs + 1):
        model.train()
        total = 0.0
        for unique, local, cells in batches.epoch(generator):
            logits = model(queries[unique], columns[cells], local)
            loss = nn.functional.binary_cross_entropy_with_logits(logits, targets[cells])
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            total += loss.detach().item() * len(cells)
        entry = {"epoch": float(epoch), "train_log_loss": total / len(rows)}
        if validation is not None:
            model.eval()
            val_queries, val_rows, val_columns, val_targets = validation
            with torch.no_grad():
                if by_query:  # each validation query's vector read once
                    logits = model(val_queries, val_columns, val_rows)
                else:
                    logits = model(val_queries[val_rows], val_columns)
                val_loss = float(
                    nn.functional.binary_cross_entropy_with_logits(logits, val_targets)
                )
            entry["val_log_loss"] = val_loss
            if best is None or val_loss < best[0]:
                state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                best = (val_loss, epoch, state)
            elif epoch - best[1] >= config.patience:
                history.append(entry)
                break
        history.append(entry)
    best_epoch = len(history)
    if best is not None:
        model.load_state_dict(best[2])
        best_epoch = best[1]
    model.eval()
    arrays = {
        name: value.detach().cpu().numpy().astype(np.float32).copy()
        for name, value in model.arrays().items()
    }
    return TrainedBaseline(arrays, history, best_epoch, time.perf_counter() - started)


def train_baseline(
    kind: str,
    vectors: NDArray[np.float32],
    scores: NDArray[np.float32],
    val_vectors: NDArray[np.float32] | None = None,
    val_scores: NDArray[np.float32] | None = None,
    config: LearnedBaselineConfig | None = None,
) -> TrainedBaseline:
    """Fit `kind` ("mf" or "irt") on (n_queries, dq) vectors and (n_queries, n_llms) scores
    (NaN = no score); validation vectors and scores choose the kept epoch."""
    networks: dict[str, type[_MF] | type[_IRT]] = {"mf": _MF, "irt": _IRT}
    if kind not in networks:
        raise LocusInputError(f"learned baseline {kind!r}: expected one of {sorted(networks)}")
    config = config or LearnedBaselineConfig()
    torch.manual_seed(config.seed)
    model = networks[kind](scores.shape[1], vectors.shape[1], config)
    return _train(model, vectors, scores, val_vectors, val_scores, config)
