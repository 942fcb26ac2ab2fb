"""SingleAgentEnvRunner batches: layout, episode boundaries, batch modes, metrics, seeding,
and how PPO's learner bootstraps at truncations.

Requirements: DESIGN.md (principle 3, "One training iteration", "Interfaces": EnvRunner).
"""
from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx import register_env
from rlx.algorithms.ppo import PPOConfig
from rlx.env.env_runner import SingleAgentEnvRunner

from envs_for_tests import CounterEnv

TIME_LIMIT = 5




# ----------------------------------------------------------------------------- test envs


class TerminatingEnv(CounterEnv):
    """Terminates (not truncates) after env_config['length'] steps (default 4)."""

    def __init__(self, config=None):
        super().__init__(config)
        self.length = int((config or {}).get("length", 4))

    def step(self, action):
        obs, reward, _, _, info = super().step(action)
        return obs, reward, self.t >= self.length, False, info


class RandomEpisodeEnv(gym.Env):
    """Episodes of random length (3..8 steps) with random rewards in [-3, 3]; obs = [t, noise]."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0
        self.length = 3

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.length = int(self.np_random.integers(3, 9))
        return self._obs(), {}

    def _obs(self):
        return np.array([self.t, self.np_random.uniform(-1, 1)], np.float32)

    def step(self, action):
        self.t += 1
        reward = float(self.np_random.uniform(-3, 3)) + 0.5 * int(action)
        return self._obs(), reward, self.t >= self.length, False, {}


register_env(
    "rlx_test_runner_timelimit_counter",
    lambda ctx: gym.wrappers.TimeLimit(CounterEnv(ctx), max_episode_steps=TIME_LIMIT),
)


# ----------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def module_spec():
    algo = PPOConfig().environment("CartPole-v1").training(train_batch_size=64, minibatch_size=32).build()
    spec = algo.get_default_rl_module_spec()
    algo.stop()
    return spec


def runner_config(env="CartPole-v1", num_envs=4, seed=0, env_config=None, **env_runner_opts) -> PPOConfig:
    config = (PPOConfig().environment(env, env_config=env_config or {})
              .training(train_batch_size=64, minibatch_size=32)
              .env_runners(num_envs_per_env_runner=num_envs, **env_runner_opts)
              .debugging(seed=seed))
    config.validate()
    return config


def make_runner(module_spec, **kwargs) -> SingleAgentEnvRunner:
    return SingleAgentEnvRunner(runner_config(**kwargs), module_spec=module_spec)


def episode_returns(metrics) -> list[float]:
    """Returns of the episodes a runner's get_metrics() reports."""
    return metrics["hist_stats"]["episode_reward"].peek()


def episode_lengths(metrics) -> list[int]:
    """Lengths of the episodes a runner's get_metrics() reports."""
    return metrics["hist_stats"]["episode_lengths"].peek()


def dones(batch) -> np.ndarray:
    return batch["terminateds"] | batch["truncateds"]


def episodes_in(batch) -> list[tuple[float, int]]:
    """(return, length) of every episode that ends inside the batch, per sub-env, using `valid`."""
    valid = batch.get("valid", np.ones_like(batch["rewards"], dtype=bool))
    out = []
    T, B = batch["rewards"].shape
    for b in range(B):
        ret, length = 0.0, 0
        for t in range(T):
            if not valid[t, b]:
                continue
            ret += float(batch["rewards"][t, b])
            length += 1
            if dones(batch)[t, b]:
                out.append((ret, length))
                ret, length = 0.0, 0
    return out


# ----------------------------------------------------------------------------- layout


@pytest.mark.parametrize("num_envs, num_timesteps", [(4, 10), (4, 8), (1, 5), (3, 1)])
def test_batch_is_time_major(module_spec, num_envs, num_timesteps):
    runner = make_runner(module_spec, num_envs=num_envs)
    batch = runner.sample(num_timesteps=num_timesteps)
    T = math.ceil(num_timesteps / num_envs)
    assert batch["obs"].shape == (T, num_envs, 4)
    assert batch["new_obs"].shape == (T, num_envs, 4)
    for key in ("actions", "rewards", "terminateds", "truncateds", "action_logp"):
        assert batch[key].shape == (T, num_envs), key
    assert batch["action_dist_inputs"].shape == (T, num_envs, 2)
    assert batch["terminateds"].dtype == bool and batch["truncateds"].dtype == bool
    runner.stop()


def test_sample_without_arguments_uses_rollout_fragment_length(module_spec):
    runner = make_runner(module_spec, num_envs=2, rollout_fragment_length=7)
    batch = runner.sample()
    assert batch["rewards"].shape == (7, 2)
    runner.stop()


def test_new_obs_is_the_next_obs_except_at_episode_ends(module_spec):
    runner = make_runner(module_spec, num_envs=4)
    batch = runner.sample(num_timesteps=4 * 100)
    done = dones(batch)
    assert done.any(), "a random CartPole policy ends episodes within 100 steps"
    T = batch["obs"].shape[0]
    for t in range(T - 1):
        for b in range(4):
            if done[t, b]:
                # The next row starts a new episode with a reset observation.
                assert not np.array_equal(batch["new_obs"][t, b], batch["obs"][t + 1, b])
            else:
                np.testing.assert_array_equal(batch["new_obs"][t, b], batch["obs"][t + 1, b])
    runner.stop()


def test_consecutive_samples_continue_the_episodes(module_spec):
    runner = make_runner(module_spec, env="rlx_test_runner_timelimit_counter", num_envs=2)
    first = runner.sample(num_timesteps=2 * 3)
    second = runner.sample(num_timesteps=2 * 3)
    np.testing.assert_array_equal(second["obs"][0], first["new_obs"][-1])
    runner.stop()


# ----------------------------------------------------------------------------- episode ends


def test_truncation_sets_truncateds_and_keeps_the_final_observation(module_spec):
    runner = make_runner(module_spec, env="rlx_test_runner_timelimit_counter", num_envs=2)
    batch = runner.sample(num_timesteps=2 * 3 * TIME_LIMIT)
    trunc = batch["truncateds"]
    assert trunc.sum() == 2 * 3  # every sub-env ran three whole episodes
    assert not batch["terminateds"].any()
    T = batch["obs"].shape[0]
    for t, b in zip(*np.nonzero(trunc)):
        assert batch["new_obs"][t, b, 0] == TIME_LIMIT  # the final observation, not the reset one
        if t + 1 < T:
            assert batch["obs"][t + 1, b, 0] == 0  # the next episode starts from a reset
    # No episode ends anywhere else.
    not_trunc = ~trunc
    assert (batch["new_obs"][not_trunc][:, 0] < TIME_LIMIT).all()
    runner.stop()


def test_termination_sets_terminateds_not_truncateds(module_spec):
    runner = make_runner(module_spec, env=TerminatingEnv, num_envs=3, env_config={"length": 4})
    batch = runner.sample(num_timesteps=3 * 10)
    term = batch["terminateds"]
    assert term.any()
    assert not batch["truncateds"].any()
    np.testing.assert_array_equal(term, batch["new_obs"][..., 0] == 4)
    runner.stop()


# ----------------------------------------------------------------------------- PPO bootstrapping


def test_ppo_advantage_bootstraps_at_truncation_but_not_at_termination():
    gamma = 0.9
    algo = (PPOConfig().environment(CounterEnv)
            .training(train_batch_size=64, minibatch_size=32, gamma=gamma, lambda_=0.0)
            .debugging(seed=0).build())
    learner = algo.learner
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(3, 1, 2)).astype(np.float32)
    final_obs = rng.normal(size=(2,)).astype(np.float32) * 5.0
    new_obs = np.empty_like(obs)
    new_obs[0] = obs[1]
    new_obs[1] = final_obs  # the episode ends at t=1; obs[2] is the next episode's reset
    new_obs[2] = rng.normal(size=(1, 2)).astype(np.float32)
    rewards = np.array([[1.0], [2.0], [0.5]], np.float32)
    ended = np.array([[False], [True], [False]])
    nothing = np.zeros((3, 1), bool)

    def advantages(terminateds, truncateds):
        batch = {"obs": obs, "new_obs": new_obs, "rewards": rewards,
                 "terminateds": terminateds, "truncateds": truncateds}
        adv, _, _ = learner.compute_advantages(batch)
        return np.asarray(adv)

    adv_truncated = advantages(nothing, ended)
    adv_terminated = advantages(ended, nothing)

    def value(x):
        with torch.no_grad():
            return float(algo.get_module().compute_values({"obs": torch.from_numpy(np.asarray(x)[None])})[0])

    v_obs1, v_final = value(obs[1, 0]), value(final_obs)
    assert adv_truncated[1, 0] == pytest.approx(rewards[1, 0] + gamma * v_final - v_obs1, abs=1e-5)
    assert adv_terminated[1, 0] == pytest.approx(rewards[1, 0] - v_obs1, abs=1e-5)
    assert adv_truncated[1, 0] != pytest.approx(adv_terminated[1, 0], abs=1e-4)
    # Elsewhere both batches agree (lambda=0 makes every advantage one-step).
    assert adv_truncated[0, 0] == pytest.approx(adv_terminated[0, 0], abs=1e-6)
    assert adv_truncated[0, 0] == pytest.approx(rewards[0, 0] + gamma * v_obs1 - value(obs[0, 0]), abs=1e-5)
    # The last row is cut by the end of the rollout: it bootstraps from new_obs.
    assert adv_truncated[2, 0] == pytest.approx(
        rewards[2, 0] + gamma * value(new_obs[2, 0]) - value(obs[2, 0]), abs=1e-5)
    algo.stop()


# ----------------------------------------------------------------------------- batch modes


def test_complete_episodes_mode_returns_whole_episodes(module_spec):
    runner = make_runner(module_spec, env=RandomEpisodeEnv, num_envs=3,
                         batch_mode="complete_episodes", rollout_fragment_length=4)
    for _ in range(3):
        batch = runner.sample()
        assert "valid" in batch
        valid = batch["valid"]
        T, B = valid.shape
        assert T >= 4
        for b in range(B):
            rows = np.nonzero(valid[:, b])[0]
            assert len(rows) > 0
            np.testing.assert_array_equal(rows, np.arange(len(rows)))  # valid rows come first
            assert dones(batch)[rows[-1], b], "the last valid row of every sub-env ends an episode"
            # Every episode in the batch starts with a reset observation (t == 0).
            starts = [0] + [t + 1 for t in rows[:-1] if dones(batch)[t, b]]
            assert all(batch["obs"][t, b, 0] == 0 for t in starts)
            assert not dones(batch)[~valid[:, b], b].any()
    runner.stop()


def test_truncate_episodes_mode_has_no_padding(module_spec):
    runner = make_runner(module_spec, env=RandomEpisodeEnv, num_envs=3, rollout_fragment_length=4)
    batch = runner.sample()
    assert batch["rewards"].shape == (4, 3)
    assert "valid" not in batch or batch["valid"].all()
    runner.stop()


@pytest.mark.parametrize(
    "env, num_envs",
    [(TerminatingEnv, 4), (TerminatingEnv, 1), ("CartPole-v1", 2), (RandomEpisodeEnv, 4)],
    ids=["fixed-length-4-envs", "fixed-length-1-env", "cartpole-2-envs", "random-length-4-envs"],
)
def test_sample_num_episodes_collects_exactly_that_many(module_spec, env, num_envs):
    runner = make_runner(module_spec, env=env, num_envs=num_envs)
    runner.sample(num_timesteps=num_envs * 3)  # leave episodes half-way
    runner.get_metrics()
    batch = runner.sample(num_episodes=3)
    metrics = runner.get_metrics()
    assert len(episode_returns(metrics)) == 3
    assert len(episode_lengths(metrics)) == 3
    assert len(episodes_in(batch)) == 3
    valid = batch.get("valid", np.ones_like(batch["rewards"], dtype=bool))
    assert valid.sum() == sum(episode_lengths(metrics))
    runner.stop()


def test_reported_episode_returns_equal_the_batch_rewards(module_spec):
    runner = make_runner(module_spec, env=RandomEpisodeEnv, num_envs=2)
    runner.get_metrics()
    batch = runner.sample(num_episodes=6)
    metrics = runner.get_metrics()
    in_batch = episodes_in(batch)
    assert len(in_batch) == len(episode_returns(metrics)) >= 6
    assert sorted(r for r, _ in in_batch) == pytest.approx(sorted(episode_returns(metrics)), abs=1e-4)
    assert sorted(n for _, n in in_batch) == sorted(episode_lengths(metrics))
    runner.stop()


def test_returns_of_episodes_spanning_several_samples_equal_the_batch_rewards(module_spec):
    runner = make_runner(module_spec, env=RandomEpisodeEnv, num_envs=2)
    runner.get_metrics()
    # The first sample() starts fresh episodes; later ones continue them.
    batches = [runner.sample(num_timesteps=2 * 3) for _ in range(8)]
    joined = {k: np.concatenate([b[k] for b in batches]) for k in ("rewards", "terminateds", "truncateds")}
    metrics = runner.get_metrics()
    in_batch = episodes_in(joined)
    assert len(in_batch) >= 2
    assert sorted(r for r, _ in in_batch) == pytest.approx(sorted(episode_returns(metrics)), abs=1e-4)
    assert sorted(n for _, n in in_batch) == sorted(episode_lengths(metrics))
    runner.stop()


def test_clip_rewards_clips_the_batch_but_not_the_reported_returns(module_spec):
    # Same seed, same module weights: both runners see the same trajectories.
    clip_config = runner_config(env=RandomEpisodeEnv, num_envs=2, seed=3).environment(clip_rewards=True)
    clipped = SingleAgentEnvRunner(clip_config, module_spec=module_spec)
    unclipped = make_runner(module_spec, env=RandomEpisodeEnv, num_envs=2, seed=3)
    batch_c = clipped.sample(num_timesteps=2 * 30)
    batch_u = unclipped.sample(num_timesteps=2 * 30)
    np.testing.assert_array_equal(batch_c["obs"], batch_u["obs"])
    assert set(np.unique(batch_c["rewards"])) <= {-1.0, 0.0, 1.0}
    assert (np.abs(batch_u["rewards"]) > 1).any()
    np.testing.assert_array_equal(batch_c["rewards"], np.sign(batch_u["rewards"]))
    returns_c = episode_returns(clipped.get_metrics())
    returns_u = episode_returns(unclipped.get_metrics())
    assert len(returns_c) > 0
    assert returns_c == pytest.approx(returns_u)
    assert any(abs(r - round(r)) > 1e-3 for r in returns_c), "reported returns are the env's, not clipped ones"
    clipped.stop()
    unclipped.stop()


# ----------------------------------------------------------------------------- exploration, seeding


def test_sampling_without_exploration_is_greedy(module_spec):
    runner = make_runner(module_spec, num_envs=3)
    batch = runner.sample(num_timesteps=3 * 20, explore=False)
    np.testing.assert_array_equal(batch["action_logp"], 0.0)
    np.testing.assert_array_equal(batch["actions"], batch["action_dist_inputs"].argmax(-1))
    runner.stop()


def test_sampling_with_exploration_reports_action_logp(module_spec):
    runner = make_runner(module_spec, num_envs=3)
    batch = runner.sample(num_timesteps=3 * 20, explore=True)
    logits = torch.from_numpy(batch["action_dist_inputs"])
    expected = torch.log_softmax(logits, -1).gather(-1, torch.from_numpy(batch["actions"])[..., None])[..., 0]
    np.testing.assert_allclose(batch["action_logp"], expected.numpy(), atol=1e-5)
    assert (batch["action_logp"] < 0).all()
    runner.stop()


def test_same_seed_gives_identical_batches(module_spec):
    a = make_runner(module_spec, num_envs=2, seed=11)
    b = make_runner(module_spec, num_envs=2, seed=11)
    for _ in range(2):
        batch_a, batch_b = a.sample(num_timesteps=2 * 40), b.sample(num_timesteps=2 * 40)
        assert batch_a.keys() == batch_b.keys()
        for key in batch_a:
            np.testing.assert_array_equal(batch_a[key], batch_b[key], err_msg=key)
    a.stop()
    b.stop()


def test_different_seeds_give_different_batches(module_spec):
    a = make_runner(module_spec, num_envs=2, seed=11)
    b = make_runner(module_spec, num_envs=2, seed=12)
    assert not np.array_equal(a.sample(num_timesteps=80)["obs"], b.sample(num_timesteps=80)["obs"])
    a.stop()
    b.stop()


def test_runner_from_an_algorithm_shares_the_trained_module():
    algo = PPOConfig().environment("CartPole-v1").training(train_batch_size=64, minibatch_size=32) \
        .debugging(seed=0).build()
    runner = algo.env_runner
    assert isinstance(runner, SingleAgentEnvRunner)
    assert runner.worker_index == 0
    weights = runner.get_weights()
    for k, v in algo.get_weights()["default_policy"].items():
        np.testing.assert_array_equal(weights[k], v)
    batch = runner.sample(num_timesteps=runner.num_envs * 2)
    assert batch["obs"].shape[:2] == (2, runner.num_envs)
    assert len(runner.foreach_env(lambda e: e.spec.id)) == runner.num_envs
    algo.stop()


class BoxActionEnv(CounterEnv):
    """Box(-2, 2) actions; records every action the env receives."""

    action_space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)

    def __init__(self, config=None):
        super().__init__(config)
        self.received = []

    def step(self, action):
        self.received.append(np.array(action, copy=True))
        return super().step(action)


def test_box_actions_are_unsquashed_for_the_env_but_stored_raw_in_the_batch():
    algo = (PPOConfig().environment(BoxActionEnv, normalize_actions=True)
            .training(train_batch_size=64, minibatch_size=32)
            .env_runners(num_envs_per_env_runner=2).debugging(seed=0).build())
    runner = algo.env_runner
    # Weight matrices 0 and biases 0.5: the module's mean action is 0.5 everywhere.
    weights = {k: np.full_like(v, 0.5 if k.endswith("bias") else 0.0) for k, v in runner.get_weights().items()}
    runner.set_weights(weights)
    for env in runner.env.envs:
        env.unwrapped.received.clear()
    batch = runner.sample(num_timesteps=2 * 5, explore=False)
    np.testing.assert_allclose(batch["actions"], 0.5, atol=1e-6)  # module space, for the loss
    received = np.concatenate([np.ravel(a) for env in runner.env.envs for a in env.unwrapped.received])
    assert received.size == 10
    np.testing.assert_allclose(received, 1.0, atol=1e-6)  # -2 + (0.5 + 1) * (2 - -2) / 2
    algo.stop()


def test_weight_sync_skips_a_local_runner_that_shares_the_learners_module(monkeypatch):
    # The Learner's `module` is a view of the RLModule the local runner steps with; syncing must
    # see through the view instead of copying every weight into the same module after each update.
    from rlx.algorithms.dqn import DQNConfig

    algo = (DQNConfig().environment("CartPole-v1")
            .training(num_steps_sampled_before_learning_starts=32, train_batch_size=16)
            .reporting(min_sample_timesteps_per_iteration=64).debugging(seed=0).build())
    runner = algo.env_runner
    copies = []
    monkeypatch.setattr(runner, "set_weights", lambda *a, **k: copies.append(1))
    before = {k: v.copy() for k, v in runner.get_weights().items()}
    algo.train()
    assert not copies
    after = runner.get_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)  # the runner acts with trained weights
    algo.stop()
