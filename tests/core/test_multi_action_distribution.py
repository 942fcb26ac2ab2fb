"""Tuple/Dict action spaces: MultiDistribution, the ActionAdapter's structured actions, and PPO
learning an env whose action is a (Discrete, Box) tuple."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlx.core.distributions import (
    BoundDistribution,
    Categorical,
    DiagGaussian,
    MultiCategorical,
    MultiDistribution,
    TorchMultiActionDistribution,
    TorchMultiDistribution,
    dist_class_for_space,
    flat_action_dim,
)
from rlx.env.env_runner import ActionAdapter
from rlx.utils.errors import NotSupportedYetError

TUPLE = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
                          gym.spaces.MultiDiscrete([2, 4])))
# Parts in flat order: a (Discrete 2), b[0] (Box 2x2 -> 4), b[1] (Discrete 4 starting at 1).
NESTED = gym.spaces.Dict({
    "a": gym.spaces.Discrete(2),
    "b": gym.spaces.Tuple((gym.spaces.Box(0.0, 4.0, (2, 2), np.float32), gym.spaces.Discrete(4, start=1))),
})


def _gen(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def _dist(space: gym.Space, inputs: torch.Tensor) -> MultiDistribution:
    cls, kwargs = dist_class_for_space(space)
    return BoundDistribution(cls, **kwargs).from_logits(inputs)


def _tuple_parts(inputs: torch.Tensor) -> list:
    return [Categorical(inputs[:, :3]), DiagGaussian(inputs[:, 3:7]),
            MultiCategorical(inputs[:, 7:13], input_lens=[2, 4])]


# ======================================================================= distribution


def test_dist_class_for_tuple_and_dict_spaces():
    cls, kwargs = dist_class_for_space(TUPLE)
    assert cls is MultiDistribution is TorchMultiDistribution is TorchMultiActionDistribution
    assert kwargs["input_lens"] == [3, 4, 6] and kwargs["action_lens"] == [1, 2, 2]
    assert cls.required_input_dim(TUPLE) == 13 and flat_action_dim(TUPLE) == 5
    cls, kwargs = dist_class_for_space(NESTED)
    assert kwargs["input_lens"] == [2, 8, 4] and cls.required_input_dim(NESTED) == 14
    assert flat_action_dim(NESTED) == 6
    with pytest.raises(NotSupportedYetError, match="MultiBinary"):
        dist_class_for_space(gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.MultiBinary(3))))


def test_logp_entropy_kl_are_sums_over_parts():
    inputs = torch.randn(64, 13, generator=_gen(0))
    other_inputs = torch.randn(64, 13, generator=_gen(1))
    dist = _dist(TUPLE, inputs)
    actions = dist.sample(_gen(2))
    assert actions.shape == (64, 5) and actions.dtype == torch.float32
    cat, gauss, multi = _tuple_parts(inputs)
    expected = cat.logp(actions[:, 0]) + gauss.logp(actions[:, 1:3]) + multi.logp(actions[:, 3:5])
    assert torch.allclose(dist.logp(actions), expected, atol=1e-5)
    assert torch.allclose(dist.sampled_action_logp(), expected, atol=1e-5)
    # The structured form gives the same log-likelihood.
    structured = dist.unflatten_actions(actions)
    assert isinstance(structured, tuple) and structured[0].dtype == torch.long
    assert torch.allclose(dist.logp(structured), expected, atol=1e-5)
    assert torch.allclose(dist.entropy(), cat.entropy() + gauss.entropy() + multi.entropy(), atol=1e-5)
    o_cat, o_gauss, o_multi = _tuple_parts(other_inputs)
    kl = dist.kl(_dist(TUPLE, other_inputs))
    assert torch.allclose(kl, cat.kl(o_cat) + gauss.kl(o_gauss) + multi.kl(o_multi), atol=1e-5)
    assert (kl >= -1e-6).all()


def test_deterministic_sample_is_each_parts_mode_and_gradients_flow():
    inputs = torch.randn(8, 13, generator=_gen(3), requires_grad=True)
    dist = _dist(TUPLE, inputs)
    mode = dist.deterministic_sample()
    assert torch.equal(mode[:, 0].long(), inputs[:, :3].argmax(-1))
    assert torch.allclose(mode[:, 1:3], inputs[:, 3:5])
    assert torch.equal(mode[:, 3].long(), inputs[:, 7:9].argmax(-1))
    assert torch.equal(mode[:, 4].long(), inputs[:, 9:13].argmax(-1))
    dist.logp(mode.detach()).sum().backward()
    assert inputs.grad is not None and bool(inputs.grad.abs().sum() > 0)


def test_nested_dict_structure_and_sampling_frequencies():
    inputs = torch.zeros(4000, 14)
    inputs[:, 1] = 2.0  # "a": action 1 has probability e^2 / (1 + e^2)
    dist = _dist(NESTED, inputs)
    flat = dist.sample(_gen(4))
    assert flat.shape == (4000, 6)
    assert abs(float(flat[:, 0].mean()) - float(torch.sigmoid(torch.tensor(2.0)))) < 0.03
    structured = dist.unflatten_actions(flat)
    assert set(structured) == {"a", "b"} and structured["a"].shape == (4000,)
    assert structured["b"][0].shape == (4000, 4) and structured["b"][1].shape == (4000,)
    assert torch.allclose(dist.logp(structured), dist.logp(flat))


# ============================================================================ adapter


def test_adapter_gives_the_env_tuples_with_box_parts_unsquashed_and_clipped():
    space = gym.spaces.Tuple((gym.spaces.Discrete(3, start=1), gym.spaces.Box(0.0, 10.0, (2,), np.float32)))
    adapter = ActionAdapter(space, normalize=True, clip=True)
    assert adapter.batch_shape == (3,) and adapter.batch_dtype == np.float32
    env_actions = adapter.to_env(np.array([[2.0, -1.0, 1.0], [0.0, 0.0, 5.0]], np.float32))
    assert isinstance(env_actions, list) and len(env_actions) == 2
    first, second = env_actions
    assert isinstance(first, tuple) and type(first[0]) is int and first[0] == 3
    assert first[1].dtype == np.float32 and first[1].tolist() == [0.0, 10.0]
    assert second[0] == 1 and second[1].tolist() == [5.0, 10.0]  # 5 -> 30, clipped to 10
    assert all(space.contains(a) for a in env_actions)
    back = adapter.from_env([first, (2, np.array([2.5, 7.5], np.float32))])
    assert np.allclose(back, [[2.0, -1.0, 1.0], [1.0, -0.5, 0.5]])
    # Without normalize_actions the Box part is taken as is (clipped only with clip_actions).
    raw = ActionAdapter(space, normalize=False, clip=False).to_env(np.array([[0.0, 12.0, 3.0]], np.float32))
    assert raw[0][1].tolist() == [12.0, 3.0]
    assert ActionAdapter(space, normalize=False, clip=True).to_env(np.array([[0.0, 12.0, 3.0]]))[0][1].tolist() \
        == [10.0, 3.0]


def test_adapter_gives_the_env_nested_dicts():
    space = gym.spaces.Dict({"move": gym.spaces.MultiDiscrete([3, 2]),
                             "aim": gym.spaces.Dict({"angle": gym.spaces.Box(-1.0, 1.0, (1,), np.float64),
                                                     "fire": gym.spaces.Discrete(2)})})
    adapter = ActionAdapter(space, normalize=True, clip=False)
    samples = [space.sample() for _ in range(20)]
    flat = adapter.from_env(samples)
    assert flat.shape == (20, 4) and flat.dtype == np.float32
    env_actions = adapter.to_env(flat)
    for sample, action in zip(samples, env_actions):
        assert space.contains(action)
        assert isinstance(action["aim"], dict) and type(action["aim"]["fire"]) is int
        assert action["move"].dtype == space["move"].dtype
        assert action["move"].tolist() == sample["move"].tolist() and action["aim"]["fire"] == sample["aim"]["fire"]
        assert np.allclose(action["aim"]["angle"], sample["aim"]["angle"], atol=1e-6)
    rand = adapter.sample_module_actions(5)
    assert rand.shape == (5, 4) and all(space.contains(a) for a in adapter.to_env(rand))


# ================================================================= env runner and PPO


class TupleActionEnv(gym.Env):
    """Each step shows a target in {0, 1, 2} (one-hot); reward = [discrete part == target] -
    mean |box part - 0.5|. Episodes last 10 steps (best return 10)."""

    def __init__(self, config=None):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
        self.action_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)))
        self._target = 0
        self._t = 0

    def _obs(self):
        obs = np.zeros(3, np.float32)
        obs[self._target] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._target = int(self.np_random.integers(3))
        return self._obs(), {}

    def step(self, action):
        assert isinstance(action, tuple) and self.action_space.contains(action), action
        reward = float(action[0] == self._target) - float(np.mean(np.abs(action[1] - 0.5)))
        self._t += 1
        self._target = int(self.np_random.integers(3))
        return self._obs(), reward, False, self._t >= 10, {}


def test_env_runner_stores_flat_actions_and_steps_the_env_with_tuples():
    from tests.conftest import small_config

    config = small_config(TupleActionEnv).env_runners(num_envs_per_env_runner=2, rollout_fragment_length=8)
    algo = config.build()
    try:
        runner = algo.env_runner_group.local_env_runner
        batch = runner.sample(num_timesteps=16)
        assert batch["actions"].shape[1:] == (2, 3) and batch["actions"].dtype == np.float32
        assert set(np.unique(batch["actions"][..., 0])) <= {0.0, 1.0, 2.0}
        random_batch = runner.sample(num_timesteps=16, random_actions=True)
        assert random_batch["actions"].shape[1:] == (2, 3)
    finally:
        algo.stop()


def test_ppo_learns_a_tuple_action_env():
    from tests.conftest import small_config

    config = small_config(TupleActionEnv, seed=3, train_batch_size=1000, minibatch_size=125, num_epochs=8, lr=3e-3)
    algo = config.build()
    try:
        returns = [algo.train()["env_runners"]["episode_return_mean"] for _ in range(20)]  # ~6 s
        assert returns[0] < 0.0 and max(returns) > 5.0, returns  # random: about -4; best: 10
        # Both parts learned: the greedy action picks the target and puts the box part near 0.5.
        module = algo.get_module()
        with torch.no_grad():
            out = module.forward_inference({"obs": torch.eye(3)})
        greedy = module.get_inference_action_dist_cls().from_logits(out["action_dist_inputs"]).deterministic_sample()
        env_actions = algo.env_runner_group.local_env_runner.actions.to_env(greedy.numpy())
        assert [a[0] for a in env_actions] == [0, 1, 2], env_actions
        assert all(np.abs(a[1] - 0.5).max() < 0.35 for a in env_actions), env_actions
    finally:
        algo.stop()


def _dict_action_ma_env(config=None):
    """Two agents with Dict actions {"pick": Discrete(3), "push": Box(0, 2, (1,))}; the env checks
    every action it gets."""
    from rlx.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv

    class _Env(MultiAgentEnv):
        def __init__(self, config=None):
            super().__init__()
            self.possible_agents = self.agents = ["a", "b"]
            box = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
            act = gym.spaces.Dict({"pick": gym.spaces.Discrete(3),
                                   "push": gym.spaces.Box(0.0, 2.0, (1,), np.float32)})
            self.observation_spaces = {aid: box for aid in self.agents}
            self.action_spaces = {aid: act for aid in self.agents}
            self._t = 0

        def reset(self, *, seed=None, options=None):
            self._t = 0
            return {aid: np.eye(3, dtype=np.float32)[i] for i, aid in enumerate(self.agents)}, {}

        def step(self, action_dict):
            for aid, action in action_dict.items():
                assert isinstance(action, dict) and self.action_spaces[aid].contains(action), action
            self._t += 1
            obs = {aid: np.eye(3, dtype=np.float32)[i] for i, aid in enumerate(self.agents)}
            rewards = {aid: float(a["pick"] == 1) for aid, a in action_dict.items()}
            done = self._t >= 5
            return obs, rewards, {ALL_AGENTS: False}, {ALL_AGENTS: done}, {}

    return _Env(config)


def test_multi_agent_runner_with_dict_action_spaces():
    from rlx.algorithms.ppo import PPOConfig

    config = (PPOConfig().environment(_dict_action_ma_env)
              .multi_agent(policies={"p0"}, policy_mapping_fn=lambda aid, *a, **kw: "p0")
              .training(train_batch_size=100, minibatch_size=50, num_epochs=1)
              .debugging(seed=0))
    algo = config.build()
    try:
        result = algo.train()
        assert result["num_env_steps_sampled_lifetime"] >= 100
        batch = algo.env_runner_group.local_env_runner.sample(num_timesteps=20)
        actions = batch.policy_batches["p0"]["actions"]
        assert actions.shape[-1] == 2 and actions.dtype == np.float32
    finally:
        algo.stop()
