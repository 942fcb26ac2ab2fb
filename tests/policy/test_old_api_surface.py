"""The rest of the old API's surface in the seeds: `policy.model` is the user's model, DQN's
Q-value API, `Policy.learn_on_batch`, `Algorithm.import_model`, `MemoryTrackingCallbacks`,
the Trainer-era aliases, `python -m rlx.train` and the Policy taking filtered observations."""
from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

OBS = np.array([[0.1, 0.2, 0.3, 0.4]])
SMALL_PPO = {"train_batch_size": 128, "minibatch_size": 64, "num_epochs": 1}


def small_model_class():
    """A TorchModelV2 custom model (defined per test, as users define theirs)."""
    from rlx.models.torch.torch_modelv2 import TorchModelV2

    class SmallModel(TorchModelV2, nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name, hidden=8):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            nn.Module.__init__(self)
            self.body = nn.Sequential(nn.Linear(obs_space.shape[0], hidden), nn.Tanh())
            self.logits = nn.Linear(hidden, num_outputs)
            self.value = nn.Linear(hidden, 1)

        def forward(self, input_dict, state, seq_lens):
            self._features = self.body(input_dict["obs_flat"].float())
            return self.logits(self._features), state

        def value_function(self):
            return self.value(self._features).squeeze(1)

    return SmallModel


def custom_model_algo(model_class, name="small_model"):
    from rlx.algorithms.ppo import PPOConfig
    from rlx.models.catalog import ModelCatalog

    ModelCatalog.register_custom_model(name, model_class)
    return (PPOConfig().environment("CartPole-v1").training(model={"custom_model": name}, **SMALL_PPO)
            .debugging(seed=0).build())


# ----------------------------------------------------------------------------- policy.model


def test_policy_model_is_the_users_custom_model_object():
    SmallModel = small_model_class()
    algo = custom_model_algo(SmallModel)
    try:
        model = algo.get_policy().model
        assert isinstance(model, SmallModel)
        assert model is algo.get_module().model
        first = next(model.parameters())
        assert isinstance(first, nn.Parameter)
        logits, state = model({"obs": OBS})                 # NumPy observations, as in the seeds
        assert tuple(logits.shape) == (1, 2) and state == []
        assert tuple(model.value_function().shape) == (1,)
        logits2, _ = model.from_batch({"obs": OBS})
        torch.testing.assert_close(logits2, logits)
    finally:
        algo.stop()


def test_default_policy_model_parameters_is_an_iterator():
    from rlx.algorithms.ppo import PPOConfig

    algo = PPOConfig().environment("CartPole-v1").training(**SMALL_PPO).build()
    try:
        model = algo.get_policy().model
        params = model.parameters()
        assert isinstance(next(params), nn.Parameter)
        assert len(list(model.parameters())) == len(list(algo.get_module().parameters()))
        assert isinstance(model.variables(), list) and isinstance(model.variables(as_dict=True), dict)
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- DQN's Q-value API


def test_dqn_model_exposes_base_features_q_value_and_state_value_heads():
    from rlx.algorithms.dqn import DQNConfig

    algo = DQNConfig().environment("CartPole-v1").training(model={"fcnet_hiddens": [32]}, hiddens=[16]).build()
    try:
        model = algo.get_policy().model
        model_out = model.from_batch({"obs": OBS})
        features = model_out[0]
        assert tuple(features.shape) == (1, 32)              # the base model's output, not Q-values
        torch.testing.assert_close(model({"obs": OBS})[0], features)
        scores, logits, dist = model.get_q_value_distributions(model_out)
        assert tuple(scores.shape) == (1, 2) and tuple(logits.shape) == (1, 2, 1)
        value = model.get_state_value(model_out)
        assert tuple(value.shape) == (1, 1)
        # Dueling: Q = V + A - mean(A), which is what the module acts on.
        q = value + scores - scores.mean(dim=1, keepdim=True)
        module_q = algo.get_module().forward_inference({"obs": torch.as_tensor(OBS, dtype=torch.float32)})
        torch.testing.assert_close(q, module_q["action_dist_inputs"])
        # The heads are torch modules over the Q-network's own layers, with a summary.
        head = model.q_value_head
        assert sum(p.numel() for p in head.parameters()) == 32 * 16 + 16 + 16 * 2 + 2
        text = head.summary(print_fn=None)
        assert f"Total params: {32 * 16 + 16 + 16 * 2 + 2:,}" in text and "(None, 2)" in text
        assert "Total params: " + f"{32 * 16 + 16 + 16 + 1:,}" in model.state_value_head.summary(print_fn=None)
        assert "(None, 32)" in model.base_model.summary(print_fn=None)
        torch.testing.assert_close(model.q_value_head(features)[0], scores)
        assert isinstance(next(model.parameters()), nn.Parameter)
    finally:
        algo.stop()


def test_distributional_dqn_q_value_distributions_follow_rllib():
    from rlx.algorithms.dqn import DQNConfig

    algo = DQNConfig().environment("CartPole-v1").training(num_atoms=5, v_min=-2.0, v_max=2.0, dueling=False,
                                                           model={"fcnet_hiddens": [16]}, hiddens=[16]).build()
    try:
        model = algo.get_policy().model
        model_out = model.from_batch({"obs": OBS})
        action_scores, z, support_logits, logits, probs = model.get_q_value_distributions(model_out)
        assert tuple(support_logits.shape) == (1, 2, 5) and tuple(probs.shape) == (1, 2, 5)
        torch.testing.assert_close(z, torch.linspace(-2.0, 2.0, 5))
        torch.testing.assert_close(probs.sum(-1), torch.ones(1, 2))
        module_q = algo.get_module().forward_inference({"obs": torch.as_tensor(OBS, dtype=torch.float32)})
        torch.testing.assert_close(action_scores, module_q["action_dist_inputs"])
        with pytest.raises(ValueError, match="dueling=False"):
            model.get_state_value(model.from_batch({"obs": OBS}))
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- learn_on_batch


def test_custom_workflow_sample_then_policy_learn_on_batch_trains_the_algorithms_weights():
    from rlx.algorithms.ppo import PPOConfig
    from rlx.callbacks import RLlibCallback

    seen = []

    class SeeBatches(RLlibCallback):
        def on_learn_on_batch(self, *, policy, train_batch, result, **kwargs):
            seen.append(len(train_batch))
            result["seen_by_callback"] = 1.0

    algo = PPOConfig().environment("CartPole-v1").training(**SMALL_PPO).callbacks(SeeBatches).build()
    try:
        worker = algo.workers.local_worker()
        policy = worker.get_policy()
        before = {k: v.copy() for k, v in algo.get_weights()["default_policy"].items()}
        batch = worker.sample()
        stats = policy.learn_on_batch(batch)
        assert np.isfinite(stats["learner_stats"]["total_loss"])
        assert stats["learner_stats"]["seen_by_callback"] == 1.0 and seen
        assert stats["num_agent_steps_trained"] == 128
        after = algo.get_weights()["default_policy"]
        assert any(not np.allclose(before[k], after[k]) for k in before)
        # The Policy shows (and acts with) the trained weights.
        for key, value in policy.get_weights().items():
            np.testing.assert_allclose(value, after[key])
    finally:
        algo.stop()


def test_dqn_policy_learns_on_a_sampled_batch_as_one_step_transitions():
    from rlx.algorithms.dqn import DQNConfig

    algo = DQNConfig().environment("CartPole-v1").training(model={"fcnet_hiddens": [16]}, hiddens=[16]).build()
    try:
        before = {k: v.copy() for k, v in algo.get_weights()["default_policy"].items()}
        batch = algo.workers.local_worker().sample(num_timesteps=32)
        stats = algo.get_policy().learn_on_batch(batch)
        assert np.isfinite(stats["learner_stats"]["qf_loss"]) and stats["num_agent_steps_trained"] == 32
        after = algo.get_weights()["default_policy"]
        assert any(not np.allclose(before[k], after[k]) for k in before)
    finally:
        algo.stop()


def test_multi_agent_policy_learns_on_its_part_of_a_multi_agent_batch():
    from rlx.algorithms.ppo import PPOConfig
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    algo = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *args, **kwargs: f"p{aid}")
            .training(**SMALL_PPO).build())
    try:
        before = algo.get_weights()
        batch = algo.workers.local_worker().sample()
        stats = algo.get_policy("p1").learn_on_batch(batch)
        assert np.isfinite(stats["learner_stats"]["total_loss"])
        after = algo.get_weights()
        assert all(np.allclose(before["p0"][k], after["p0"][k]) for k in before["p0"])
        assert any(not np.allclose(before["p1"][k], after["p1"][k]) for k in before["p1"])
    finally:
        algo.stop()


def test_learn_on_batch_of_a_policy_no_algorithm_trains_is_refused():
    import copy

    from rlx.algorithms.ppo import PPOConfig
    from rlx.policy.policy import Policy
    from rlx.utils.errors import RLXError

    algo = PPOConfig().environment("CartPole-v1").training(**SMALL_PPO).build()
    try:
        policy = algo.get_policy()
        orphan = Policy(copy.deepcopy(policy.module), policy.preprocessor, policy.filter, None, policy.config,
                        policy.observation_space, policy.action_space)
        with pytest.raises(RLXError, match="learn_on_batch.*local EnvRunner"):
            orphan.learn_on_batch(algo.workers.local_worker().sample())
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- filtered observations


def test_compute_action_recipe_filters_once():
    from rlx.algorithms.ppo import PPOConfig

    algo = (PPOConfig().environment("CartPole-v1").env_runners(observation_filter="MeanStdFilter")
            .training(**SMALL_PPO).build())
    try:
        algo.train()
        worker = algo.workers.local_worker()
        obs = np.array([0.05, 0.5, -0.03, -0.6], np.float32)
        # The seeds' compute_action: preprocess, filter, then the policy.
        preprocessed = worker.preprocessors["default_policy"].transform(obs)
        filtered = worker.filters["default_policy"](preprocessed, update=False)
        assert not np.allclose(filtered, obs)
        _, _, extra = algo.get_policy().compute_single_action(filtered, explore=False)
        _, _, expected = algo.compute_single_action(obs, explore=False, full_fetch=True)
        np.testing.assert_allclose(extra["action_dist_inputs"], expected["action_dist_inputs"], rtol=1e-6)
        np.testing.assert_allclose(algo.get_policy().filter_observation(obs), filtered, rtol=1e-6)
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- import_model


def test_import_model_loads_a_torch_state_dict_into_the_custom_model(tmp_path):
    SmallModel = small_model_class()
    algo = custom_model_algo(SmallModel, "import_pt_model")
    try:
        model = algo.get_policy().model
        trained = {k: torch.full_like(v, 0.25) for k, v in model.state_dict().items()}
        path = tmp_path / "my_weights.pt"
        torch.save(trained, path)
        algo.import_model(str(path))
        for key, value in model.state_dict().items():
            torch.testing.assert_close(value, trained[key])
        # The Learner trains from the imported weights.
        learner_weights = algo.get_weights()["default_policy"]
        np.testing.assert_allclose(learner_weights["model.logits.weight"], 0.25)
    finally:
        algo.stop()


def test_import_model_reads_h5_datasets_named_like_the_state_dict(tmp_path):
    h5py = pytest.importorskip("h5py")
    SmallModel = small_model_class()
    algo = custom_model_algo(SmallModel, "import_h5_model")
    try:
        model = algo.get_policy().model
        path = tmp_path / "my_weights.h5"
        with h5py.File(path, "w") as f:
            for key, value in model.state_dict().items():
                f.create_dataset(key.replace(".", "/"), data=np.full(tuple(value.shape), -0.5, np.float32))
        algo.import_model(str(path))
        assert all(torch.all(v == -0.5) for v in model.state_dict().values())
    finally:
        algo.stop()


def test_import_model_uses_the_models_own_import_from_h5(tmp_path):
    h5py = pytest.importorskip("h5py")
    base = small_model_class()

    class KerasLayoutModel(base):
        def import_from_h5(self, h5_file):
            with h5py.File(h5_file, "r") as f:  # a Keras-style layout: kernels are [in, out]
                self.logits.weight.data.copy_(torch.as_tensor(np.asarray(f["logits/kernel:0"])).T)

    algo = custom_model_algo(KerasLayoutModel, "keras_layout_model")
    try:
        kernel = np.arange(16, dtype=np.float32).reshape(8, 2)
        path = tmp_path / "keras.h5"
        with h5py.File(path, "w") as f:
            f.create_dataset("logits/kernel:0", data=kernel)
        algo.import_model(str(path))
        torch.testing.assert_close(algo.get_policy().model.logits.weight, torch.as_tensor(kernel.T))
    finally:
        algo.stop()


def test_import_model_errors_name_the_problem(tmp_path):
    from rlx.algorithms.ppo import PPOConfig

    algo = PPOConfig().environment("CartPole-v1").training(**SMALL_PPO).build()
    try:
        with pytest.raises(FileNotFoundError, match="no file"):
            algo.import_model(str(tmp_path / "missing.pt"))
        (tmp_path / "weights.ckpt").write_bytes(b"x")
        with pytest.raises(ValueError, match=r"\.h5/\.hdf5.*\.pt/\.pth"):
            algo.import_model(str(tmp_path / "weights.ckpt"))
        torch.save({"not_a_layer.weight": torch.zeros(3)}, tmp_path / "other.pt")
        with pytest.raises(ValueError, match="missing .*unknown not_a_layer.weight"):
            algo.import_model(str(tmp_path / "other.pt"))
        torch.save({"saved_on": datetime.date(2020, 1, 1)}, tmp_path / "pickled.pt")  # not a tensor type
        with pytest.raises(ValueError, match="weights_only=True"):
            algo.import_model(str(tmp_path / "pickled.pt"))
        state = {k: torch.zeros(1) for k in algo.get_module().state_dict()}
        torch.save(state, tmp_path / "shapes.pt")
        with pytest.raises(ValueError, match=r"shapes in 'shapes.pt' differ"):
            algo.import_model(str(tmp_path / "shapes.pt"))
    finally:
        algo.stop()


def test_import_model_loads_the_default_module(tmp_path):
    from rlx.algorithms.ppo import PPOConfig

    algo = PPOConfig().environment("CartPole-v1").training(**SMALL_PPO).build()
    try:
        state = {k: torch.full_like(v, 0.125) for k, v in algo.get_module().state_dict().items()}
        torch.save(state, tmp_path / "module.pth")
        algo.import_model(str(tmp_path / "module.pth"))
        for value in algo.get_weights()["default_policy"].values():
            np.testing.assert_allclose(value, 0.125)
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- callbacks and aliases


def test_memory_tracking_callbacks_report_process_memory_per_episode():
    from rlx.algorithms.callbacks import MemoryTrackingCallbacks
    from rlx.algorithms.ppo import PPOConfig

    algo = (PPOConfig().environment("CartPole-v1").training(train_batch_size=256, minibatch_size=128, num_epochs=1)
            .callbacks(MemoryTrackingCallbacks).build())
    try:
        metrics = algo.train()["custom_metrics"]
        assert metrics["tracemalloc/worker/rss_mean"] > 0 and metrics["tracemalloc/worker/vms_mean"] > 0
        assert any(k.endswith("/size_mean") and not k.startswith("tracemalloc/worker/") for k in metrics)
    finally:
        algo.stop()


def test_trainer_era_aliases():
    from rlx.agents.trainer import COMMON_CONFIG, Trainer, with_common_config
    from rlx.agents.trainer_config import TrainerConfig
    from rlx.algorithms.algorithm import Algorithm
    from rlx.algorithms.algorithm_config import AlgorithmConfig

    assert Trainer is Algorithm and TrainerConfig is AlgorithmConfig
    assert COMMON_CONFIG["gamma"] == AlgorithmConfig().gamma
    merged = with_common_config({"lr": 0.01, "model": {"fcnet_hiddens": [8]}})
    assert merged["lr"] == 0.01 and merged["model"]["fcnet_hiddens"] == [8]
    assert merged["model"]["fcnet_activation"] == COMMON_CONFIG["model"]["fcnet_activation"]
    assert COMMON_CONFIG["lr"] != 0.01 and COMMON_CONFIG["model"]["fcnet_hiddens"] != [8]
    assert AlgorithmConfig.from_dict(merged).lr == 0.01


def test_python_m_rlx_train_runs_the_train_command(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    help_text = subprocess.run([sys.executable, "-m", "rlx.train", "--help"], capture_output=True, text=True,
                               timeout=120, env=env)
    assert help_text.returncode == 0 and help_text.stdout.startswith("usage: rlx train")
    done = subprocess.run(
        [sys.executable, "-m", "rlx.train", "--run", "PPO", "--env", "CartPole-v1", "--stop",
         '{"training_iteration": 1}', "--config", json.dumps(SMALL_PPO), "--storage-path", str(tmp_path),
         "--no-progress"],
        capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.rglob("result.json"))
