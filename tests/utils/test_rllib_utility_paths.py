"""Spaces and utilities at RLlib 2.60's module paths, used as RLlib users use them: FlexDict,
Simplex, Repeated, space_utils helpers, rlx.utils.filter, test_utils.check and
check_learning_achieved, torch_utils helpers, StepFailedRecreateEnvError, and the result-key
constants at the modules RLlib defines them in."""
import gymnasium as gym
import numpy as np
import pytest
import torch


def test_flexdict_accepts_keys_after_construction():
    from rlx.utils.spaces.flexdict import FlexDict

    space = FlexDict({})
    space["pos"] = gym.spaces.Box(-1.0, 1.0, (2,))
    space["mode"] = gym.spaces.Discrete(3)
    sample = space.sample()
    assert set(sample) == {"pos", "mode"} and space.contains(sample)
    with pytest.raises(TypeError, match="gymnasium spaces"):
        space["bad"] = [1, 2]


def test_simplex_samples_lie_on_the_simplex():
    from rlx.utils.spaces.simplex import Simplex

    space = Simplex(shape=(3, 4), concentration=np.array([1.0, 2.0, 3.0, 4.0]))
    space.seed(0)
    x = space.sample()
    assert x.shape == (3, 4) and x.dtype == np.float32
    assert np.allclose(x.sum(axis=-1), 1.0, atol=1e-5) and space.contains(x)
    assert not space.contains(np.full((3, 4), 0.5, np.float32))
    assert Simplex((4,)) == Simplex((4,)) and Simplex((4,)) != Simplex((5,))


def test_repeated_holds_variable_length_lists():
    from rlx.utils.spaces.repeated import Repeated

    space = Repeated(gym.spaces.Box(0.0, 1.0, (2,)), max_len=5)
    space.seed(1)
    sample = space.sample()
    assert 1 <= len(sample) <= 5 and space.contains(sample)
    assert not space.contains([np.zeros(2, np.float32)] * 6)
    with pytest.raises(ValueError, match="max_len"):
        Repeated(gym.spaces.Discrete(2), max_len=0)


def test_space_utils_convert_element_and_dummy_batch():
    from rlx.utils.spaces.space_utils import convert_element_to_space_type, get_dummy_batch_for_space

    space = gym.spaces.Dict({"box": gym.spaces.Box(-1.0, 1.0, (3,)), "n": gym.spaces.Discrete(4)})
    converted = convert_element_to_space_type({"box": np.zeros(3, np.float64), "n": 2.0}, space.sample())
    assert converted["box"].dtype == np.float32 and converted["n"] == 2 and isinstance(converted["n"], int)
    batch = get_dummy_batch_for_space(space, batch_size=4, time_size=5)
    assert batch["box"].shape == (4, 5, 3) and batch["n"].shape == (4, 5)
    one_hot = get_dummy_batch_for_space(gym.spaces.Discrete(6), 2, one_hot_discrete=True, fill_value=1.0)
    assert one_hot.shape == (2, 6) and np.all(one_hot == 1.0)
    single = get_dummy_batch_for_space(gym.spaces.Box(0.0, 1.0, (2,)), batch_size=0, fill_value="random")
    assert single.shape == (2,)


def test_filter_module_path():
    from rlx.utils.filter import MeanStdFilter, NoFilter, get_filter

    assert isinstance(get_filter("NoFilter", (3,)), NoFilter)
    local = get_filter("MeanStdFilter", (2,))
    assert isinstance(local, MeanStdFilter) and local.clip is None
    remote = local.copy()
    for x in ([1.0, 2.0], [3.0, 6.0]):
        remote(np.array(x))
    local.apply_changes(remote, with_buffer=False)
    assert local.count == 2 and np.allclose(local.mean, [2.0, 4.0])
    remote.reset_buffer()
    remote.sync(local)
    assert np.allclose(remote.mean, local.mean)
    with pytest.raises(ValueError, match="observation_filter"):
        get_filter("Median", (2,))


def test_check_and_check_learning_achieved():
    from rlx.utils.test_utils import check, check_learning_achieved

    check({"a": [1.0, np.float32(2.0)]}, {"a": [1.0, 2.0]})
    check(torch.tensor([0.5]), np.array([0.5]))
    check(1.0, 2.0, false=True)
    with pytest.raises(AssertionError):
        check([1.0, 2.0], [1.0, 2.1])
    results = [{"env_runners": {"episode_return_mean": 10.0}}, {"env_runners": {"episode_return_mean": 150.0}}]
    check_learning_achieved(results, min_value=100.0)
    with pytest.raises(ValueError, match="not reached"):
        check_learning_achieved(results, min_value=200.0)


def test_torch_utils_helpers():
    from rlx.utils import torch_utils as tu

    original = {"w": torch.ones(2, requires_grad=True), "meta": "x"}
    copied = tu.copy_torch_tensors(original)
    assert copied["meta"] == "x" and not copied["w"].requires_grad
    copied["w"].add_(1.0)
    assert torch.equal(original["w"].detach(), torch.ones(2))
    tensors = tu.convert_to_torch_tensor({"obs": np.zeros((2, 3)), "none": None})
    assert tensors["obs"].dtype == torch.float32 and tensors["none"] is None
    grads = {"a": torch.tensor([3.0, 4.0]), "b": torch.tensor([0.0])}
    norm = tu.clip_gradients(grads, grad_clip=1.0, grad_clip_by="global_norm")
    assert float(norm) == pytest.approx(5.0) and float(grads["a"].norm()) == pytest.approx(1.0, rel=1e-4)
    with pytest.raises(ValueError, match="grad_clip_by"):
        tu.clip_gradients(grads, grad_clip=1.0, grad_clip_by="max")
    mask = tu.sequence_mask(torch.tensor([1, 3]), maxlen=4)
    assert mask.tolist() == [[True, False, False, False], [True, True, True, False]]
    assert tu.sequence_mask(torch.tensor([1, 3]), maxlen=4, time_major=True).shape == (4, 2)
    assert torch.allclose(tu.inverse_symlog(tu.symlog(torch.tensor([-5.0, 0.0, 7.0]))), torch.tensor([-5.0, 0.0, 7.0]))
    assert float(tu.huber_loss(torch.tensor(3.0))) == pytest.approx(2.5)
    assert float(tu.reduce_mean_ignore_inf(torch.tensor([1.0, float("-inf"), 3.0]))) == pytest.approx(2.0)
    main, target = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    expected = 0.5 * main.weight.detach() + 0.5 * target.weight.detach()
    tu.update_target_network(main, target, tau=0.5)
    assert torch.allclose(target.weight, expected)


def test_step_failed_recreate_env_error_restarts_the_env():
    from rlx.algorithms import PPOConfig
    from rlx.env.env_errors import StepFailedRecreateEnvError

    class Flaky(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,))
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config=None):
            self.t = 0

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            self.t += 1
            if self.t == 7:
                raise StepFailedRecreateEnvError("simulator lost")
            return np.zeros(2, np.float32), 1.0, self.t % 5 == 0, False, {}

    config = (PPOConfig().environment(Flaky).fault_tolerance(restart_failed_sub_environments=True)
              .env_runners(num_envs_per_env_runner=1)
              .training(train_batch_size=64, minibatch_size=32, num_epochs=1))
    algo = config.build()
    try:
        result = algo.train()
        assert result["env_runners"]["num_sub_env_restarts"] >= 1
    finally:
        algo.stop()


def test_result_key_constants_at_rllib_paths():
    from rlx.algorithms.dqn.dqn_learner import QF_LOSS_KEY, TD_ERROR_MEAN_KEY
    from rlx.algorithms.ppo.ppo import LEARNER_RESULTS_CURR_ENTROPY_COEFF_KEY, LEARNER_RESULTS_KL_KEY
    from rlx.algorithms.sac.sac_learner import QF_MEAN_KEY
    from rlx.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY
    from rlx.utils.error import UnsupportedSpaceException
    from rlx.utils.metrics import ENV_RUNNER_SAMPLING_TIMER, LEARNER_RESULTS, LEARNER_UPDATE_TIMER, TIMERS

    assert (QF_LOSS_KEY, TD_ERROR_MEAN_KEY, QF_MEAN_KEY) == ("qf_loss", "td_error_mean", "qf_mean")
    assert (TIMERS, ENV_RUNNER_SAMPLING_TIMER, LEARNER_UPDATE_TIMER) == (
        "timers", "env_runner_sampling_timer", "learner_update_timer")
    assert issubclass(UnsupportedSpaceException, Exception)
    from rlx.algorithms import PPOConfig

    algo = (PPOConfig().environment("CartPole-v1").training(train_batch_size=64, minibatch_size=32, num_epochs=1)
            .build())
    try:
        learner_results = algo.train()[LEARNER_RESULTS]["default_policy"]
        for key in (LEARNER_RESULTS_CURR_ENTROPY_COEFF_KEY, LEARNER_RESULTS_KL_KEY, POLICY_LOSS_KEY, ENTROPY_KEY):
            assert key in learner_results, key
    finally:
        algo.stop()


def test_numpy_helpers():
    from rlx.utils.numpy import fc, huber_loss, l2_loss, make_action_immutable, one_hot_multidiscrete, relu, sigmoid

    x = np.ones((2, 3))
    torch_layout = np.arange(12.0).reshape(4, 3)  # [out, in], as torch stores it
    assert np.allclose(fc(x, torch_layout, np.ones(4), framework="torch"), x @ torch_layout.T + 1.0)
    assert np.allclose(huber_loss([0.5, 3.0]), [0.125, 2.5]) and l2_loss([1.0, 2.0]) == 2.5
    assert np.allclose(relu([-2.0, 2.0], alpha=0.1), [-0.2, 2.0]) and sigmoid(0.0) == 0.5
    assert one_hot_multidiscrete(np.array([[1, 0], [2, 1]]), [3, 2]).tolist() == [[0, 1, 0, 1, 0], [0, 0, 1, 0, 1]]
    action = make_action_immutable(np.zeros(2))
    with pytest.raises(ValueError):
        action[0] = 1.0
    with pytest.raises(TypeError):
        make_action_immutable({"a": 1})["a"] = 2
