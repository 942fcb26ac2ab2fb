"""environment(normalize_rewards=True): the learner's rewards are scaled by the running std of
the discounted return (rlx.utils.reward_scaling), on the one sampling path of single- and
multi-agent runners, local and remote; results report the env's own returns; the statistics
merge across runners and survive a checkpoint."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.utils.errors import ConfigError, NotSupportedYetError


def pendulum_config(**runners) -> PPOConfig:
    return (PPOConfig().environment("Pendulum-v1", normalize_rewards=True)
            .env_runners(rollout_fragment_length=200, **runners)
            .training(train_batch_size=400, minibatch_size=200, num_epochs=1).debugging(seed=0))


def test_learner_batches_hold_scaled_rewards_while_results_report_raw_returns():
    sampled = []
    config = pendulum_config(num_envs_per_env_runner=2).callbacks(
        on_sample_end=lambda *, samples, **kw: sampled.append(np.array(samples["rewards"])))
    algo = config.build()
    try:
        for _ in range(3):
            result = algo.train()
        # Pendulum's rewards lie in [-16.3, 0]; an episode of 200 steps returns about -1000 or less.
        assert result["env_runners"]["episode_return_mean"] < -200
        rewards = np.concatenate(sampled[1:])
        raw_scale = 16.3 / np.sqrt(1.0 - 0.99 ** 2) / 10  # far below the raw rewards' size
        assert np.abs(rewards).max() < raw_scale and (rewards <= 0).all()
        scaler = algo.env_runner.filter.parts["reward_scaler"]
        assert scaler.returns_stat.count == 1200 and scaler.gamma == pytest.approx(0.99)
        # The last batch's rewards are the raw ones over the scale then in use (sign kept).
        assert 0.0 < scaler.scale and scaler.returns_stat.std > 50.0
    finally:
        algo.stop()


def test_off_by_default_and_refused_when_not_a_bool():
    algo = PPOConfig().environment("Pendulum-v1").build()
    try:
        assert "reward_scaler" not in getattr(algo.env_runner.filter, "parts", {})
    finally:
        algo.stop()
    with pytest.raises(ConfigError, match="normalize_rewards"):
        PPOConfig().environment("Pendulum-v1", normalize_rewards="yes")


@pytest.mark.slow
def test_remote_runners_statistics_merge_in_the_driver_and_survive_a_checkpoint(tmp_path):
    config = pendulum_config(num_env_runners=2)
    algo = config.build()
    try:
        algo.train()
        algo.train()
        sampled = algo._counters["num_env_steps_sampled_lifetime"]
        local = algo.env_runner.filter.get_state()["reward_scaler"]["returns"]
        assert local["count"] == sampled  # every return any runner saw
        remote = algo.env_runner_group.foreach_env_runner(
            lambda r: r.filter.get_state()["reward_scaler"]["returns"]["count"], local_env_runner=False)
        assert remote == [local["count"]] * 2  # sent back to the runners
        path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
    finally:
        algo.stop()
    restored = config.build()
    try:
        restored.restore(path)
        state = restored.env_runner.filter.get_state()["reward_scaler"]["returns"]
        assert state["count"] == local["count"] and state["m2"] == pytest.approx(local["m2"])
        remote = restored.env_runner_group.foreach_env_runner(
            lambda r: r.filter.get_state()["reward_scaler"]["returns"]["count"], local_env_runner=False)
        assert remote == [local["count"]] * 2
    finally:
        restored.stop()


def test_multi_agent_runners_scale_each_policys_rewards_with_its_own_statistics():
    from rlx.env.multi_agent_env import make_multi_agent

    env_cls = make_multi_agent(lambda cfg: gym.make("Pendulum-v1"))
    config = (PPOConfig().environment(env_cls, env_config={"num_agents": 2}, normalize_rewards=True)
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **kw: f"p{aid}")
              .env_runners(rollout_fragment_length=100)
              .training(train_batch_size=200, minibatch_size=100, num_epochs=1).debugging(seed=0))
    algo = config.build()
    try:
        result = algo.train()
        runner = algo.env_runner
        counts = {pid: slot.filter.parts["reward_scaler"].returns_stat.count for pid, slot in runner._slots.items()}
        steps = result["env_runners"]["num_env_steps_sampled"]
        assert steps >= 200 and counts == {"p0": steps, "p1": steps}  # each agent steps with every env step
        assert set(runner.get_state()["filter"]) == {"p0", "p1"}
    finally:
        algo.stop()


def test_a_runner_returning_episodes_refuses_it_by_name():
    from rlx.env.single_agent_env_runner import SingleAgentEnvRunner

    runner = SingleAgentEnvRunner(config=PPOConfig().environment("Pendulum-v1", normalize_rewards=True))
    try:
        with pytest.raises(NotSupportedYetError, match="normalize_rewards"):
            runner.sample(num_timesteps=10)
    finally:
        runner.stop()
