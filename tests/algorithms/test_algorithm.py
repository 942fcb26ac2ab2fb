"""Algorithm.train() results, acting, weights, optimizers and PPO options.

Requirements: DESIGN.md ("Result dict", "Interfaces") and the seeds' "Using the Python
API" / "Computing Actions" / "Accessing Policy State" sections.
"""
from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx import register_env
from rlx.algorithms.ppo import PPOConfig
from rlx.core.learner import clip_gradients
from rlx.utils.errors import ConfigError

from envs_for_tests import CounterEnv

from conftest import BATCH, small_config


@pytest.fixture
def algo():
    a = small_config().build()
    yield a
    a.stop()


def sample_cartpole_obs(n: int, seed: int = 123) -> np.ndarray:
    """Plausible CartPole observations (the space's velocity bounds are infinite)."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-0.5, 0.5, size=(n, 4)).astype(np.float32)


def deterministic_actions(algo, observations) -> list:
    return [int(algo.compute_single_action(o, explore=False)) for o in observations]


def constant_output_weights(weights: dict, value: float) -> dict:
    """Weights that make every layer output `value`: all weight matrices 0, all biases `value`."""
    return {k: np.full_like(v, value if k.endswith("bias") else 0.0) for k, v in weights.items()}


def learner_metrics(result: dict) -> dict:
    return result["learners"]["default_policy"]


# ----------------------------------------------------------------------------- test envs


register_env("rlx_test_algo_long_episodes", lambda ctx: gym.wrappers.TimeLimit(CounterEnv(), max_episode_steps=10_000))

RECORDED_RETURNS: list[float] = []


class ReturnRecorder(gym.Wrapper):
    """Appends each finished episode's return to RECORDED_RETURNS, in completion order."""

    def reset(self, **kwargs):
        self._ret = 0.0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._ret += float(reward)
        if terminated or truncated:
            RECORDED_RETURNS.append(self._ret)
        return obs, reward, terminated, truncated, info


register_env("rlx_test_algo_recorded_cartpole", lambda ctx: ReturnRecorder(gym.make("CartPole-v1")))

CLOSED: list[int] = []


class ClosableEnv(CounterEnv):
    def close(self):
        CLOSED.append(id(self))


class MultiDiscreteActionEnv(gym.Env):
    """Box observations, MultiDiscrete([3, 2]) actions, 8-step episodes."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.MultiDiscrete([3, 2])

    def __init__(self, config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action)), action
        self.t += 1
        reward = float(action[1]) - abs(int(action[0]) - 1)
        obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return obs, reward, self.t >= 8, False, {}


class DiscreteObsEnv(gym.Env):
    """A 5-state chain with Discrete observations; reward for the action matching state parity."""

    observation_space = gym.spaces.Discrete(5)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.state = 0
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.state, self.t = 0, 0
        return self.state, {}

    def step(self, action):
        reward = 1.0 if int(action) == self.state % 2 else 0.0
        self.state = (self.state + 1 + int(action)) % 5
        self.t += 1
        return self.state, reward, self.t >= 10, False, {}


class DictObsEnv(gym.Env):
    """Dict observations with a Box and a Discrete component."""

    observation_space = gym.spaces.Dict(
        {"position": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "mode": gym.spaces.Discrete(3)}
    )
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0

    def _obs(self):
        return {"position": self.np_random.uniform(-1, 1, 2).astype(np.float32), "mode": int(self.np_random.integers(3))}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.last = self._obs()
        return self.last, {}

    def step(self, action):
        reward = 1.0 if int(action) == self.last["mode"] % 2 else 0.0
        self.t += 1
        self.last = self._obs()
        return self.last, reward, self.t >= 10, False, {}


# ----------------------------------------------------------------------------- result dict


def test_result_has_design_keys(algo):
    result = algo.train()
    for key in ("training_iteration", "time_this_iter_s", "time_total_s", "timestamp",
                "num_env_steps_sampled_lifetime", "num_env_steps_trained_lifetime",
                "env_runners", "learners", "fault_tolerance",
                "episode_reward_mean", "episode_reward_min", "episode_reward_max", "episode_len_mean",
                "episodes_this_iter", "timesteps_total", "custom_metrics", "info"):
        assert key in result, key
    for key in ("episode_return_mean", "episode_return_min", "episode_return_max",
                "episode_len_mean", "episode_len_min", "episode_len_max", "num_episodes", "num_env_steps_sampled"):
        assert key in result["env_runners"], key
    for key in ("num_healthy_workers", "num_remote_worker_restarts"):
        assert key in result["fault_tolerance"], key


def test_training_iteration_and_step_counters_increase(algo):
    for i in range(1, 4):
        result = algo.train()
        assert result["training_iteration"] == i
        assert algo.training_iteration == i
        assert result["num_env_steps_sampled_lifetime"] == i * BATCH
        assert result["num_env_steps_trained_lifetime"] == i * BATCH
        assert result["env_runners"]["num_env_steps_sampled"] == BATCH
        assert result["timesteps_total"] == result["num_env_steps_sampled_lifetime"]
    assert result["time_total_s"] >= result["time_this_iter_s"] > 0


def test_legacy_aliases_equal_new_names(algo):
    algo.train()
    result = algo.train()
    er = result["env_runners"]
    assert not math.isnan(er["episode_return_mean"])
    assert result["episode_reward_mean"] == er["episode_return_mean"]
    assert result["episode_reward_min"] == er["episode_return_min"]
    assert result["episode_reward_max"] == er["episode_return_max"]
    assert result["episode_len_mean"] == er["episode_len_mean"]
    assert result["episodes_this_iter"] == er["num_episodes"]
    assert er["episode_return_min"] <= er["episode_return_mean"] <= er["episode_return_max"]


def test_learner_metrics_and_legacy_learner_stats(algo):
    result = algo.train()
    metrics = learner_metrics(result)
    for key in ("total_loss", "policy_loss", "vf_loss", "entropy", "curr_lr"):
        assert key in metrics, key
        assert np.isfinite(metrics[key]), key
    assert metrics["curr_lr"] == pytest.approx(algo.config.lr)
    # CartPole has two actions: the entropy of a policy is in [0, log 2].
    assert 0.0 <= metrics["entropy"] <= math.log(2) + 1e-6
    assert result["info"]["learner"]["default_policy"]["learner_stats"] == metrics


def test_episode_return_mean_is_nan_before_any_episode_finished():
    algo = small_config(env="rlx_test_algo_long_episodes").build()
    result = algo.train()
    assert result["env_runners"]["num_episodes"] == 0
    assert math.isnan(result["env_runners"]["episode_return_mean"])
    assert math.isnan(result["episode_reward_mean"])
    assert math.isnan(result["env_runners"]["episode_len_mean"])
    algo.stop()


def test_episode_return_mean_covers_the_episodes_of_earlier_iterations():
    RECORDED_RETURNS.clear()
    algo = small_config(env="rlx_test_algo_recorded_cartpole").build()
    RECORDED_RETURNS.clear()  # drop anything the env check might have recorded
    algo.train()
    result = algo.train()
    assert len(RECORDED_RETURNS) < 100
    assert result["env_runners"]["episode_return_mean"] == pytest.approx(np.mean(RECORDED_RETURNS))
    assert result["env_runners"]["episode_return_max"] == pytest.approx(np.max(RECORDED_RETURNS))
    algo.stop()


def test_episode_stats_use_all_episodes_of_an_iteration_beyond_the_window():
    """Seed 003: with more than metrics_num_episodes_for_smoothing episodes in one
    iteration, all of them are used ("don't ever cut any excess episodes")."""
    window = 5
    RECORDED_RETURNS.clear()
    algo = (small_config(env="rlx_test_algo_recorded_cartpole")
            .reporting(metrics_num_episodes_for_smoothing=window).build())
    RECORDED_RETURNS.clear()
    for _ in range(2):
        before = len(RECORDED_RETURNS)
        result = algo.train()
        this_iter = RECORDED_RETURNS[before:]
        # A random CartPole policy finishes many more than `window` episodes per batch.
        assert result["env_runners"]["num_episodes"] == len(this_iter) > window
        assert result["env_runners"]["episode_return_mean"] == pytest.approx(np.mean(this_iter))
        assert result["env_runners"]["episode_return_min"] == pytest.approx(np.min(this_iter))
    algo.stop()


def test_episode_stats_smooth_over_the_last_n_episodes_across_iterations():
    """With fewer episodes per iteration than the window, the window spans iterations."""
    window = 1000
    RECORDED_RETURNS.clear()
    algo = (small_config(env="rlx_test_algo_recorded_cartpole")
            .reporting(metrics_num_episodes_for_smoothing=window).build())
    RECORDED_RETURNS.clear()
    for _ in range(3):
        result = algo.train()
    assert len(RECORDED_RETURNS) < window
    assert result["env_runners"]["episode_return_mean"] == pytest.approx(np.mean(RECORDED_RETURNS))
    algo.stop()


def test_complete_episodes_batch_mode_trains_on_whole_episodes():
    algo = small_config().env_runners(batch_mode="complete_episodes").build()
    result = algo.train()
    sampled = result["env_runners"]["num_env_steps_sampled"]
    assert sampled >= BATCH
    assert result["num_env_steps_sampled_lifetime"] == sampled
    assert result["num_env_steps_trained_lifetime"] == sampled
    er = result["env_runners"]
    # Every sampled step belongs to an episode that finished in this (first) iteration.
    assert er["num_episodes"] < 100
    assert er["episode_len_mean"] * er["num_episodes"] == pytest.approx(sampled)
    assert np.isfinite(learner_metrics(result)["total_loss"])
    algo.stop()


# ----------------------------------------------------------------------------- reporting minimums


def test_min_sample_timesteps_per_iteration_repeats_sampling():
    algo = small_config().reporting(min_sample_timesteps_per_iteration=1000).build()
    result = algo.train()
    assert result["num_env_steps_sampled_lifetime"] >= 1000
    assert result["env_runners"]["num_env_steps_sampled"] >= 1000
    assert result["num_env_steps_sampled_lifetime"] % BATCH == 0
    assert result["training_iteration"] == 1
    algo.stop()


def test_min_time_s_per_iteration_extends_the_iteration():
    # The minimum is a few times one training step's time here, so that it takes several steps
    # to fill however loaded the machine is.
    plain = small_config().build()
    plain.train()
    step_s = plain.train()["time_this_iter_s"]
    plain.stop()
    min_time = max(0.5, 4 * step_s)
    algo = small_config().reporting(min_time_s_per_iteration=min_time).build()
    result = algo.train()
    assert result["time_this_iter_s"] >= min_time
    assert result["training_iteration"] == 1
    # Several training steps ran to fill the time.
    assert result["num_env_steps_sampled_lifetime"] > BATCH
    algo.stop()


# ----------------------------------------------------------------------------- computing actions


def test_compute_single_action_returns_valid_cartpole_action(algo):
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    for _ in range(20):
        action = algo.compute_single_action(obs)
        assert env.action_space.contains(action)
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, _ = env.reset()
    # The old name is an alias.
    assert env.action_space.contains(algo.compute_action(obs))


def test_compute_single_action_without_exploration_is_deterministic(algo):
    algo.train()
    for obs in sample_cartpole_obs(10):
        actions = {int(algo.compute_single_action(obs, explore=False)) for _ in range(10)}
        assert len(actions) == 1


def test_compute_single_action_full_fetch(algo):
    obs = sample_cartpole_obs(1)[0]
    out = algo.compute_single_action(obs, full_fetch=True)
    assert isinstance(out, tuple) and len(out) == 3
    action, state, extra = out
    assert algo.env_runner.action_space.contains(action)
    assert state == []
    logits = np.asarray(extra["action_dist_inputs"])
    assert logits.shape == (2,)
    # Without exploration the action is the most likely one.
    action, _, extra = algo.compute_single_action(obs, full_fetch=True, explore=False)
    assert int(action) == int(np.argmax(extra["action_dist_inputs"]))


def test_compute_actions_with_a_dict_and_a_batch(algo):
    observations = sample_cartpole_obs(5)
    expected = deterministic_actions(algo, observations)
    as_dict = algo.compute_actions({f"agent_{i}": o for i, o in enumerate(observations)}, explore=False)
    assert set(as_dict) == {f"agent_{i}" for i in range(5)}
    assert [int(as_dict[f"agent_{i}"]) for i in range(5)] == expected
    as_batch = algo.compute_actions(observations, explore=False)
    assert len(as_batch) == 5
    assert [int(a) for a in as_batch] == expected


@pytest.mark.parametrize(
    "normalize, clip, module_mean, expected",
    [
        (True, False, 0.5, 1.0),    # [-1, 1] -> [-2, 2]: -2 + (0.5 + 1) * 2
        (True, False, -1.0, -2.0),
        (True, False, 3.0, 2.0),    # unsquashed to 6.0, then clipped into the bounds
        (False, False, 0.5, 0.5),   # passed through
        (False, False, 3.0, 3.0),   # passed through, outside the bounds
        (False, True, 3.0, 2.0),    # clipped
        (False, True, -3.0, -2.0),
    ],
)
def test_box_actions_are_unsquashed_and_clipped(normalize, clip, module_mean, expected):
    algo = (PPOConfig().environment("Pendulum-v1", normalize_actions=normalize, clip_actions=clip)
            .training(train_batch_size=BATCH, minibatch_size=64).debugging(seed=0).build())
    weights = algo.get_weights()["default_policy"]
    algo.set_weights({"default_policy": constant_output_weights(weights, module_mean)})
    obs = np.array([1.0, 0.0, 0.0], np.float32)
    action = algo.compute_single_action(obs, explore=False)
    assert np.asarray(action).shape == (1,)
    assert float(action[0]) == pytest.approx(expected, abs=1e-5)
    # The module-space action is available without unsquashing/clipping.
    raw = algo.compute_single_action(obs, explore=False, unsquash_action=False, clip_action=False)
    assert float(raw[0]) == pytest.approx(module_mean, abs=1e-5)
    algo.stop()


def test_box_actions_with_exploration_stay_in_bounds_when_normalized():
    algo = (PPOConfig().environment("Pendulum-v1").training(train_batch_size=BATCH, minibatch_size=64)
            .debugging(seed=0).build())
    space = algo.env_runner.action_space
    for _ in range(50):
        action = algo.compute_single_action(np.array([1.0, 0.0, 0.0], np.float32), explore=True)
        assert space.contains(np.asarray(action, dtype=space.dtype))
    algo.train()
    algo.stop()


# ----------------------------------------------------------------------------- training options


def test_lr_schedule_changes_curr_lr():
    algo = small_config(lr=[[0, 1e-3], [2 * BATCH, 1e-5]]).build()
    lrs = [learner_metrics(algo.train())["curr_lr"] for _ in range(3)]
    assert lrs[0] > lrs[1]
    assert lrs[2] == pytest.approx(1e-5)
    assert all(1e-5 - 1e-12 <= lr <= 1e-3 + 1e-12 for lr in lrs)
    algo.stop()


@pytest.mark.parametrize("clip_by", ["value", "norm", "global_norm"])
def test_grad_clip_reports_gradients_global_norm(clip_by):
    algo = small_config(grad_clip=0.5, grad_clip_by=clip_by).build()
    before = algo.get_weights()["default_policy"]
    metrics = learner_metrics(algo.train())
    assert np.isfinite(metrics["gradients_global_norm"])
    assert metrics["gradients_global_norm"] > 0
    after = algo.get_weights()["default_policy"]
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    algo.stop()


def _params_with_grads(grads):
    params = []
    for g in grads:
        p = torch.nn.Parameter(torch.zeros_like(g))
        p.grad = g.clone()
        params.append(p)
    return params


def test_clip_gradients_by_value_norm_and_global_norm():
    grads = [torch.tensor([3.0, -4.0]), torch.tensor([12.0])]  # norms 5 and 12, global norm 13
    params = _params_with_grads(grads)
    assert clip_gradients(params, 1.0, "value") == pytest.approx(13.0)
    assert params[0].grad.tolist() == [1.0, -1.0] and params[1].grad.tolist() == [1.0]

    params = _params_with_grads(grads)
    assert clip_gradients(params, 2.0, "norm") == pytest.approx(13.0)
    assert float(params[0].grad.norm()) == pytest.approx(2.0, rel=1e-4)
    assert float(params[1].grad.norm()) == pytest.approx(2.0, rel=1e-4)

    params = _params_with_grads(grads)
    assert clip_gradients(params, 6.5, "global_norm") == pytest.approx(13.0)
    assert params[0].grad.tolist() == pytest.approx([1.5, -2.0], rel=1e-4)  # scaled by 6.5/13
    assert params[1].grad.tolist() == pytest.approx([6.0], rel=1e-4)

    params = _params_with_grads(grads)
    assert clip_gradients(params, None, "global_norm") == pytest.approx(13.0)
    assert params[1].grad.tolist() == [12.0]


def test_get_weights_and_set_weights_round_trip_changes_actions():
    a = small_config(seed=1).build()
    b = small_config(seed=2).build()
    observations = sample_cartpole_obs(50)
    actions_a = deterministic_actions(a, observations)
    assert deterministic_actions(b, observations) != actions_a
    weights = a.get_weights()
    assert set(weights) == {"default_policy"}
    b.set_weights(weights)
    assert deterministic_actions(b, observations) == actions_a
    for k, v in a.get_weights()["default_policy"].items():
        np.testing.assert_array_equal(b.get_weights()["default_policy"][k], v)
    # The policy the runners sample with sees the new weights too.
    for k, v in weights["default_policy"].items():
        np.testing.assert_array_equal(b.get_policy().get_weights()[k], v)
    a.stop()
    b.stop()


def test_algorithm_is_a_context_manager_that_stops():
    CLOSED.clear()
    with small_config(env=ClosableEnv).env_runners(num_envs_per_env_runner=2).build() as algo:
        result = algo.train()
        assert result["training_iteration"] == 1
        assert CLOSED == []
    assert len(CLOSED) == 2


@pytest.mark.parametrize(
    "optimizer",
    [{"type": "adam"}, {"type": "sgd", "momentum": 0.9}, {"type": "adamw", "weight_decay": 0.1}, {"type": "RMSprop"}],
    ids=lambda o: o["type"],
)
def test_optimizer_types_train(optimizer):
    algo = small_config(optimizer=optimizer).build()
    before = algo.get_weights()["default_policy"]
    metrics = learner_metrics(algo.train())
    assert np.isfinite(metrics["total_loss"])
    after = algo.get_weights()["default_policy"]
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    if optimizer["type"] == "RMSprop":
        assert isinstance(algo.learner.optimizer, torch.optim.RMSprop)
    algo.stop()


def test_optimizer_type_changes_the_update():
    results = {}
    for name in ("adam", "sgd"):
        algo = small_config(optimizer={"type": name}).build()
        algo.train()
        results[name] = algo.get_weights()["default_policy"]
        algo.stop()
    assert any(not np.allclose(results["adam"][k], results["sgd"][k]) for k in results["adam"])


def test_unknown_optimizer_type_raises_config_error_with_hint():
    with pytest.raises(ConfigError, match=r"(?i)did you mean.*'adam'"):
        small_config(optimizer={"type": "adamm"}).build()


def test_unknown_optimizer_option_raises_config_error_with_hint():
    with pytest.raises(ConfigError, match=r"(?i)did you mean.*'betas'"):
        small_config(optimizer={"type": "adam", "betass": [0.9, 0.99]}).build()


# ----------------------------------------------------------------------------- determinism

_NONDETERMINISTIC = ("time", "date", "timestamp", "pid", "hostname", "perf")  # perf: the machine's CPU and RAM use


def numeric_leaves(d: dict, prefix: str = "") -> dict[str, float]:
    """Flatten every numeric value of a nested result dict, skipping clock/host fields."""
    out = {}
    for k, v in d.items():
        path = f"{prefix}/{k}" if prefix else k
        if any(word in k for word in _NONDETERMINISTIC):
            continue
        if isinstance(v, dict):
            out.update(numeric_leaves(v, path))
        elif isinstance(v, (list, tuple)):
            for i, item in enumerate(v):
                if isinstance(item, (int, float, np.number)) and not isinstance(item, bool):
                    out[f"{path}/{i}"] = float(item)
        elif isinstance(v, (int, float, np.number)) and not isinstance(v, bool):
            out[path] = float(v)
    return out


def train_twice(seed: int):
    algo = small_config(seed=seed).build()
    results = [algo.train(), algo.train()]
    weights = algo.get_weights()["default_policy"]
    algo.stop()
    return results, weights


def test_same_seed_gives_identical_results_and_weights():
    results_a, weights_a = train_twice(seed=42)
    results_b, weights_b = train_twice(seed=42)
    for ra, rb in zip(results_a, results_b):
        na, nb = numeric_leaves(ra), numeric_leaves(rb)
        assert na.keys() == nb.keys()
        assert "learners/default_policy/total_loss" in na
        assert "env_runners/episode_return_mean" in na
        for key in na:
            assert na[key] == nb[key] or (math.isnan(na[key]) and math.isnan(nb[key])), key
    assert weights_a.keys() == weights_b.keys()
    for k in weights_a:
        np.testing.assert_array_equal(weights_a[k], weights_b[k])


def test_different_seeds_give_different_results():
    results_a, weights_a = train_twice(seed=1)
    results_b, weights_b = train_twice(seed=2)
    assert any(not np.array_equal(weights_a[k], weights_b[k]) for k in weights_a)
    assert learner_metrics(results_a[1])["total_loss"] != learner_metrics(results_b[1])["total_loss"]


# ----------------------------------------------------------------------------- PPO options


def test_ppo_without_critic_and_gae_trains():
    algo = small_config(use_critic=False, use_gae=False).env_runners(batch_mode="complete_episodes").build()
    for _ in range(2):
        metrics = learner_metrics(algo.train())
        assert np.isfinite(metrics["total_loss"])
        assert np.isfinite(metrics["policy_loss"])
    algo.stop()


def test_no_critic_with_truncated_batches_is_a_config_error():
    """Without a value function nothing can stand in for the return after a cut (RLlib raises too)."""
    with pytest.raises(ConfigError, match="complete_episodes"):
        small_config(use_critic=False, use_gae=False).build()


def test_use_gae_without_critic_is_a_config_error():
    with pytest.raises(ConfigError, match="use_critic"):
        small_config(use_critic=False, use_gae=True).build()


def test_use_kl_loss_false_removes_mean_kl_loss():
    with_kl = small_config().build()
    assert "mean_kl_loss" in learner_metrics(with_kl.train())
    with_kl.stop()
    without_kl = small_config(use_kl_loss=False).build()
    metrics = learner_metrics(without_kl.train())
    assert "mean_kl_loss" not in metrics
    assert np.isfinite(metrics["total_loss"])
    without_kl.stop()


def test_kl_coeff_grows_when_kl_target_is_tiny():
    algo = small_config(kl_coeff=0.2, kl_target=1e-9).build()
    coeffs = [learner_metrics(algo.train())["curr_kl_coeff"] for _ in range(3)]
    assert coeffs[0] == pytest.approx(0.2)
    assert coeffs[0] < coeffs[1] < coeffs[2]
    algo.stop()


def test_kl_coeff_shrinks_when_kl_target_is_huge():
    algo = small_config(kl_coeff=0.2, kl_target=100.0).build()
    coeffs = [learner_metrics(algo.train())["curr_kl_coeff"] for _ in range(3)]
    assert coeffs[0] > coeffs[1] > coeffs[2]
    algo.stop()


def test_entropy_coeff_schedule_is_reported():
    algo = small_config(entropy_coeff=[[0, 0.1], [2 * BATCH, 0.0]]).build()
    coeffs = [learner_metrics(algo.train())["curr_entropy_coeff"] for _ in range(3)]
    assert coeffs[0] > coeffs[1]
    assert coeffs[2] == pytest.approx(0.0)
    assert 0.0 <= coeffs[0] <= 0.1
    algo.stop()


def test_constant_entropy_coeff_is_reported():
    algo = small_config(entropy_coeff=0.01).build()
    assert learner_metrics(algo.train())["curr_entropy_coeff"] == pytest.approx(0.01)
    algo.stop()


def test_multidiscrete_action_space():
    algo = small_config(env=MultiDiscreteActionEnv).build()
    result = algo.train()
    assert result["env_runners"]["num_episodes"] > 0
    assert np.isfinite(learner_metrics(result)["total_loss"])
    action = algo.compute_single_action(np.zeros(3, np.float32))
    assert np.asarray(action).shape == (2,)
    assert MultiDiscreteActionEnv.action_space.contains(np.asarray(action, dtype=np.int64))
    algo.stop()


def test_discrete_observation_space_is_one_hot_encoded():
    algo = small_config(env=DiscreteObsEnv).build()
    assert algo.env_runner.module_observation_space.shape == (5,)
    result = algo.train()
    assert result["env_runners"]["num_episodes"] > 0
    assert np.isfinite(learner_metrics(result)["total_loss"])
    assert algo.compute_single_action(3) in (0, 1)
    algo.stop()


def test_dict_observation_space():
    algo = small_config(env=DictObsEnv).build()
    result = algo.train()
    assert result["env_runners"]["num_episodes"] > 0
    assert np.isfinite(learner_metrics(result)["total_loss"])
    obs = {"position": np.array([0.1, -0.2], np.float32), "mode": 2}
    assert algo.compute_single_action(obs) in (0, 1)
    algo.stop()


def test_mean_std_observation_filter_state_changes():
    algo = small_config().env_runners(observation_filter="MeanStdFilter").build()
    obs_filter = algo.workers.local_worker().filters["default_policy"]
    before = obs_filter.get_state()
    algo.train()
    after = obs_filter.get_state()
    assert after["count"] > before["count"]
    assert not np.allclose(after["mean"], before["mean"])
    obs = sample_cartpole_obs(1)[0]
    assert algo.compute_single_action(obs) in (0, 1)
    # compute_single_action filters but does not update the statistics.
    assert obs_filter.get_state()["count"] == after["count"]
    algo.stop()
