"""Learner and multi-agent options that used to be refused (issue 31 items 6 and 7):
torch_compile_learner_what_to_compile='complete_update', replay_mode='lockstep', and
policy_map_capacity / policy_states_are_swappable."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.dqn import DQNConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.env.multi_agent_env import MultiAgentEnv
from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole
from rlx.utils.errors import ConfigError
from rlx.utils.replay_buffers import ReplayBuffer

# ---------------------------------------------------------------------- complete_update


def _dqn(**framework):
    return (DQNConfig().environment("CartPole-v1").debugging(seed=0).framework(**framework)
            .training(train_batch_size=32))


def test_complete_update_trains_like_the_eager_update():
    from torch._dynamo.utils import counters

    eager = _dqn().build()
    compiled = _dqn(torch_compile_learner=True, torch_compile_learner_what_to_compile="complete_update",
                    torch_compile_learner_dynamo_backend="aot_eager").build()
    try:
        buffer = ReplayBuffer(1000, seed=0)
        buffer.add(eager.env_runner.sample(num_timesteps=200), time_major=True)
        batch = buffer.sample(32)
        counters.clear()
        for step in range(3):  # the first update runs eagerly (as RLlib's), the later ones compiled
            torch.manual_seed(step)
            eager_metrics = eager.learner.run_update({k: v.copy() for k, v in batch.items()}, timestep=1000 + step)
            torch.manual_seed(step)
            compiled_metrics = compiled.learner.run_update({k: v.copy() for k, v in batch.items()},
                                                           timestep=1000 + step)
            assert float(compiled_metrics["qf_loss"]) == pytest.approx(float(eager_metrics["qf_loss"]), rel=1e-6)
        assert counters["stats"]["unique_graphs"] > 0  # the update ran through TorchDynamo
        expected = eager.learner.get_weights()
        for name, value in compiled.learner.get_weights().items():
            np.testing.assert_allclose(value, expected[name], rtol=1e-6, atol=1e-7, err_msg=name)
        compiled.train()  # and through the Algorithm
    finally:
        eager.stop()
        compiled.stop()


def test_complete_update_is_decided_at_build():
    from rlx.algorithms.es import ESConfig

    with pytest.raises(ConfigError, match="complete_update.*num_learners"):
        (PPOConfig().environment("CartPole-v1").learners(num_learners=1)
         .framework(torch_compile_learner=True, torch_compile_learner_what_to_compile="complete_update").validate())
    config = (ESConfig().environment("CartPole-v1").env_runners(num_env_runners=0)
              .framework(torch_compile_learner=True, torch_compile_learner_what_to_compile="complete_update"))
    with pytest.raises(ConfigError, match="torch_compile_learner_what_to_compile='complete_update'.*ESLearner"):
        config.build()


# ---------------------------------------------------------------------- lockstep replay


class StepStampEnv(MultiAgentEnv):
    """Four agents that act every step; each observes [episode number, env step, its index]."""

    def __init__(self, config=None):
        super().__init__()
        self.agents = self.possible_agents = [0, 1, 2, 3]
        space = gym.spaces.Box(-1e6, 1e6, (3,), np.float32)
        self.observation_spaces = {a: space for a in self.agents}
        self.action_spaces = {a: gym.spaces.Discrete(2) for a in self.agents}
        self.episode = -1
        self.t = 0

    def _obs(self):
        return {a: np.array([self.episode, self.t, a], np.float32) for a in self.agents}

    def reset(self, *, seed=None, options=None):
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action_dict):
        self.t += 1
        done = self.t >= 7
        return (self._obs(), {a: 1.0 for a in action_dict}, {"__all__": done}, {"__all__": False}, {})


def _two_policies(agent_id, episode, **kwargs):
    return f"p{agent_id % 2}"


def _lockstep_dqn(**replay):
    return (DQNConfig().environment(StepStampEnv)
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=_two_policies, **replay)
            .env_runners(num_envs_per_env_runner=2)
            .training(replay_buffer_config={"type": "MultiAgentReplayBuffer", "capacity": 500},
                      num_steps_sampled_before_learning_starts=32, train_batch_size=16)
            .reporting(min_sample_timesteps_per_iteration=64).debugging(seed=0))


def test_lockstep_replay_gives_every_policy_the_same_env_steps():
    algo = _lockstep_dqn(replay_mode="lockstep").build()
    try:
        result = algo.train()
        assert set(result["info"]["learner"]) == {"p0", "p1"}  # both policies trained on lockstep batches
        batch = algo.local_replay_buffer.sample(12)
        assert batch.env_steps() == 12
        p0, p1 = batch["p0"]["obs"], batch["p1"]["obs"]
        assert len(p0) == len(p1) == 24  # two agents of each policy in each of the 12 env steps
        # Row 2k and 2k+1 of each policy belong to the k-th sampled env step: (episode, step) agree.
        np.testing.assert_array_equal(p0[:, :2], p1[:, :2])
        np.testing.assert_array_equal(p0[0::2, :2], p0[1::2, :2])
        assert set(p0[:, 2]) == {0.0, 2.0} and set(p1[:, 2]) == {1.0, 3.0}
        assert len({tuple(row) for row in p0[:, :2]}) > 1  # not one step over and over
    finally:
        algo.stop()


def test_lockstep_replay_builds_n_step_returns_and_restores():
    from rlx.utils.replay_buffers.multi_agent_replay_buffer import LockstepReplayBuffer

    algo = _lockstep_dqn(replay_mode="lockstep").training(n_step=3, store_buffer_in_checkpoints=True).build()
    try:
        algo.train()
        buffer = algo.local_replay_buffer
        assert isinstance(buffer, LockstepReplayBuffer)
        sample = buffer.sample(8, n_step=3, gamma=0.5)
        for rows in sample.policy_batches.values():
            # Rewards are 1 each step: 3-step returns are 1 + 0.5 + 0.25 unless the episode ended first.
            expected = np.where(rows["n_step"] == 3, 1.75, np.where(rows["n_step"] == 2, 1.5, 1.0))
            np.testing.assert_allclose(rows["rewards"], expected)
            np.testing.assert_array_equal(rows["new_obs"][:, 1] - rows["obs"][:, 1], rows["n_step"])
        path = algo.save()
        restored = _lockstep_dqn(replay_mode="lockstep").training(n_step=3, store_buffer_in_checkpoints=True).build()
        try:
            restored.restore(path)
            assert len(restored.local_replay_buffer) == len(buffer)
            a, b = buffer.sample(5), restored.local_replay_buffer.sample(5)
            for pid in a.policy_batches:
                np.testing.assert_array_equal(a[pid]["obs"], b[pid]["obs"])
        finally:
            restored.stop()
    finally:
        algo.stop()


def test_lockstep_capacity_counts_env_steps():
    from rlx.utils.replay_buffers.multi_agent_replay_buffer import LockstepReplayBuffer

    buffer = LockstepReplayBuffer(lambda pid, capacity: ReplayBuffer(capacity, seed=1), capacity=10, seed=0)
    for round_ in range(4):  # 4 rounds of 6 env steps (one sub-env), two agents of p0 and one of p1 each
        t = np.arange(6)[:, None] + 6 * round_
        obs = np.broadcast_to(t[..., None], (6, 2, 1)).astype(np.float32)
        p0 = {"obs": obs, "rewards": np.ones((6, 2), np.float32), "eps_id": np.zeros((6, 2), np.int64),
              "t": np.repeat(t, 2, axis=1)}
        p1 = {"obs": obs[:, :1], "rewards": np.ones((6, 1), np.float32), "eps_id": np.zeros((6, 1), np.int64),
              "t": t}
        buffer.add({"p0": p0, "p1": p1})
    assert len(buffer) == 10  # env steps, not rows
    sample = buffer.sample(50)
    assert set(sample["p1"]["obs"][:, 0]) <= set(range(14, 24))  # only the 10 newest env steps
    np.testing.assert_array_equal(sample["p0"]["obs"][0::2, 0], sample["p1"]["obs"][:, 0])


def test_lockstep_rules_are_checked_at_build():
    with pytest.raises(ConfigError, match="lockstep.*prioritized"):
        (DQNConfig().environment(StepStampEnv)
         .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=_two_policies, replay_mode="lockstep").build())
    with pytest.raises(ConfigError, match="disagree"):
        _lockstep_dqn(replay_mode="lockstep").training(
            replay_buffer_config={"type": "MultiAgentReplayBuffer", "replay_mode": "independent"}).build()
    with pytest.raises(ConfigError, match="replay_mode"):
        DQNConfig().multi_agent(replay_mode="lockstop")
    # RLlib 2.x's spelling: the replay mode inside replay_buffer_config.
    algo = _lockstep_dqn().training(replay_buffer_config={"replay_mode": "lockstep"}).build()
    try:
        assert algo.local_replay_buffer.replay_mode == "lockstep"
    finally:
        algo.stop()


# ---------------------------------------------------------------------- policy_map_capacity


def _one_policy_each(agent_id, episode, **kwargs):
    return f"p{agent_id}"


def _five_policies(algo_config, **multi_agent):
    return (algo_config.environment(MultiAgentCartPole, env_config={"num_agents": 5})
            .multi_agent(policies={f"p{i}" for i in range(5)}, policy_mapping_fn=_one_policy_each, **multi_agent)
            .debugging(seed=0))


def _small_dqn(**multi_agent):
    return _five_policies(DQNConfig(), **multi_agent).training(
        replay_buffer_config={"type": "MultiAgentReplayBuffer", "capacity": 1000},
        num_steps_sampled_before_learning_starts=32, train_batch_size=16).reporting(
        min_sample_timesteps_per_iteration=64)


def _in_memory(multi_module) -> list[str]:
    """The policies whose module holds its weights (without bringing any back)."""
    return [mid for mid, module in multi_module.items() if any(p.numel() for p in module.parameters())]


def _train(config, iterations: int, watch: list | None = None):
    algo = config.build()
    try:
        for _ in range(iterations):
            algo.train()
            if watch is not None:
                watch.append(len(_in_memory(algo.env_runner.module)))
        return algo.get_weights(), algo
    finally:
        algo.stop()


@pytest.mark.slow
def test_policy_map_capacity_keeps_two_modules_and_trains_like_keeping_all():
    resident_counts: list[int] = []

    def count(*, env_runner, **kwargs):
        resident_counts.append(len(_in_memory(env_runner.module)))

    unlimited, _ = _train(_small_dqn(), 2)
    limited, algo = _train(_small_dqn(policy_map_capacity=2).callbacks(on_episode_step=count), 2,
                           watch=resident_counts)
    assert resident_counts and max(resident_counts) <= 2
    cache = algo.env_runner.module.module_cache
    assert cache.max_resident == 2 and cache.num_swapped_out > 0 and cache.num_swapped_in > 0
    # The Learner's side of a swapped-out policy (optimizer state, target network) left memory too.
    out = next(mid for mid in algo.learner.learners if not cache.is_resident(mid))
    learner = algo.learner.learners[out]
    assert all(t.numel() == 0 for t in learner.optimizers["default"].state_tensors["exp_avg"])
    assert all(p.numel() == 0 for p in learner.target.parameters())
    for pid, weights in unlimited.items():
        for name, value in weights.items():
            np.testing.assert_array_equal(limited[pid][name], value, err_msg=f"{pid} {name}")


def test_swappable_policies_reuse_memory_and_train_like_keeping_all():
    config = _five_policies(PPOConfig()).training(train_batch_size=200, minibatch_size=100, num_epochs=2)
    unlimited, _ = _train(config, 1)
    limited, algo = _train(config.copy().multi_agent(policy_map_capacity=2, policy_states_are_swappable=True), 1)
    cache = algo.env_runner.module.module_cache
    assert cache.swappable and cache.num_reused > 0  # policies came back into the memory of those leaving
    for pid, weights in unlimited.items():
        for name, value in weights.items():
            np.testing.assert_array_equal(limited[pid][name], value, err_msg=f"{pid} {name}")


def test_swappable_policies_need_the_same_networks():
    from rlx.policy.policy import PolicySpec

    policies = {f"p{i}": PolicySpec(config={"model": {"fcnet_hiddens": [16 * (1 + (i == 4))]}}) for i in range(5)}
    config = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 5})
              .multi_agent(policies=policies, policy_mapping_fn=_one_policy_each, policy_map_capacity=2,
                           policy_states_are_swappable=True))
    with pytest.raises(ConfigError, match="policy_states_are_swappable.*'p4'"):
        config.build()


def _versus(version: str):
    def mapping(agent_id, episode, **kwargs):
        return "main" if agent_id == 0 else version
    return mapping


def test_added_policies_swap_and_checkpoints_hold_every_policy(tmp_path):
    config = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
              .multi_agent(policies={"main", "opponent"}, policy_mapping_fn=_versus("opponent"), policy_map_capacity=2)
              .training(train_batch_size=100, minibatch_size=50, num_epochs=1).debugging(seed=0))
    algo = config.build()
    try:
        algo.train()
        for i in range(3):  # a league: snapshots of "main" added over and over, each the next opponent
            algo.add_policy(f"main_v{i}", policy_state=algo.get_policy("main").get_weights(),
                            policy_mapping_fn=_versus(f"main_v{i}"))
            algo.train()
        multi = algo.env_runner.module
        assert len(multi) == 5 and len(_in_memory(multi)) <= 2 and multi.module_cache.max_resident == 2
        weights = algo.get_weights()  # every policy, brought back one after the other
        assert set(weights) == {"main", "opponent", "main_v0", "main_v1", "main_v2"}
        path = algo.save(str(tmp_path / "ckpt"))
        action = algo.compute_single_action(np.zeros(4, np.float32), policy_id="main_v0", explore=False)
        assert action in (0, 1)
    finally:
        algo.stop()
    restored = config.build()
    try:
        for i in range(3):
            restored.add_policy(f"main_v{i}", policy_mapping_fn=_versus(f"main_v{i}"))
        restored.restore(path)
        for pid, value in restored.get_weights().items():
            for name, array in value.items():
                np.testing.assert_array_equal(array, weights[pid][name], err_msg=f"{pid} {name}")
    finally:
        restored.stop()


def test_module_cache_swaps_least_recently_used_and_keeps_pinned_modules():
    from rlx.core.rl_module import MultiRLModule

    modules = {f"m{i}": torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
               for i in range(4)}
    before = {mid: {k: v.clone() for k, v in m.state_dict().items()} for mid, m in modules.items()}
    x = torch.randn(5, 3)
    expected = {mid: m(x) for mid, m in modules.items()}
    multi = MultiRLModule()
    multi.set_policy_map_capacity(2)
    for mid, module in modules.items():
        multi.add_module(mid, module)
    assert _in_memory(multi) == ["m2", "m3"]
    multi["m0"]  # indexing brings m0 back; m2, the least recently used, leaves
    assert sorted(_in_memory(multi)) == ["m0", "m3"]
    torch.testing.assert_close(modules["m1"](x), expected["m1"])  # a forward pass brings m1 back
    assert sorted(_in_memory(multi)) == ["m0", "m1"]
    with multi.using_module("m0"):  # pinned: stays while others come and go
        for mid in ("m2", "m3", "m1"):
            torch.testing.assert_close(modules[mid](x), expected[mid])
            assert "m0" in _in_memory(multi) and len(_in_memory(multi)) == 2
    for mid, module in modules.items():
        state = module.state_dict()  # state_dict() brings each back too
        for k, v in before[mid].items():
            torch.testing.assert_close(state[k], v)
    assert len(_in_memory(multi)) == 2
