"""Training that gives the same networks twice: `reproducible(seed)`.

Within it torch's global RNG is seeded (initialisation, dropout, noise) and restored after, and
torch's deterministic algorithms are on. Without them two fits of one seed on BFCL differed at
the 7th digit of the loss after 20 steps and kept different guard margins; torch lists the CPU
backward of indexing by a tensor (LOCUS's per-LLM gather of projected queries) among the ops the
switch makes deterministic. No slower on 2 cores (20 steps of BFCL 5.5-5.8 s either way). Ops
without a deterministic form (on some GPUs) warn instead of failing. The same networks need the
same seed, machine and thread count: one thread and two give different networks, each
reproducible (docs/decisions.md, "Training reproducible bit for bit").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["reproducible"]


@contextmanager
def reproducible(seed: int) -> Iterator[None]:
    """torch seeded with `seed` and its deterministic algorithms on (warn-only) within; the
    caller's RNG state and deterministic setting restored after."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        _set_deterministic(True, warn_only=True)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield
    finally:
        _set_deterministic(deterministic, warn_only=warn_only)


def _set_deterministic(mode: bool, *, warn_only: bool) -> None:
    """torch's deterministic-algorithms switch without `torch.use_deterministic_algorithms`'s
    import of the compiler's settings (`torch._inductor.config`, which loads `torch._dynamo`:
    seconds, for code locus never compiles; the same reason as `locus.nn.optim`); the public
    call where the switch is not where this torch keeps it."""
    switch = getattr(torch._C, "_set_deterministic_algorithms", None)
    if switch is None:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        switch(mode, warn_only=warn_only)
