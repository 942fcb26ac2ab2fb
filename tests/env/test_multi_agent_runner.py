"""MultiAgentEnvRunner details: failed sub-envs, non-finite observations, per-policy module
specs, PettingZoo envs in training, and the Policy view's old-API helpers."""
from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.algorithms.ppo import PPOConfig
from rlx.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole
from rlx.utils.errors import EnvError


def by_index(agent_id, episode, **kwargs):
    return f"p{agent_id}"


class FailingCartPole(MultiAgentCartPole):
    """Two-agent CartPole whose step() raises every `every`-th call (counted per class)."""

    calls = 0
    every = 0

    def step(self, action_dict):
        type(self).calls += 1
        if self.every and type(self).calls % self.every == 0:
            raise RuntimeError("simulated crash")
        return super().step(action_dict)


class NaNCartPole(MultiAgentCartPole):
    """Agent 1's observation turns NaN at the 5th step."""

    def reset(self, **kwargs):
        self.t = 0
        return super().reset(**kwargs)

    def step(self, action_dict):
        self.t += 1
        obs, *rest = super().step(action_dict)
        if self.t == 5 and 1 in obs:
            obs[1] = np.full(4, np.nan, np.float32)
        return (obs, *rest)


def two_policies(env=MultiAgentCartPole, **env_config):
    return (PPOConfig().environment(env, env_config={"num_agents": 2, **env_config})
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=by_index)
            .training(train_batch_size=400, minibatch_size=100, num_epochs=1).debugging(seed=0))


def test_failed_sub_env_is_rebuilt_and_its_episode_dropped():
    FailingCartPole.calls, FailingCartPole.every = 0, 150
    algo = two_policies(FailingCartPole).fault_tolerance(restart_failed_sub_environments=True).build()
    try:
        logged = []
        for _ in range(3):
            result = algo.train()
            logged.append(result["env_runners"]["num_episodes"])
        assert algo.env_runner.num_sub_env_restarts >= 3
        assert sum(logged) > 0
        batch = algo.env_runner.sample(num_timesteps=400)
        for policy_batch in batch.policy_batches.values():
            assert np.isfinite(policy_batch["obs"]).all()
    finally:
        algo.stop()


def test_failed_sub_env_without_restart_is_an_env_error_naming_the_sub_env_and_the_fix():
    FailingCartPole.calls, FailingCartPole.every = 0, 50
    algo = two_policies(FailingCartPole).build()
    try:
        with pytest.raises(EnvError, match=r"Sub-env \d of EnvRunner 0.*simulated crash.*restart_failed_sub_environments"):
            algo.train()
    finally:
        FailingCartPole.every = 0
        algo.stop()


def test_nan_observation_is_an_env_error_naming_the_agent():
    algo = two_policies(NaNCartPole).environment(disable_env_checking=True).build()
    try:
        with pytest.raises(EnvError, match=r"NaN or infinite observation for agent 1"):
            algo.train()
    finally:
        algo.stop()


def test_multi_rl_module_spec_gives_each_policy_its_own_model():
    config = two_policies().rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={
        "p0": RLModuleSpec(model_config={"fcnet_hiddens": [16]}), "p1": RLModuleSpec()}))
    algo = config.build()
    try:
        assert algo.get_weights()["p0"]["pi.linears.0.weight"].shape == (16, 4)
        assert algo.get_weights()["p1"]["pi.linears.0.weight"].shape[0] == config.model["fcnet_hiddens"][0]
        assert set(algo.train()["learners"]) == {"p0", "p1"}
    finally:
        algo.stop()


def test_multi_rl_module_spec_with_a_single_agent_config_is_a_config_error():
    config = PPOConfig().environment("CartPole-v1").rl_module(
        rl_module_spec=MultiRLModuleSpec(rl_module_specs={"p0": RLModuleSpec()}))
    with pytest.raises(rlx.utils.errors.ConfigError, match="MultiRLModuleSpec"):
        config.build()


def test_parallel_pettingzoo_env_trains_two_policies():
    import pettingzoo

    from rlx.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    rlx.register_env("rps_parallel_test",
                     lambda cfg: ParallelPettingZooEnv(pettingzoo.make("parallel", "classic/rps-v2", max_cycles=5)))
    config = (PPOConfig().environment("rps_parallel_test")
              .multi_agent(policies={"a", "b"}, policy_mapping_fn=lambda aid, *args, **kw: "a" if aid.endswith("0") else "b")
              .training(train_batch_size=200, minibatch_size=50, num_epochs=1))
    algo = config.build()
    try:
        result = algo.train()
        returns = result["env_runners"]["module_episode_returns_mean"]
        assert set(returns) == {"a", "b"}
        assert returns["a"] == pytest.approx(-returns["b"])  # zero-sum
        assert set(result["learners"]) == {"a", "b"}
    finally:
        algo.stop()


def test_old_api_foreach_policy_and_is_policy_to_train():
    algo = two_policies().multi_agent(policies_to_train=["p0"]).build()
    try:
        worker = algo.workers.local_worker()
        assert sorted(worker.foreach_policy(lambda policy, pid: pid)) == ["p0", "p1"]
        assert worker.foreach_policy_to_train(lambda policy, pid: pid) == ["p0"]
        assert worker.is_policy_to_train("p0") and not worker.is_policy_to_train("p1")
        assert set(worker.filters) == {"p0", "p1"}
    finally:
        algo.stop()


def test_old_per_policy_statistics_cover_the_episodes_of_episode_return_mean():
    # SimpleTicTacToe has short episodes: one iteration holds more than the 100-episode window.
    from rlx.examples.envs.classes.multi_agent import SimpleTicTacToe

    config = (PPOConfig().environment(SimpleTicTacToe)
              .multi_agent(policies={"x", "o"}, policy_mapping_fn=lambda aid, *a, **kw: "x" if aid == "player1" else "o")
              .training(train_batch_size=1000, minibatch_size=250, num_epochs=1).debugging(seed=3))
    algo = config.build()
    try:
        for _ in range(2):
            result = algo.train()
            hist = result["env_runners"]["hist_stats"]
            episodes = len(hist["episode_reward"])
            # One agent per policy per episode: one value per policy per reported episode.
            assert len(hist["policy_x_reward"]) == len(hist["policy_o_reward"]) == episodes
            assert "episode_policy_returns" not in hist
            # Zero-sum: the two policies' returns cancel episode by episode.
            assert np.allclose(np.add(hist["policy_x_reward"], hist["policy_o_reward"]), hist["episode_reward"])
            assert result["policy_reward_mean"]["x"] == pytest.approx(np.mean(hist["policy_x_reward"]))
            assert result["policy_reward_min"]["o"] == min(hist["policy_o_reward"])
        assert result["env_runners"]["num_episodes"] > 100
    finally:
        algo.stop()


def test_sub_envs_in_processes_are_refused_for_multi_agent_envs():
    from rlx.utils.errors import NotSupportedYetError

    with pytest.raises(NotSupportedYetError, match="remote_worker_envs.*multi-agent"):
        two_policies().env_runners(remote_worker_envs=True).build()


def test_random_rl_module_opponent_acts_without_training_and_checkpoints(tmp_path):
    from rlx.algorithms.algorithm import Algorithm
    from rlx.examples.rl_modules.classes.random_rlm import RandomRLModule

    config = (two_policies()
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=by_index, policies_to_train=["p0"])
              .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={
                  "p0": RLModuleSpec(), "p1": RLModuleSpec(module_class=RandomRLModule)})))
    algo = config.build()
    try:
        result = algo.train()
        assert set(result["learners"]) == {"p0"}
        batch = algo.env_runner.sample(num_timesteps=200).policy_batches["p1"]
        actions = batch["actions"][batch["valid"]] if "valid" in batch else batch["actions"].ravel()
        assert set(np.unique(actions)) == {0, 1}  # random actions, both taken
        assert batch["action_dist_inputs"].shape[-1] == 0 and not batch["action_logp"].any()
        assert algo.compute_single_action(np.zeros(4, np.float32), policy_id="p1") in (0, 1)
        path = algo.save(str(tmp_path / "ckpt"))
    finally:
        algo.stop()
    restored = Algorithm.from_checkpoint(path)
    try:
        assert isinstance(restored.get_module("p1"), RandomRLModule)
        assert set(restored.train()["learners"]) == {"p0"}
    finally:
        restored.stop()
    with pytest.raises(TypeError, match="policies_to_train"):
        RandomRLModule(observation_space=None, action_space=None).forward_train({})


def test_rllib_style_module_with_only_forward_trains():
    import torch

    from rlx.core.columns import Columns
    from rlx.core.rl_module.apis import ValueFunctionAPI
    from rlx.core.rl_module.torch.torch_rl_module import TorchRLModule

    class TinyModule(TorchRLModule, ValueFunctionAPI):
        """RLlib's new-API style: setup() and _forward() only."""

        def setup(self):
            self.pi = torch.nn.Linear(4, 2)
            self.vf = torch.nn.Linear(4, 1)

        def _forward(self, batch, **kwargs):
            return {Columns.ACTION_DIST_INPUTS: self.pi(batch[Columns.OBS])}

        def compute_values(self, batch, embeddings=None):
            return self.vf(batch[Columns.OBS]).squeeze(-1)

    algo = (PPOConfig().environment("CartPole-v1").rl_module(rl_module_spec=RLModuleSpec(module_class=TinyModule))
            .training(train_batch_size=256, minibatch_size=64, num_epochs=1).build())
    try:
        before = algo.get_module().pi.weight.detach().clone()
        result = algo.train()
        assert "policy_loss" in result["learners"]["default_policy"]
        assert not torch.equal(before, algo.get_module().pi.weight)
    finally:
        algo.stop()
