"""The Trainer-era API of the seeds (002/001 "Python API", "Computing Actions",
"Accessing Policy State", "Accessing Model State") on rlx."""
from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.algorithms.ppo import PPO

pytestmark = pytest.mark.filterwarnings("ignore:.*CartPole-v0 is out of date")

SMALL = {"train_batch_size": 256, "sgd_minibatch_size": 64, "num_sgd_iter": 2}




@pytest.fixture
def trainer():
    t = PPO(config={"num_workers": 0, "lr": 1e-3, "seed": 0, **SMALL}, env="CartPole-v0")
    yield t
    t.stop()


def observations(n: int = 40, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-0.5, 0.5, size=(n, 4)).astype(np.float32)


def greedy_actions(policy, obs_batch) -> list[int]:
    return [int(policy.compute_single_action(o, explore=False)[0]) for o in obs_batch]


# ----------------------------------------------------------------------------- construction


def test_ppo_from_a_dict_config_and_env(trainer):
    assert trainer.config["lr"] == pytest.approx(1e-3)
    assert trainer.config["num_workers"] == 0
    # Legacy keys map onto the current names.
    assert trainer.config.minibatch_size == 64
    assert trainer.config.num_epochs == 2
    result = trainer.train()
    assert result["training_iteration"] == 1
    assert result["timesteps_total"] == 256
    assert "episode_reward_mean" in result


def test_agents_ppo_module_with_default_config_copy():
    import rlx.agents.ppo as ppo

    config = ppo.DEFAULT_CONFIG.copy()
    assert isinstance(config, dict)
    config["num_workers"] = 0
    config.update(SMALL)
    trainer = ppo.PPOTrainer(config=config, env="CartPole-v0")
    result = trainer.train()
    assert result["training_iteration"] == 1
    assert trainer.config["train_batch_size"] == 256
    # The copy was changed, not the module-level defaults.
    assert ppo.DEFAULT_CONFIG["train_batch_size"] == ppo.PPOConfig().train_batch_size
    trainer.stop()


def test_default_config_is_not_mutated_by_building():
    import rlx.agents.ppo as ppo

    before = ppo.DEFAULT_CONFIG.copy()
    ppo.PPOTrainer(config={**ppo.DEFAULT_CONFIG, **SMALL, "num_workers": 0}, env="CartPole-v0").stop()
    assert ppo.DEFAULT_CONFIG == before


def test_compute_action_plays_an_episode(trainer):
    env = gym.make("CartPole-v0")
    obs, _ = env.reset(seed=0)
    total, done = 0.0, False
    while not done:
        action = trainer.compute_action(obs)
        assert env.action_space.contains(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        total += reward
        done = terminated or truncated
    assert total >= 1


# ----------------------------------------------------------------------------- policy state


def test_get_policy_weights_equal_local_worker_policy_map(trainer):
    trainer.train()
    a = trainer.get_policy().get_weights()
    b = trainer.workers.local_worker().policy_map["default_policy"].get_weights()
    assert a.keys() == b.keys() and len(a) > 0
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_foreach_worker_returns_one_entry_per_worker(trainer):
    weights = trainer.workers.foreach_worker(lambda w: w.get_policy().get_weights())
    assert isinstance(weights, list) and len(weights) == 1
    expected = trainer.get_policy().get_weights()
    for k in expected:
        np.testing.assert_array_equal(weights[0][k], expected[k])


def test_foreach_worker_with_index_passes_worker_then_index(trainer):
    out = trainer.workers.foreach_worker_with_index(lambda w, i: (w, i))
    assert out == [(trainer.workers.local_worker(), 0)]


def test_foreach_worker_with_id_passes_id_then_worker(trainer):
    out = trainer.workers.foreach_worker_with_id(lambda i, w: (i, w))
    assert out == [(0, trainer.workers.local_worker())]


def test_env_runner_group_names(trainer):
    group = trainer.env_runner_group
    assert group is trainer.workers
    assert group.local_worker() == group.local_env_runner  # (the old-API view of the same runner)
    assert group.local_worker().env_runner is group.local_env_runner
    assert group.foreach_env_runner(lambda r: r.worker_index) == [0]
    assert group.local_env_runner.get_policy() is trainer.get_policy()


def test_policy_set_weights_changes_computed_actions():
    a = PPO(config={"seed": 1, "num_workers": 0, **SMALL}, env="CartPole-v0")
    b = PPO(config={"seed": 2, "num_workers": 0, **SMALL}, env="CartPole-v0")
    obs = observations()
    actions_a = greedy_actions(a.get_policy(), obs)
    assert greedy_actions(b.get_policy(), obs) != actions_a
    b.get_policy().set_weights(a.get_policy().get_weights())
    assert greedy_actions(b.get_policy(), obs) == actions_a
    # The trainer acts with the same (shared) weights.
    assert [int(b.compute_single_action(o, explore=False)) for o in obs] == actions_a
    a.stop()
    b.stop()


def test_policy_compute_single_action_returns_action_state_extra(trainer):
    policy = trainer.get_policy()
    action, state, extra = policy.compute_single_action(observations(1)[0])
    assert policy.action_space.contains(action)
    assert state == []
    assert isinstance(extra, dict)
    assert np.asarray(extra["action_dist_inputs"]).shape == (2,)


# ----------------------------------------------------------------------------- model state


OBS = np.array([[0.1, 0.2, 0.3, 0.4]])


def test_policy_model_forward_pass_and_value_function(trainer):
    policy = trainer.get_policy()
    logits, state = policy.model({"obs": OBS})
    assert tuple(logits.shape) == (1, 2)
    assert state == []
    values = policy.model.value_function()
    assert tuple(values.shape) == (1,)
    assert torch.isfinite(torch.as_tensor(values)).all()


def test_policy_model_from_batch_alias(trainer):
    policy = trainer.get_policy()
    logits, _ = policy.model({"obs": OBS})
    logits2, state = policy.model.from_batch({"obs": OBS})
    assert state == []
    torch.testing.assert_close(torch.as_tensor(logits2), torch.as_tensor(logits))


def test_value_function_follows_the_most_recent_forward_pass(trainer):
    policy = trainer.get_policy()
    policy.model({"obs": OBS})
    v1 = torch.as_tensor(policy.model.value_function()).clone()
    policy.model({"obs": np.array([[-1.0, 0.5, -0.2, 0.9], [0.0, 0.0, 0.0, 0.0]])})
    v2 = torch.as_tensor(policy.model.value_function())
    assert tuple(v2.shape) == (2,)
    policy.model({"obs": OBS})
    torch.testing.assert_close(torch.as_tensor(policy.model.value_function()), v1)


def test_policy_dist_class(trainer):
    policy = trainer.get_policy()
    with torch.no_grad():
        logits, _ = policy.model({"obs": OBS})
        dist = policy.dist_class(logits, policy.model)
        sample = dist.sample()
        assert tuple(sample.shape) == (1,)
        assert int(sample[0]) in (0, 1)
        logp = dist.logp([1])
        assert tuple(logp.shape) == (1,)
        expected = torch.log_softmax(torch.as_tensor(logits, dtype=torch.float32), dim=-1)[0, 1]
        assert float(logp[0]) == pytest.approx(float(expected), abs=1e-6)
        entropy = dist.entropy()
        assert tuple(entropy.shape) == (1,)
        assert 0.0 <= float(entropy[0]) <= math.log(2) + 1e-6
        assert float(dist.kl(dist)[0]) == pytest.approx(0.0, abs=1e-6)
        other = policy.dist_class(torch.tensor([[5.0, -5.0]]), policy.model)
        assert float(dist.kl(other)[0]) > 0
        assert int(dist.deterministic_sample()[0]) == int(torch.as_tensor(logits).argmax(-1)[0])


# ----------------------------------------------------------------------------- preprocessors


def test_get_preprocessor_for_box_passes_observations_through():
    from rlx.models.preprocessors import get_preprocessor

    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    prep = get_preprocessor(env.observation_space)(env.observation_space)
    out = prep.transform(obs)
    assert out.shape == env.observation_space.shape
    np.testing.assert_allclose(out, obs)


def test_get_preprocessor_one_hot_encodes_discrete():
    from rlx.models.preprocessors import get_preprocessor

    space = gym.spaces.Discrete(4)
    prep = get_preprocessor(space)(space)
    np.testing.assert_array_equal(prep.transform(2), [0.0, 0.0, 1.0, 0.0])
    assert prep.shape == (4,)


def test_get_preprocessor_flattens_dict():
    from rlx.models.preprocessors import get_preprocessor

    space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,), np.float32), "b": gym.spaces.Discrete(3)})
    prep = get_preprocessor(space)(space)
    out = prep.transform({"a": np.array([0.5, -0.5], np.float32), "b": 1})
    assert prep.shape == (5,)
    assert sorted(out.tolist()) == sorted([0.5, -0.5, 0.0, 1.0, 0.0])


def test_local_worker_preprocessors_and_filters_reproduce_compute_action(trainer):
    worker = trainer.workers.local_worker()
    obs = observations(1)[0]
    preprocessed = worker.preprocessors["default_policy"].transform(obs)
    filtered = worker.filters["default_policy"](preprocessed, update=False)
    np.testing.assert_allclose(filtered, obs)  # CartPole: identity preprocessor, NoFilter
    action, _, _ = trainer.get_policy().compute_single_action(filtered, explore=False)
    assert int(action) == int(trainer.compute_action(obs, explore=False))
