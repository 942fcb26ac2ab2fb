"""A user's MultiRLModule subclass whose forward couples its modules (RLlib's shared-encoder
pattern: `MultiRLModuleSpec(multi_rl_module_class=...)` with a shared encoder that no agent maps
to and one head per policy): EnvRunners act through the MultiRLModule's forward on
{module_id: batch}, one Learner trains every module (with the one optimizer a learner's
`configure_optimizers` registers), and checkpoints keep the subclass and its weights."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

ENCODER = "shared_encoder"


def _shared_encoder_setup(calls: list, embedding_dim: int = 8, one_optimizer: bool = True):
    """(config, the MultiRLModule subclass, the learner class) of a 2-agent CartPole VPG run
    whose policies p0 and p1 share an encoder; the subclass appends the module ids of every
    acting forward's batch to `calls`. Classes are made anew by each call (a test's own)."""
    from rlx.core.columns import Columns
    from rlx.core.models.base import ENCODER_OUT
    from rlx.core.rl_module.multi_rl_module import MultiRLModule, MultiRLModuleSpec
    from rlx.core.rl_module.rl_module import RLModuleSpec
    from rlx.core.rl_module.torch import TorchRLModule
    from rlx.examples.algorithms.classes.vpg import VPGConfig
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole
    from rlx.examples.learners.classes.vpg_torch_learner import VPGTorchLearner

    class Encoder(TorchRLModule):
        def setup(self):
            self.net = torch.nn.Linear(self.observation_space.shape[0], self.model_config["embedding_dim"])

        def _forward(self, batch, **kwargs):
            return {ENCODER_OUT: torch.tanh(self.net(batch[Columns.OBS].float()))}

    class Head(TorchRLModule):
        def setup(self):
            self.pi = torch.nn.Linear(self.model_config["embedding_dim"], self.action_space.n)

        def _forward(self, batch, **kwargs):
            return {Columns.ACTION_DIST_INPUTS: self.pi(batch[ENCODER_OUT])}

    class SharedEncoderMulti(MultiRLModule):
        #: When set, p1's logits favour action 1 so strongly that it always takes it (test (a)).
        push_p1_to_action_1 = False

        def setup(self):
            super().setup()
            self.encoder = self._rl_modules[ENCODER]

        def _run(self, batch, forward_type):
            out = {}
            for policy_id, policy_batch in batch.items():
                policy_batch[ENCODER_OUT] = self.encoder._forward(policy_batch)[ENCODER_OUT]
                out[policy_id] = getattr(self._rl_modules[policy_id], forward_type)(policy_batch)
            if self.push_p1_to_action_1 and "p1" in out and forward_type != "_forward_train":
                logits = out["p1"][Columns.ACTION_DIST_INPUTS]
                out["p1"][Columns.ACTION_DIST_INPUTS] = logits + torch.tensor([-50.0, 50.0])
            return out

        def _forward_inference(self, batch, **kwargs):
            calls.append(sorted(batch))
            return self._run(batch, "_forward_inference")

        def _forward_exploration(self, batch, **kwargs):
            calls.append(sorted(batch))
            return self._run(batch, "_forward_exploration")

        def _forward_train(self, batch, **kwargs):
            return self._run(batch, "_forward_train")

    class OneOptimizerLearner(VPGTorchLearner):
        def configure_optimizers(self):
            params = self.get_parameters(self.module)
            self.register_optimizer(optimizer_name="shared", optimizer=torch.optim.Adam(params), params=params,
                                    lr_or_lr_schedule=self.config.lr)

    obs_space, act_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2)
    head = {"embedding_dim": embedding_dim}
    spec = MultiRLModuleSpec(multi_rl_module_class=SharedEncoderMulti, rl_module_specs={
        ENCODER: RLModuleSpec(module_class=Encoder, model_config={"embedding_dim": embedding_dim},
                              observation_space=obs_space, action_space=act_space),
        "p0": RLModuleSpec(module_class=Head, model_config=head),
        "p1": RLModuleSpec(module_class=Head, model_config=head),
    })
    config = (VPGConfig()
              .environment(MultiAgentCartPole, env_config={"num_agents": 2})
              .env_runners(num_env_runners=0)
              .training(num_episodes_per_train_batch=2, lr=0.01,
                        learner_class=OneOptimizerLearner if one_optimizer else None)
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"p{agent_id}")
              .rl_module(rl_module_spec=spec)
              .debugging(seed=0))
    return config, SharedEncoderMulti, OneOptimizerLearner


def test_env_runner_acts_through_the_multi_rl_modules_forward():
    calls: list = []
    config, cls, _ = _shared_encoder_setup(calls)
    algo = config.build()
    try:
        runner = algo.env_runner
        assert type(runner.module) is cls and set(runner.module.keys()) == {ENCODER, "p0", "p1"}
        assert set(runner.slots) == {"p0", "p1"}  # the encoder is no policy: nothing acts with it alone
        cls.push_p1_to_action_1 = True
        episodes = runner.sample(num_timesteps=60, explore=True)
        # One forward of the MultiRLModule per env step with every acting policy's batch; never the encoder's.
        assert calls and all(set(c) <= {"p0", "p1"} for c in calls) and ["p0", "p1"] in calls
        actions = {aid: np.concatenate([np.asarray(ep.get_actions(env_steps=False)[aid]) for ep in episodes])
                   for aid in (0, 1)}
        assert set(np.unique(actions[1])) == {1}  # agent 1 (policy p1) acted on the MultiRLModule's output
        assert set(np.unique(actions[0])) == {0, 1}
        # The old API's per-policy view acts through the MultiRLModule too.
        calls.clear()
        assert algo.compute_single_action(np.zeros(4, np.float32), policy_id="p1", explore=False) == 1
        assert calls == [["p1"]]
    finally:
        cls.push_p1_to_action_1 = False
        algo.stop()


def test_one_iteration_trains_the_encoder_and_both_heads_with_the_one_optimizer():
    from rlx.core.learner.joint_container import JointLearnerContainer

    config, cls, learner_cls = _shared_encoder_setup([])
    algo = config.build()
    try:
        learners = algo.learners
        assert isinstance(learners, JointLearnerContainer) and type(learners.joint) is learner_cls
        assert list(learners.joint.optimizers) == ["shared"]
        assert algo.learner_group.foreach_learner(lambda learner: learner) == [learners.joint]
        assert learners.joint.module is algo.env_runner.module  # RLlib's Learner holds the whole MultiRLModule
        every_param = {id(p) for p in algo.env_runner.module.parameters()}
        assert {id(p) for p in learners.joint.optimizers["shared"].param_groups[0]["params"]} == every_param
        before = algo.get_weights()
        result = algo.train()
        after = algo.get_weights()
        for mid in (ENCODER, "p0", "p1"):
            assert any(not np.allclose(before[mid][k], after[mid][k]) for k in before[mid]), mid
        assert {"p0", "p1"} <= set(result["learners"])
        assert all(np.isfinite(result["learners"][mid]["total_loss"]) for mid in ("p0", "p1"))
    finally:
        algo.stop()


def test_without_a_custom_learner_every_module_gets_its_own_optimizer():
    config, _, _ = _shared_encoder_setup([], one_optimizer=False)
    algo = config.build()
    try:
        joint = algo.learners.joint
        assert sorted(joint.optimizers) == sorted(f"{mid}_default" for mid in (ENCODER, "p0", "p1"))
        encoder = algo.env_runner.module[ENCODER]
        assert joint.get_optimizer(ENCODER).param_groups[0]["params"] == list(encoder.parameters())
        before = [p.detach().clone() for p in encoder.parameters()]
        algo.train()
        assert any(not torch.equal(b, p) for b, p in zip(before, encoder.parameters()))
    finally:
        algo.stop()


def test_checkpoint_round_trip_keeps_the_subclass_and_every_modules_weights(tmp_path):
    config, cls, _ = _shared_encoder_setup([])
    algo = config.build()
    try:
        algo.train()
        weights = algo.get_weights()
        optimizer_state = algo.learners.joint.optimizers["shared"].state_dict()["state"]
        path = algo.save(str(tmp_path / "checkpoint"))
    finally:
        algo.stop()
    fresh = config.build()
    try:
        assert any(not np.allclose(weights["p0"][k], fresh.get_weights()["p0"][k]) for k in weights["p0"])
        fresh.restore(path)
        assert type(fresh.env_runner.module) is cls and fresh.learners.joint.module is fresh.env_runner.module
        restored = fresh.get_weights()
        for mid in (ENCODER, "p0", "p1"):
            assert all(np.array_equal(weights[mid][k], restored[mid][k]) for k in weights[mid]), mid
        state = fresh.learners.joint.optimizers["shared"].state_dict()["state"]
        assert set(state) == set(optimizer_state)
        assert all(torch.equal(state[i]["exp_avg"], optimizer_state[i]["exp_avg"]) for i in state)
    finally:
        fresh.stop()


def test_rlx_multi_rl_module_runs_each_module_alone():
    from rlx.core.rl_module.multi_rl_module import MultiRLModule

    class OnlySetup(MultiRLModule):
        def setup(self):
            super().setup()

    class OwnForward(MultiRLModule):
        def _forward_inference(self, batch, **kwargs):
            return super()._forward_inference(batch, **kwargs)

    assert not MultiRLModule.runs_modules_jointly() and not OnlySetup.runs_modules_jointly()
    assert OwnForward.runs_modules_jointly()


def test_a_module_that_is_no_policy_needs_its_spaces_in_its_spec():
    from rlx.core.rl_module.rl_module import RLModuleSpec
    from rlx.utils.errors import EnvError

    config, _, _ = _shared_encoder_setup([])
    spec = config.rl_module_spec
    specs = dict(spec.rl_module_specs)
    specs[ENCODER] = RLModuleSpec(module_class=specs[ENCODER].module_class, model_config={"embedding_dim": 8})
    spec.rl_module_specs = spec.module_specs = specs
    with pytest.raises(EnvError, match="shared_encoder.*observation_space"):
        config.rl_module(rl_module_spec=spec).build()


@pytest.mark.slow
def test_policies_sharing_an_encoder_learn_cartpole():
    # About 4 s of CPU: VPG with one optimizer over the encoder and both heads reaches twice a
    # random policy's combined return (about 40) in well under 30 iterations.
    config, _, _ = _shared_encoder_setup([], embedding_dim=16)
    algo = config.training(num_episodes_per_train_batch=10, lr=0.02).build()
    try:
        best = 0.0
        for _ in range(30):
            best = max(best, algo.train()["env_runners"]["episode_return_mean"])
            if best >= 80.0:
                break
        assert best >= 80.0
    finally:
        algo.stop()


def test_a_learner_with_its_own_update_from_batch_is_refused_for_a_joint_multi_rl_module():
    from rlx.algorithms.pg import PGConfig
    from rlx.utils.errors import NotSupportedYetError

    config, _, _ = _shared_encoder_setup([], one_optimizer=False)
    pg = (PGConfig().environment(config.env, env_config=config.env_config).env_runners(num_env_runners=0)
          .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=config.policy_mapping_fn)
          .rl_module(rl_module_spec=config.rl_module_spec))
    with pytest.raises(NotSupportedYetError, match="PGLearner.*compute_loss_for_module"):
        pg.build()


def test_policies_to_train_leaves_the_other_head_alone():
    config, _, _ = _shared_encoder_setup([], one_optimizer=False)
    algo = config.multi_agent(policies_to_train=["p0"]).build()
    try:
        before = algo.get_weights()
        result = algo.train()
        after = algo.get_weights()
        # (VPG's learner reports every module's mean weight; only trained modules have a loss.)
        assert "total_loss" in result["learners"]["p0"] and "total_loss" not in result["learners"].get("p1", {})
        assert all(np.array_equal(before["p1"][k], after["p1"][k]) for k in before["p1"])
        for mid in (ENCODER, "p0"):
            assert any(not np.allclose(before[mid][k], after[mid][k]) for k in before[mid]), mid
    finally:
        algo.stop()
