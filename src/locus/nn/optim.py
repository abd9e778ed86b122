"""AdamW for the LOCUS trainers, without importing torch's compiler stack; the schedule.

`torch.optim.Optimizer` wraps `add_param_group`, `zero_grad` and `step` in
`torch._disable_dynamo`, whose first call imports `torch._dynamo` (sympy and the compiler):
1.3 s on 2 quiet cores (4 s beside other work), in every process that trains, against a
one-minute fit. This is the same update as `torch.optim.AdamW(foreach=False)` (decoupled weight
decay, bias-corrected moments; tests compare the two step by step), with the small surface the
trainers use: `param_groups` (each with its own "lr", read at every step, so schedules set
it), `zero_grad` and `step`. `lr_factor` is the learning-rate schedule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from locus.nn.config import TrainingConfig

__all__ = ["AdamW", "lr_factor"]


class AdamW:
    """Adam with decoupled weight decay (Loshchilov and Hutter), torch's defaults.

    Args:
        groups: parameter groups, each {"params": [...], "lr": float}, optionally with its
            own "weight_decay".
        weight_decay: decay of groups that do not set their own.
        betas, eps: as in `torch.optim.AdamW`.

    Example:
        >>> layer = torch.nn.Linear(3, 1)
        >>> optimizer = AdamW([{"params": list(layer.parameters()), "lr": 1e-3}])
        >>> layer(torch.ones(2, 3)).sum().backward()
        >>> optimizer.step()
        >>> optimizer.zero_grad()
    """

    def __init__(
        self,
        groups: Iterable[Mapping[str, Any]],
        *,
        weight_decay: float = 0.01,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.param_groups: list[dict[str, Any]] = []
        for group in groups:
            params = list(group["params"])
            if not params or "lr" not in group:
                raise ValueError("every parameter group needs parameters and an 'lr'")
            self.param_groups.append(
                {**group, "params": params, "weight_decay": group.get("weight_decay", weight_decay)}
            )
        self.betas, self.eps = betas, eps
        self._steps = 0
        self._moments: dict[torch.nn.Parameter, tuple[torch.Tensor, torch.Tensor]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for param in group["params"]:
                if set_to_none:
                    param.grad = None
                elif param.grad is not None:
                    param.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient."""
        beta1, beta2 = self.betas
        self._steps += 1
        correction1 = 1.0 - beta1**self._steps
        correction2_sqrt = math.sqrt(1.0 - beta2**self._steps)
        for group in self.param_groups:
            lr, decay = float(group["lr"]), float(group["weight_decay"])
            for param in group["params"]:
                grad = param.grad
                if grad is None:
                    continue
                if param not in self._moments:
                    self._moments[param] = (torch.zeros_like(param), torch.zeros_like(param))
                mean, square = self._moments[param]
                param.mul_(1.0 - lr * decay)
                mean.lerp_(grad, 1.0 - beta1)
                square.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                denominator = (square.sqrt() / correction2_sqrt).add_(self.eps)
                param.addcdiv_(mean, denominator, value=-lr / correction1)


def lr_factor(step: int, config: TrainingConfig) -> float:
    """Multiplier of the base learning rates at `step` (1-based): warm-up, then the schedule."""
    warmup = min(config.warmup_steps, config.max_steps - 1)
    if step <= warmup:
        return step / (warmup + 1)
    if config.lr_schedule == "cosine":
        done = (step - warmup) / (config.max_steps - warmup + 1)
        return 0.5 * (1.0 + math.cos(math.pi * done))
    return 1.0
