"""The trainers' AdamW against torch's, step by step."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from locus.nn.optim import AdamW


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 1))


def test_same_updates_as_torch_adamw_with_two_groups_and_a_schedule() -> None:
    ours, theirs = _model(0), _model(0)

    def groups(model: torch.nn.Module) -> list[dict[str, object]]:
        first, second = model[0], model[2]  # type: ignore[index]
        return [
            {"params": list(first.parameters()), "lr": 3e-3},
            {"params": list(second.parameters()), "lr": 1e-2, "weight_decay": 0.2},
        ]

    mine = AdamW(groups(ours), weight_decay=0.05)
    reference = torch.optim.AdamW(groups(theirs), weight_decay=0.05, foreach=False)
    generator = torch.Generator().manual_seed(1)
    for step in range(25):
        x = torch.randn(16, 6, generator=generator)
        for model, optimizer in ((ours, mine), (theirs, reference)):
            for group, factor in zip(optimizer.param_groups, (1.0, 0.5), strict=True):
                group["lr"] = group.setdefault("base", group["lr"]) * (factor if step > 10 else 1)
            optimizer.zero_grad()
            (model(x) ** 2).mean().backward()
            optimizer.step()
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_parameters_without_gradients_are_left_alone() -> None:
    model = _model(2)
    frozen = model[2].weight.detach().clone()  # type: ignore[index]
    optimizer = AdamW([{"params": list(model.parameters()), "lr": 1e-2}], weight_decay=0.5)
    model[0](torch.ones(1, 6)).sum().backward()  # type: ignore[index]
    optimizer.step()
    assert torch.equal(model[2].weight, frozen)  # type: ignore[index]
    with pytest.raises(ValueError, match="'lr'"):
        AdamW([{"params": list(model.parameters())}])


def test_training_does_not_import_the_compiler() -> None:
    script = (
        "import sys, numpy as np\n"
        "from locus.nn import NetworkConfig, TrainingConfig, train\n"
        "rng = np.random.default_rng(0)\n"
        "v = rng.normal(size=(60, 8)).astype(np.float32)\n"
        "s = (rng.random((60, 4)) < 0.5).astype(np.float32)\n"
        "net = NetworkConfig(dim=8, inducing_points=2, heads=2, feed_forward=8,\n"
        "                    predictor_hidden=4)\n"
        "c = TrainingConfig(network=net, anchors=32, min_evidence=4, max_steps=3, eval_every=2)\n"
        "train(v, s, np.arange(40), np.arange(40, 60), c)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"
