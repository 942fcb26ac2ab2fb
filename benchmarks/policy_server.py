"""Policy server throughput: requests/s with 1 and 8 remote-inference clients.

Each client is a process running CartPole episodes against a PolicyServerInput
(start_episode, then get_action + log_returns per step, end_episode), while the driver
drains the steps as a trainer would (`next()`, no learning, so the number is the
transport's and the server's). Requests/s counts from the first step (client start-up excluded).
Prints one JSON object.

    python benchmarks/policy_server.py --seconds 30
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import time
from typing import Any

import gymnasium as gym


def _client_process(url: str, seed: int, seconds: float, out: Any) -> None:
    """One client process: CartPole episodes for `seconds`; puts its request count on `out`."""
    from rlx.env.policy_client import PolicyClient

    client = PolicyClient(url, inference_mode="remote")
    sim = gym.make("CartPole-v1")
    n, episode = 0, 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        obs, _ = sim.reset(seed=seed * 10_000 + episode)
        episode_id = client.start_episode()
        n += 1
        while True:
            obs, reward, terminated, truncated, _ = sim.step(client.get_action(episode_id, obs))
            client.log_returns(episode_id, reward)
            n += 2
            if terminated or truncated:
                client.end_episode(episode_id, obs, truncated=truncated)
                n += 1
                break
        episode += 1
    out.put(n)


def measure(num_clients: int, seconds: float) -> dict:
    """Requests/s of a PolicyServerInput with `num_clients` client processes for `seconds`."""
    from rlx.algorithms.ppo import PPOConfig
    from rlx.env.policy_server_input import PolicyServerInput

    env = gym.make("CartPole-v1")
    config = (PPOConfig().environment(env=None, observation_space=env.observation_space,
                                      action_space=env.action_space)
              .env_runners(num_env_runners=0)
              .offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", 0, idle_timeout=0.2))
              .debugging(seed=0))
    algo = config.build()
    server = algo.env_runner_group.offline_io.reader
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_client_process, args=(server.url, i, seconds, out), daemon=True)
             for i in range(num_clients)]
    for p in procs:
        p.start()
    while server.book.num_steps == 0:  # the clients are importing; count from the first step
        time.sleep(0.01)
    start, steps0 = time.perf_counter(), server.book.num_steps
    steps = 0
    counts = []
    while len(counts) < num_clients:
        steps += len(server.next()) if server.book.wait_rows(1, 0.2, 0.2) else 0
        while not out.empty():
            counts.append(out.get())
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join()
    total_steps = server.book.num_steps - steps0
    algo.stop()
    return {"clients": num_clients, "seconds": round(elapsed, 2), "requests": sum(counts),
            "requests_per_s": round(sum(counts) / elapsed, 1), "env_steps_per_s": round(total_steps / elapsed, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="duration of each measurement")
    args = parser.parse_args()
    results = [measure(n, args.seconds) for n in (1, 8)]
    print(json.dumps({"benchmark": "policy_server", "machine": platform.machine(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
