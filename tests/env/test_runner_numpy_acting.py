"""Multi-agent sampling acts through the NumPy fast path (rlx.core.numpy_forward), with or
without policy_map_capacity: the module cache's residency hooks do not turn it off, a swapped-out
module's storage is not kept alive by NumPy views, and new weights are read after a swap or a
weight sync."""
from __future__ import annotations

import numpy as np
import torch

from rlx.algorithms.dqn import DQNConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.core.numpy_forward import has_numpy_forward
from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole


def one_policy_each(agent_id, episode, **kwargs):
    return f"p{agent_id}"


def three_policies(algo_config=None, **multi_agent):
    algo_config = algo_config or PPOConfig()
    return (algo_config.environment(MultiAgentCartPole, env_config={"num_agents": 3})
            .multi_agent(policies={"p0", "p1", "p2"}, policy_mapping_fn=one_policy_each, **multi_agent)
            .env_runners(num_envs_per_env_runner=2).debugging(seed=3))


def sampled(config, steps=40, explore=True):
    """(per-module actions, per-module distribution inputs, the numpy-batch counts, algo) of one sample()."""
    algo = config.build()
    batch = algo.env_runner.sample(num_timesteps=steps, explore=explore)
    counts = {pid: slot.num_numpy_batches for pid, slot in algo.env_runner.module_slots.items()}
    actions = {pid: b["actions"] for pid, b in batch.policy_batches.items()}
    return actions, batch, counts, algo


def acted_rows(policy_batch):
    """(observations, distribution inputs) of the rows of a module's batch that hold data."""
    obs, dist = policy_batch["obs"], policy_batch["action_dist_inputs"]
    obs, dist = obs.reshape(-1, obs.shape[-1]), dist.reshape(-1, dist.shape[-1])
    if "valid" in policy_batch:
        valid = policy_batch["valid"].ravel()
        obs, dist = obs[valid], dist[valid]
    return obs, dist


def torch_dist_inputs(module, obs):
    """What `module`'s torch forward pass computes for observation rows `obs`."""
    with torch.no_grad():
        return module.forward_inference({"obs": torch.from_numpy(np.ascontiguousarray(obs))})[
            "action_dist_inputs"].numpy()


def test_multi_agent_sampling_acts_in_numpy():
    _, _, counts, algo = sampled(three_policies())
    try:
        assert set(counts) == {"p0", "p1", "p2"} and all(n > 0 for n in counts.values()), counts
    finally:
        algo.stop()


def test_policy_map_capacity_acts_in_numpy_and_draws_the_actions_of_an_unlimited_run():
    for algo_config, swappable in ((PPOConfig(), False), (PPOConfig(), True), (DQNConfig(), False)):
        unlimited, _, _, algo = sampled(three_policies(algo_config.copy()))
        algo.stop()
        limited, batch, counts, algo = sampled(three_policies(
            algo_config.copy(), policy_map_capacity=1, policy_states_are_swappable=swappable))
        try:
            cache = algo.env_runner.module.module_cache
            assert cache is not None and cache.num_swapped_out > 0 and cache.num_swapped_in > 0
            assert all(n > 0 for n in counts.values()), counts  # the swap hooks did not turn NumPy off
            assert set(limited) == set(unlimited)
            for pid in unlimited:
                np.testing.assert_array_equal(limited[pid], unlimited[pid], err_msg=f"{type(algo_config)} {pid}")
            # What each module acted on were its own weights (no stale view after a swap).
            for pid, policy_batch in batch.policy_batches.items():
                obs, dist = acted_rows(policy_batch)
                np.testing.assert_allclose(dist, torch_dist_inputs(algo.env_runner.module[pid], obs),
                                           rtol=1e-5, atol=1e-6)
        finally:
            algo.stop()


def test_a_swapped_out_module_keeps_no_numpy_view_of_its_weights():
    _, _, _, algo = sampled(three_policies(policy_map_capacity=1))
    try:
        multi = algo.env_runner.module
        cache = multi.module_cache
        out = [pid for pid in ("p0", "p1", "p2") if not cache.is_resident(pid)]
        assert len(out) == 2
        for pid in out:
            module = multi._rl_modules[pid]  # (indexing would bring it back)
            assert all(p.numel() == 0 for p in module.parameters())
            assert not has_numpy_forward(module)
    finally:
        algo.stop()


def test_numpy_acting_reads_the_weights_set_after_a_sample():
    for capacity in (None, 1):
        _, _, _, algo = sampled(three_policies(**({"policy_map_capacity": capacity} if capacity else {})))
        try:
            runner = algo.env_runner
            before = runner.sample(num_timesteps=20, explore=False)
            rng = np.random.default_rng(0)
            weights = {pid: {k: rng.normal(size=np.shape(v)).astype(np.float32) for k, v in w.items()}
                       for pid, w in runner.get_weights().items()}
            runner.set_weights(weights)
            numpy_batches = {pid: slot.num_numpy_batches for pid, slot in runner.module_slots.items()}
            after = runner.sample(num_timesteps=20, explore=False)
            for pid, policy_batch in after.policy_batches.items():
                assert runner.module_slots[pid].num_numpy_batches > numpy_batches[pid]
                module = runner.module[pid]
                obs, dist = acted_rows(policy_batch)
                np.testing.assert_allclose(dist, torch_dist_inputs(module, obs), rtol=1e-5, atol=1e-5)
                old_obs, old_dist = acted_rows(before.policy_batches[pid])
                assert not np.allclose(old_dist, torch_dist_inputs(module, old_obs), atol=1e-3)
        finally:
            algo.stop()


def test_numpy_acting_reads_the_weights_of_a_restored_checkpoint(tmp_path):
    other = three_policies(policy_map_capacity=1).debugging(seed=11).build()
    path = other.save(str(tmp_path / "other"))
    other.stop()
    _, before, _, algo = sampled(three_policies(policy_map_capacity=1))
    try:
        algo.restore(path)
        runner = algo.env_runner
        batch = runner.sample(num_timesteps=20, explore=False)
        for pid, policy_batch in batch.policy_batches.items():
            obs, dist = acted_rows(policy_batch)
            np.testing.assert_allclose(dist, torch_dist_inputs(runner.module[pid], obs), rtol=1e-5, atol=1e-5)
            old_obs, old_dist = acted_rows(before.policy_batches[pid])
            assert not np.allclose(old_dist, torch_dist_inputs(runner.module[pid], old_obs), atol=1e-4)
        assert all(slot.num_numpy_batches > 0 for slot in runner.module_slots.values())
    finally:
        algo.stop()
