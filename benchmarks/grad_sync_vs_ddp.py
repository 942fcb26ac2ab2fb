"""rlx's gradient averaging (`_GradSync`: one flat all_reduce right before each optimizer step)
against torch's DistributedDataParallel (bucketed all_reduces overlapped with backward), on the
same model and batch, 2 ranks, gloo on this machine.

Usage: python benchmarks/grad_sync_vs_ddp.py [--steps 30] [--batch 128]

Models: the PPO default MLP (obs 4 -> 256 -> 256, policy and value heads) and a bigger MLP
(obs 64 -> 1024 x 3 -> 18; about 2.2 M parameters). Each rank runs forward, backward, gradient
averaging and an Adam step per iteration; one JSON line per (model, method) gives the median
step time over `steps` steps after 3 warm-up steps, and the largest difference between the
ranks' and the two methods' weights (both must average the same gradients).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

MODELS = {"ppo_default_mlp": (4, [256, 256], 2), "big_mlp": (64, [1024, 1024, 1024], 18)}


def _build(spec: tuple[int, list[int], int]) -> torch.nn.Module:
    torch.manual_seed(0)
    inp, hidden, out = spec
    layers, last = [], inp
    for h in hidden:
        layers += [torch.nn.Linear(last, h), torch.nn.Tanh()]
        last = h
    return torch.nn.Sequential(*layers, torch.nn.Linear(last, out + 1))  # logits + value


def _rank_main(rank: int, port: int, args: argparse.Namespace, out: "mp.Queue") -> None:
    from rlx.core.learner.learner_process import _GradSync

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    for name, spec in MODELS.items():
        finals = {}
        for method in ("grad_sync", "ddp"):
            model = _build(spec)
            net = torch.nn.parallel.DistributedDataParallel(model) if method == "ddp" else model
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            sync = _GradSync(2, torch.device("cpu"), None)
            gen = torch.Generator().manual_seed(100 + rank)
            times = []
            for step in range(args.steps + 3):
                x = torch.randn(args.batch, spec[0], generator=gen)
                y = torch.randn(args.batch, spec[2] + 1, generator=gen)
                t0 = time.perf_counter()
                opt.zero_grad()
                loss = (net(x) - y).pow(2).mean()
                loss.backward()
                if method == "grad_sync":
                    sync.sync(list(model.parameters()))
                opt.step()
                if step >= 3:
                    times.append(time.perf_counter() - t0)
            finals[method] = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            gathered = [torch.empty_like(finals[method]) for _ in range(2)]
            dist.all_gather(gathered, finals[method])
            if rank == 0:
                out.put({"model": name, "method": method,
                         "params": sum(p.numel() for p in model.parameters()),
                         "step_median_ms": round(1000 * statistics.median(times), 3),
                         "step_min_ms": round(1000 * min(times), 3),
                         "rank_weight_diff": float((gathered[0] - gathered[1]).abs().max())})
        if rank == 0:
            out.put({"model": name, "max_weight_diff_grad_sync_vs_ddp":
                     float((finals["grad_sync"] - finals["ddp"]).abs().max())})
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(r, port, args, out)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    while not out.empty():
        print(json.dumps(out.get()))


if __name__ == "__main__":
    main()
