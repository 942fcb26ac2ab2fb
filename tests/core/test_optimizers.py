"""rlx's Adam, AdamW and SGD take the same steps as torch.optim's."""
from __future__ import annotations

import pytest
import torch

from rlx.core import optimizers
from rlx.core.optimizers import SGD, Adam


def _params(seed: int) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(shape, generator=gen)) for shape in ((3, 5), (5,), (2, 7, 4), (1,))]


def _run(make, steps: int = 6) -> list[torch.Tensor]:
    params = _params(0)
    opt = make(params)
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        opt.step()
    return [p.detach().clone() for p in params]


@pytest.mark.parametrize("fused", [True, False], ids=["fused-kernel", "foreach"])
@pytest.mark.parametrize("decoupled,wd", [(False, 0.0), (False, 0.1), (True, 0.1)], ids=["adam", "adam-l2", "adamw"])
def test_adam_steps_as_torch_optim(monkeypatch, fused, decoupled, wd):
    if not fused:
        monkeypatch.setattr(optimizers, "_fusable", lambda params, grads: False)
    ours = _run(lambda ps: Adam(ps, lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=wd, decoupled=decoupled))
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    theirs = _run(lambda ps: cls(ps, lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=wd, foreach=False))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_adam_uses_the_fused_kernel_for_dense_cpu_tensors(monkeypatch):
    calls = []
    real = torch._fused_adam_
    monkeypatch.setattr(torch, "_fused_adam_", lambda *a, **k: calls.append(1) or real(*a, **k))
    _run(lambda ps: Adam(ps, lr=0.01), steps=2)
    assert len(calls) == 2


def test_adam_state_dict_round_trip_continues_the_same_steps():
    params = _params(0)
    opt = Adam(params, lr=0.01)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()
    restored = Adam([torch.nn.Parameter(p.detach().clone()) for p in params], lr=0.01)
    restored.load_state_dict(opt.state_dict())
    assert restored.step_count == 1
    for p, q in zip(params, restored.params):
        q.grad = torch.ones_like(q)
    opt.step()
    restored.step()
    for p, q in zip(params, restored.params):
        torch.testing.assert_close(p, q)


def test_sgd_with_momentum_steps_as_torch_optim():
    ours = _run(lambda ps: SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True))
    theirs = _run(lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True,
                                             foreach=False))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
