"""Meta-learning: DifferentiableAlgorithmConfig, DifferentiableLearnerConfig, TorchDifferentiableLearner's
functional inner steps and TorchMetaLearner's outer gradient through them (MAML on sinusoids)."""
from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch


def _sinusoid_module_spec():
    from torch import nn

    from rlx.core.columns import Columns
    from rlx.core.rl_module.rl_module import RLModuleSpec
    from rlx.core.rl_module.torch.torch_rl_module import TorchRLModule

    class SinusoidModule(TorchRLModule):
        def setup(self):
            self.net = nn.Sequential(nn.Linear(1, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(), nn.Linear(40, 1))

        def _forward(self, batch, **kwargs):
            return {"y_pred": self.net(batch[Columns.OBS])}

    space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    return RLModuleSpec(module_class=SinusoidModule, observation_space=space, action_space=space)


def _learner_classes():
    from rlx.core.learner.torch.torch_differentiable_learner import TorchDifferentiableLearner
    from rlx.core.learner.torch.torch_meta_learner import TorchMetaLearner

    class MSEDifferentiableLearner(TorchDifferentiableLearner):
        def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
            return torch.nn.functional.mse_loss(fwd_out["y_pred"], batch["y"])

    class MSEMetaLearner(TorchMetaLearner):
        def compute_loss_for_module(self, *, module_id, config, batch, fwd_out, others_loss_per_module=None):
            return torch.nn.functional.mse_loss(fwd_out["y_pred"], batch["y"])

    return MSEDifferentiableLearner, MSEMetaLearner


def _task(rng, n):
    """(meta batch, inner batch) of one sinusoid task: n points each."""
    from rlx.policy.sample_batch import MultiAgentBatch, SampleBatch

    amplitude, phase = rng.uniform(0.1, 5.0), rng.uniform(0.0, np.pi)
    x = rng.uniform(-5.0, 5.0, (2 * n, 1))
    y = amplitude * np.sin(x - phase)
    return [MultiAgentBatch({"default_policy": SampleBatch({"obs": torch.tensor(x[part], dtype=torch.float32),
                                                            "y": torch.tensor(y[part], dtype=torch.float32)})},
                            env_steps=n) for part in (slice(0, n), slice(n, None))]


def _meta_learner(inner_lr=0.01, outer_lr=0.001, n=10, **training):
    from rlx.algorithms.algorithm_config import DifferentiableAlgorithmConfig
    from rlx.core.learner.differentiable_learner_config import DifferentiableLearnerConfig

    inner_cls, meta_cls = _learner_classes()
    config = (DifferentiableAlgorithmConfig()
              .learners(differentiable_learner_configs=[DifferentiableLearnerConfig(inner_cls, lr=inner_lr,
                                                                                    minibatch_size=n)])
              .training(lr=outer_lr, train_batch_size=n, minibatch_size=n, **training))
    learner = meta_cls(config=config, module_spec=_sinusoid_module_spec())
    learner.build()
    return learner


def _held_out_loss(module, tasks, steps, lr=0.01):
    """Mean query-set MSE over `tasks` after `steps` SGD steps on each task's support set."""
    losses = []
    for query, support in tasks:
        adapted = copy.deepcopy(module)
        optimizer = torch.optim.SGD(adapted.parameters(), lr=lr)
        for _ in range(steps):
            loss = torch.nn.functional.mse_loss(adapted(support["default_policy"])["y_pred"],
                                                support["default_policy"]["y"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            losses.append(float(torch.nn.functional.mse_loss(adapted(query["default_policy"])["y_pred"],
                                                             query["default_policy"]["y"])))
    return float(np.mean(losses))


def test_maml_learns_an_initialisation_that_adapts_to_held_out_sinusoids():
    from rlx.core.learner.training_data import TrainingData

    torch.manual_seed(0)
    learner = _meta_learner()
    module = learner.module["default_policy"]
    held_out = [_task(np.random.default_rng(1000 + i), 10) for i in range(30)]
    adapted_before = _held_out_loss(module, held_out, steps=5)
    rng = np.random.default_rng(0)
    for _ in range(1200):
        meta_batch, inner_batch = _task(rng, 10)
        results = learner.update(training_data=TrainingData(batch=meta_batch),
                                 others_training_data=[TrainingData(batch=inner_batch)])
    assert np.isfinite(results["default_policy"]["total_loss"].peek())
    unadapted = _held_out_loss(module, held_out, steps=0)
    adapted = _held_out_loss(module, held_out, steps=5)
    # A few steps on 10 points of a new task help the meta-trained start a lot ...
    assert adapted < 0.8 * unadapted, (adapted, unadapted)
    # ... and far more than they help the start before meta-training.
    assert adapted < 0.65 * adapted_before, (adapted, adapted_before)


def test_outer_gradient_flows_through_the_functional_inner_step():
    """One meta update with SGD(lr=1) moves the parameters by exactly the MAML gradient:
    d/dθ L_query(θ - α ∇L_support(θ)), second-order terms included; the inner step itself
    changes no parameter of the module."""
    from rlx.core.learner.training_data import TrainingData

    torch.manual_seed(1)
    alpha = 0.05
    learner = _meta_learner(inner_lr=alpha, outer_lr=1.0, optimizer={"type": "sgd"})
    module = learner.module["default_policy"]
    query, support = _task(np.random.default_rng(7), 10)
    before = {k: v.detach().clone() for k, v in module.named_parameters()}

    params = dict(module.named_parameters())
    names = list(params)
    inner_loss = torch.nn.functional.mse_loss(
        torch.func.functional_call(module, params, (support["default_policy"],))["y_pred"], support["default_policy"]["y"])
    grads = torch.autograd.grad(inner_loss, [params[k] for k in names], create_graph=True)
    adapted = {k: params[k] - alpha * g for k, g in zip(names, grads)}
    outer_loss = torch.nn.functional.mse_loss(
        torch.func.functional_call(module, adapted, (query["default_policy"],))["y_pred"], query["default_policy"]["y"])
    maml_grad = dict(zip(names, torch.autograd.grad(outer_loss, [params[k] for k in names], retain_graph=True)))
    first_order = dict(zip(names, torch.autograd.grad(outer_loss, [adapted[k] for k in names])))
    assert any(not torch.allclose(maml_grad[k], first_order[k], atol=1e-6) for k in names)

    learner.update(training_data=TrainingData(batch=query), others_training_data=[TrainingData(batch=support)])
    for name, param in module.named_parameters():
        assert torch.allclose(param.detach(), before[name] - maml_grad[name], atol=1e-5), name


def test_inner_learner_steps_are_functional_and_respect_policies_to_update():
    from rlx.core.learner.training_data import TrainingData

    learner = _meta_learner(inner_lr=0.1)
    inner = learner.others[0]
    module = learner.module["default_policy"]
    before = {k: v.detach().clone() for k, v in module.named_parameters()}
    _, support = _task(np.random.default_rng(3), 10)
    params = learner._clone_named_parameters()
    new_params, losses, _ = inner.update(params=params, training_data=TrainingData(batch=support))
    assert set(losses) == {"default_policy"} and losses["default_policy"].requires_grad
    changed = [k for k in before if not torch.allclose(new_params["default_policy"][k], before[k])]
    assert changed  # the returned tensors moved ...
    for name, param in module.named_parameters():  # ... the module's did not
        assert torch.equal(param.detach(), before[name])
    inner.learner_config.policies_to_update = ["some_other_module"]
    kept, _, _ = inner.update(params=params, training_data=TrainingData(batch=support))
    assert all(kept["default_policy"][k] is params["default_policy"][k] for k in before)


def test_config_and_learner_errors_are_clear():
    from rlx.algorithms.algorithm_config import DifferentiableAlgorithmConfig
    from rlx.core.learner.differentiable_learner_config import DifferentiableLearnerConfig
    from rlx.core.learner.torch.torch_learner import TorchLearner
    from rlx.core.learner.training_data import TrainingData
    from rlx.utils.errors import ConfigError

    with pytest.raises(ConfigError, match="subclass of DifferentiableLearner"):
        DifferentiableLearnerConfig(TorchLearner)
    with pytest.raises(ConfigError, match="DifferentiableLearnerConfig instances only"):
        DifferentiableAlgorithmConfig().learners(differentiable_learner_configs=[{"lr": 0.1}])
    inner_cls, meta_cls = _learner_classes()
    config = DifferentiableAlgorithmConfig().learners(
        differentiable_learner_configs=[DifferentiableLearnerConfig(inner_cls, lr=0.1)])
    assert config.get_differentiable_learner_classes() == [inner_cls]
    config.validate()  # no env needed for a meta learner on its own
    learner = meta_cls(config=config, module_spec=_sinusoid_module_spec())
    query, support = _task(np.random.default_rng(0), 4)
    with pytest.raises(RuntimeError, match="build"):
        learner.update(training_data=TrainingData(batch=query))
    learner.build()
    with pytest.raises(ValueError, match="one TrainingData per learner"):
        learner.update(training_data=TrainingData(batch=query), others_training_data=[])
    with pytest.raises(ValueError, match="exactly one of"):
        learner.update(training_data=TrainingData(batch=query, batches=[query]))
