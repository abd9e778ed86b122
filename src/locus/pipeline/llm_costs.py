"""Each LLM's known cost per query, for routing by cost: its mean observed cost, else the
catalog's cost_per_query, else its per-token prices (`TokenPrices`) on the query's estimated
prompt tokens (`prompt_tokens`); what `WorkspaceRouter` reads at load and refresh.

    >>> prompt_tokens(["What is 2+2?"]).tolist()
    [3.0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from locus.store import Store

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_COMPLETION_TOKENS",
    "DEFAULT_PROMPT_TOKENS",
    "TokenPrices",
    "known_costs",
    "prompt_tokens",
    "token_prices",
]

CHARS_PER_TOKEN = 4.0  # the usual rule of thumb for English text and BPE tokenizers
DEFAULT_PROMPT_TOKENS = 256  # a query whose text is not at hand (the fit's validation queries)
DEFAULT_COMPLETION_TOKENS = 256  # an LLM without recorded usage


def prompt_tokens(texts: Sequence[str]) -> NDArray[np.float64]:
    """(n_texts,) estimated prompt tokens of each text: ~4 characters a token, at least 1 (no
    tokenizer is loaded to route: the LLMs' own differ, and an estimate prices as well).

    >>> prompt_tokens(["What is 2+2?", ""]).tolist()
    [3.0, 1.0]
    """
    lengths = np.array([len(text.strip()) for text in texts], dtype=np.float64)
    return np.maximum(np.ceil(lengths / CHARS_PER_TOKEN), 1.0)


@dataclass(frozen=True)
class TokenPrices:
    """An LLM priced by its tokens (the catalog's USD per million, a missing one 0, as the
    gateway charges an answer) and the completion tokens it is expected to write: the mean of
    its recorded answers (`locus onboard`'s probes), else `DEFAULT_COMPLETION_TOKENS`.

    >>> TokenPrices(2.0, 10.0, 100.0).usd(np.array([500.0])).tolist()
    [0.002]
    """

    price_in_per_mtok: float
    price_out_per_mtok: float
    completion_tokens: float = DEFAULT_COMPLETION_TOKENS

    def usd(self, prompt_tokens: NDArray[np.float64]) -> NDArray[np.float64]:
        """(n,) USD of one query of each of `prompt_tokens` (n,)."""
        tokens_out = self.completion_tokens * self.price_out_per_mtok
        return (np.asarray(prompt_tokens) * self.price_in_per_mtok + tokens_out) / 1e6


def token_prices(store: Store) -> dict[str, TokenPrices]:
    """The LLMs priced by their catalog tokens alone: no observed cost, no cost_per_query."""
    observed = store.llm_costs()
    out = {}
    for llm, metadata in store.llm_metadata().items():
        price_in, price_out = metadata.get("price_in_per_mtok"), metadata.get("price_out_per_mtok")
        if llm in observed or metadata.get("cost_per_query") is not None:
            continue
        if price_in is None and price_out is None:
            continue
        recorded = [
            answer.completion_tokens
            for answer in store.probe_answers(llm).values()
            if answer.completion_tokens  # None or 0: the endpoint sent no usage
        ]
        out[llm] = TokenPrices(
            float(price_in or 0.0),
            float(price_out or 0.0),
            float(np.mean(recorded)) if recorded else DEFAULT_COMPLETION_TOKENS,
        )
    return out


def known_costs(store: Store, token_prices: Mapping[str, TokenPrices]) -> dict[str, float]:
    """USD per query of each LLM: its mean observed cost, else its catalog cost_per_query,
    else its `token_prices` on a query of `DEFAULT_PROMPT_TOKENS`."""
    costs = store.llm_costs()
    for llm, metadata in store.llm_metadata().items():
        if llm not in costs and metadata.get("cost_per_query") is not None:
            costs[llm] = float(metadata["cost_per_query"])
    typical = np.array([DEFAULT_PROMPT_TOKENS], dtype=np.float64)
    for llm, prices in token_prices.items():
        costs.setdefault(llm, float(prices.usd(typical)[0]))
    return costs
