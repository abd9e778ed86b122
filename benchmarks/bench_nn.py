"""Speed of the LOCUS networks on this machine (CPU): embedding, scoring, and two ablations.

Prints the figures and writes benchmarks/results/nn.json. No assertions: read the numbers.

    python benchmarks/bench_nn.py [--repeats 5]

Figures (median and fastest seconds over repeats, after one warm-up call):
- embed 100 LLMs x 1024 evidence (dq = 384), eval mode: each LLM with its own queries
  (`embed_many`), and all LLMs on the same 1024 queries (`embed_indexed`, projected once).
- score 4,096 queries x 100 LLMs with `score_matrix`.
- ablation, token layer: Linear([phi, y, phi (2y - 1)]) per token vs the P + y Q form, per token
  and with the 1024 queries shared by the 100 LLMs (project once, gather).
- ablation, scoring: `score_matrix` vs a Python loop over LLMs (queries projected once) vs the
  paired forward on all (query, LLM) pairs.
- attention kernel: scaled_dot_product_attention vs explicit softmax vs nn.MultiheadAttention,
  at the shape of the ISAB summarise step (64 inducing points over 1024 masked tokens).
- one training step at the default configuration (32 LLMs, A = 1024, 256 targets).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from locus.artifact import NumpyPredictor
from locus.nn import (
    CorrectnessPredictor,
    LLMEncoder,
    TrainingConfig,
    embed_indexed,
    embed_many,
    train,
)

QUERY_DIM = 384
N_LLMS = 100
EVIDENCE = 1024
N_QUERIES = 4096
RESULTS = Path(__file__).resolve().parent / "results" / "nn.json"


def timed(function: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """(median, fastest) wall seconds; both, because shared machines have noisy bursts."""
    function()  # warm-up: lazy kernel initialisation, allocator
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def bench_embedding(encoder: LLMEncoder, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(N_LLMS * EVIDENCE, QUERY_DIM)).astype(np.float32)
    scores = (rng.random((N_LLMS, EVIDENCE)) < 0.6).astype(np.float32)  # (n_llms, K)
    own = [(vectors[i * EVIDENCE : (i + 1) * EVIDENCE], scores[i]) for i in range(N_LLMS)]
    shared_rows = [np.arange(EVIDENCE)] * N_LLMS

    # ablation: an unpadded batch through the attention blocks with an all-True key mask (what
    # `forward_projected` passes) and with none (SDPA's unmasked kernels)
    batch_phi = torch.from_numpy(vectors[: 25 * EVIDENCE].reshape(25, EVIDENCE, QUERY_DIM))
    batch_y = torch.from_numpy(scores[:25])
    all_real = torch.ones(25, EVIDENCE, dtype=torch.bool)

    def blocks(mask: torch.Tensor | None) -> torch.Tensor:
        p, q = encoder.project_queries(batch_phi)
        x = p + batch_y.unsqueeze(-1) * q
        for block in encoder.blocks:
            x = block(x, mask)
        return encoder.head(encoder.pool(encoder.seed, x, mask).squeeze(1))

    def bf16_shared() -> np.ndarray:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return embed_indexed(encoder, vectors, shared_rows, list(scores), batch_size=25)

    exact = embed_indexed(encoder, vectors, shared_rows, list(scores), batch_size=25)
    rounded = bf16_shared()
    cosine = (exact * rounded).sum(1) / (
        np.linalg.norm(exact, axis=1) * np.linalg.norm(rounded, axis=1)
    )
    with torch.inference_mode():
        masked_difference = float((blocks(all_real) - blocks(None)).abs().max())
        ablation = {
            "embed_25x1024_masked_path_s": timed(lambda: blocks(all_real), repeats),
            "embed_25x1024_unmasked_path_s": timed(lambda: blocks(None), repeats),
        }
    return {
        **ablation,
        "embed_masked_vs_unmasked_max_abs_diff": masked_difference,
        "embed_100x1024_shared_queries_bf16_autocast_s": timed(bf16_shared, repeats),
        "embed_bf16_vs_fp32_min_cosine": float(cosine.min()),
        "embed_100x1024_own_queries_s": timed(
            lambda: embed_many(encoder, own, batch_size=25), repeats
        ),
        "embed_100x1024_shared_queries_s": timed(
            lambda: embed_indexed(encoder, vectors, shared_rows, list(scores), batch_size=25),
            repeats,
        ),
    }


def bench_token_layer(encoder: LLMEncoder, repeats: int) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(0)
    phi = torch.randn(N_LLMS, EVIDENCE, QUERY_DIM, generator=generator)  # (B, K, dq)
    y = torch.randint(0, 2, (N_LLMS, EVIDENCE), generator=generator).float()  # (B, K)
    shared = phi[0]  # (K, dq): the same queries for every LLM

    def projected_per_token() -> torch.Tensor:
        p, q = encoder.project_queries(phi)
        return p + y.unsqueeze(-1) * q

    def projected_shared() -> torch.Tensor:
        p, q = encoder.project_queries(shared)  # (K, d) once
        return p.unsqueeze(0) + y.unsqueeze(-1) * q.unsqueeze(0)  # (B, K, d)

    with torch.inference_mode():
        return {
            "tokens_naive_s": timed(lambda: encoder.tokens_naive(phi, y), repeats),
            "tokens_projected_per_token_s": timed(projected_per_token, repeats),
            "tokens_naive_shared_queries_s": timed(
                lambda: encoder.tokens_naive(shared.expand(N_LLMS, -1, -1), y), repeats
            ),
            "tokens_projected_shared_queries_s": timed(projected_shared, repeats),
        }


def bench_scoring(predictor: CorrectnessPredictor, repeats: int) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(1)
    z = torch.randn(N_LLMS, 128, generator=generator)  # (n_llms, d)
    phi = torch.randn(N_QUERIES, QUERY_DIM, generator=generator)  # (n_queries, dq)

    def python_loop() -> torch.Tensor:
        u = predictor.project_queries(phi)  # (n_queries, d), once
        columns = [predictor.forward_projected(z[llm].expand_as(u), u) for llm in range(N_LLMS)]
        return torch.stack(columns, dim=1)

    def all_pairs() -> torch.Tensor:
        return predictor(
            z.unsqueeze(0).expand(N_QUERIES, -1, -1).reshape(-1, 128),
            phi.unsqueeze(1).expand(-1, N_LLMS, -1).reshape(-1, QUERY_DIM),
        ).view(N_QUERIES, N_LLMS)

    # the torch-free path routing uses (locus.artifact.NumpyPredictor), same weights
    fast = NumpyPredictor({k: v.numpy() for k, v in predictor.state_dict().items()})
    z_np, phi_np = z.numpy(), phi.numpy()
    with torch.inference_mode():
        difference = float((predictor.score_matrix(z, phi) - python_loop()).abs().max())
        numpy_difference = float(
            np.abs(fast.score_matrix(z_np, phi_np) - predictor.score_matrix(z, phi).numpy()).max()
        )
        return {
            "score_4096x100_numpy_s": timed(lambda: fast.score_matrix(z_np, phi_np), repeats),
            "score_4096x100_numpy_vs_torch_max_abs_diff": numpy_difference,
            "score_4096x100_score_matrix_s": timed(lambda: predictor.score_matrix(z, phi), repeats),
            "score_4096x100_python_loop_s": timed(python_loop, repeats),
            "score_4096x100_paired_forward_s": timed(all_pairs, repeats),
            "score_matrix_vs_loop_max_abs_diff": difference,
        }


def bench_attention(repeats: int) -> dict[str, Any]:
    batch, heads, n_query, n_key, dim = 25, 4, 64, EVIDENCE, 128
    generator = torch.Generator().manual_seed(2)
    q = torch.randn(batch, heads, n_query, dim // heads, generator=generator)
    k = torch.randn(batch, heads, n_key, dim // heads, generator=generator)
    v = torch.randn(batch, heads, n_key, dim // heads, generator=generator)
    key_mask = torch.ones(batch, n_key, dtype=torch.bool)
    key_mask[:, n_key // 2 :] = torch.rand(batch, n_key - n_key // 2, generator=generator) < 0.5
    attn_mask = key_mask[:, None, None, :]

    def explicit() -> torch.Tensor:
        logits = (q @ k.transpose(-1, -2)) / (dim // heads) ** 0.5
        logits = logits.masked_fill(~attn_mask, float("-inf"))
        return torch.softmax(logits, dim=-1) @ v

    mha = torch.nn.MultiheadAttention(dim, heads, batch_first=True).eval()
    x_query = torch.randn(batch, n_query, dim, generator=generator)
    x_key = torch.randn(batch, n_key, dim, generator=generator)
    query, key_value, out = (
        torch.nn.Linear(dim, dim),
        torch.nn.Linear(dim, 2 * dim),
        torch.nn.Linear(dim, dim),
    )

    def sdpa_with_projections() -> torch.Tensor:  # what LLMEncoder's attention blocks do
        qq = query(x_query).view(batch, n_query, heads, -1).transpose(1, 2)
        kv = key_value(x_key).view(batch, n_key, 2, heads, -1).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(qq, kv[0], kv[1], attn_mask=attn_mask)
        return out(attended.transpose(1, 2).reshape(batch, n_query, dim))

    with torch.inference_mode():
        return {
            "attention_sdpa_s": timed(
                lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask), repeats
            ),
            "attention_explicit_softmax_s": timed(explicit, repeats),
            "attention_block_sdpa_with_projections_s": timed(sdpa_with_projections, repeats),
            "attention_block_nn_multihead_attention_s": timed(
                lambda: mha(x_query, x_key, x_key, key_padding_mask=~key_mask, need_weights=False),
                repeats,
            ),
        }


def bench_training_step(steps: int) -> dict[str, Any]:
    """A step with locus's AdamW, then with torch's (the same update; torch's first call
    imports torch._dynamo, timed separately, and it may fuse the update with foreach kernels)."""
    import locus.nn.training as training

    ours = _training_step_seconds(steps)
    started = time.perf_counter()
    torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])  # its one-off import, alone
    first_torch_adamw = time.perf_counter() - started
    original = training.AdamW
    training.AdamW = torch.optim.AdamW  # type: ignore[assignment,misc]
    try:
        theirs = _training_step_seconds(steps)
    finally:
        training.AdamW = original  # type: ignore[misc]
    return {
        "train_step_32llms_A1024_T256_s": ours,
        "train_step_32llms_A1024_T256_torch_adamw_s": theirs,
        "torch_adamw_first_construction_s": first_torch_adamw,
    }


def _training_step_seconds(steps: int) -> tuple[float, float]:
    rng = np.random.default_rng(3)
    n_queries, n_llms = 6000, 64
    vectors = rng.normal(size=(n_queries, QUERY_DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = (rng.random((n_queries, n_llms)) < 0.6).astype(np.float32)
    stamps: list[float] = []
    config = TrainingConfig(max_steps=steps + 1, eval_every=10_000)
    train(
        vectors, scores, np.arange(5000), np.arange(5000, n_queries), config,
        progress=lambda step, total, info: stamps.append(time.perf_counter()),
    )  # fmt: skip
    per_step = np.diff(stamps)[:-1]  # drop step 1 (warm-up) and the last (it runs the final eval)
    return float(np.median(per_step)), float(per_step.min())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--train-steps", type=int, default=8)
    args = parser.parse_args()

    torch.manual_seed(0)
    encoder = LLMEncoder(QUERY_DIM).eval()
    predictor = CorrectnessPredictor(QUERY_DIM).eval()
    figures: dict[str, float] = {}
    for name, run in [
        ("embedding", lambda: bench_embedding(encoder, args.repeats)),
        ("token layer", lambda: bench_token_layer(encoder, args.repeats)),
        ("scoring", lambda: bench_scoring(predictor, args.repeats)),
        ("attention", lambda: bench_attention(args.repeats)),
        ("training", lambda: bench_training_step(args.train_steps)),
    ]:
        print(f"== {name}   (median, fastest)")
        for key, value in run().items():
            if isinstance(value, tuple):
                median, fastest = value
                figures[key] = median
                figures[key[: -len("_s")] + "_fastest_s"] = fastest
                print(f"  {key:45s} {median * 1000:9.1f} ms {fastest * 1000:9.1f} ms")
            elif key.endswith("_s"):
                figures[key] = value
                print(f"  {key:45s} {value * 1000:9.1f} ms")
            else:
                figures[key] = value
                print(f"  {key:45s} {value:9.2e}")

    report = {
        "figures": figures,
        "targets_s": {
            "embed_100x1024_own_queries_s": 0.100,
            "score_4096x100_score_matrix_s": 0.150,
        },
        "environment": {
            "torch": torch.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "processor": platform.processor(),
            "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "repeats": args.repeats,
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
