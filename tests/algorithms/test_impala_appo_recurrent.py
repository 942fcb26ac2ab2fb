"""IMPALA and APPO with recurrent modules (model use_lstm / use_attention).

- Learning: with an LSTM (and APPO with attention) both learn RepeatAfterMeEnv, which needs the
  previous observation; a feed-forward policy stays near 0 on the same budget.
- Mechanics: the learner's V-trace loss on an LSTM equals a direct step-by-step unroll computed
  here (sequences covering the fragment; episode starts inside it restart from the stored state);
  with consistent stored states shorter sequences give the same loss; padding rows change neither
  the loss nor the gradients; APPO's target policy runs over the same sequences.
- Asynchronous sampling: a remote runner's consecutive fragments continue each sub-env's state.
- Checkpoints restore the module (and APPO's target network); unsupported combinations fail clearly.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rlx.algorithms.appo import APPOConfig
from rlx.algorithms.impala import IMPALAConfig
from rlx.core.attention_models import AttentionActorCriticModule
from rlx.core.columns import Columns
from rlx.core.learner.torch.torch_learner import TorchLearner
from rlx.core.lstm_models import LSTMActorCriticModule
from rlx.core.rl_module.apis import TARGET_NETWORK_ACTION_DIST_INPUTS
from rlx.env.env_runner import state_column
from rlx.examples.envs.classes.repeat_after_me_env import RepeatAfterMeEnv
from rlx.utils.errors import ConfigError, NotSupportedYetError
from test_impala_appo import vtrace_reference

LSTM = {"use_lstm": True, "lstm_cell_size": 32, "fcnet_hiddens": [32], "max_seq_len": 20}
ATTENTION = {"use_attention": True, "attention_dim": 32, "attention_memory_inference": 10,
             "attention_memory_training": 10, "fcnet_hiddens": [32], "max_seq_len": 20}
SMALL_LSTM = {"use_lstm": True, "lstm_cell_size": 8, "fcnet_hiddens": [8], "max_seq_len": 100}
SMALL_ATTENTION = {"use_attention": True, "attention_dim": 8, "attention_memory_inference": 4,
                   "attention_memory_training": 4, "attention_head_dim": 4, "attention_position_wise_mlp_dim": 8,
                   "fcnet_hiddens": [8], "max_seq_len": 3}
GAMMA = 0.9


# ----------------------------------------------------------------------------- learning


def _repeat_config(config_cls, model, lr=3e-3):
    # +1 for repeating the token seen one step earlier, -1 otherwise (20 steps): about 0 without memory.
    return (config_cls().environment(RepeatAfterMeEnv, env_config={"episode_len": 20})
            .env_runners(num_envs_per_env_runner=8, rollout_fragment_length=20)
            .training(model=model, train_batch_size=320, lr=lr, entropy_coeff=0.0)
            .reporting(min_time_s_per_iteration=0)
            .debugging(seed=0))


def _best_return(algo, max_env_steps, target):
    best = -np.inf
    while True:
        result = algo.train()
        best = max(best, result["env_runners"].get("episode_return_mean", -np.inf))
        if best >= target or result["num_env_steps_sampled_lifetime"] >= max_env_steps:
            return best


@pytest.mark.slow
@pytest.mark.parametrize("config_cls,model,lr", [(IMPALAConfig, LSTM, 3e-3), (APPOConfig, LSTM, 3e-3),
                                                 (APPOConfig, ATTENTION, 1e-3)], ids=["impala-lstm", "appo-lstm",
                                                                                       "appo-attention"])
def test_recurrent_modules_learn_to_repeat_the_previous_observation(config_cls, model, lr):
    algo = _repeat_config(config_cls, model, lr).build()
    try:
        assert isinstance(algo.get_module(), LSTMActorCriticModule if "use_lstm" in model
                          else AttentionActorCriticModule)
        assert _best_return(algo, 64_000, 15.0) >= 15.0
    finally:
        algo.stop()


@pytest.mark.slow
def test_a_feedforward_policy_cannot_learn_the_same_task_on_the_same_budget():
    algo = _repeat_config(IMPALAConfig, {"fcnet_hiddens": [32]}).build()
    try:
        assert _best_return(algo, 64_000, 15.0) < 5.0
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- loss mechanics


def _algo(config_cls=IMPALAConfig, model=SMALL_LSTM, **training):
    return (config_cls().environment("CartPole-v1")
            .training(model=model, gamma=GAMMA, entropy_coeff=0.01, vf_loss_coeff=0.5, **training)
            .debugging(seed=0).build())


def _batch(module, T=8, B=2, seed=0):
    """A time-major batch with a termination (column 0 after t=2) and a truncation (column 1 after
    t=4) inside; stored states: random at t=0, initial at episode starts, junk everywhere else."""
    rng = np.random.default_rng(seed)
    terminated, truncated = np.zeros((T, B), bool), np.zeros((T, B), bool)
    terminated[2, 0] = True
    truncated[4, 1] = True
    batch = {
        Columns.OBS: rng.normal(size=(T, B, 4)).astype(np.float32),
        Columns.NEXT_OBS: rng.normal(size=(T, B, 4)).astype(np.float32),
        Columns.ACTIONS: rng.integers(0, 2, size=(T, B)),
        Columns.ACTION_LOGP: rng.normal(-0.7, 0.3, size=(T, B)).astype(np.float32),
        Columns.REWARDS: rng.normal(1.0, 0.5, size=(T, B)).astype(np.float32),
        Columns.TERMINATEDS: terminated,
        Columns.TRUNCATEDS: truncated,
    }
    batch[Columns.NEXT_OBS][:-1] = batch[Columns.OBS][1:]
    for name, init in module.get_initial_state().items():
        column = rng.normal(size=(T, B) + init.shape).astype(np.float32)
        if name == "seen":  # the attention memory's count of steps of the current episode
            column = rng.integers(0, 5, size=(T, B) + init.shape).astype(np.float32)
        column[3, 0] = column[5, 1] = init  # the EnvRunner stores the initial state at episode starts
        batch[state_column(name)] = column
    return batch


def _step(module, obs, state):
    """One step of the module on a single observation: (logits, value, state after the step)."""
    batch = {Columns.OBS: torch.as_tensor(obs)[None, None],
             Columns.STATE_IN: {k: torch.as_tensor(v)[None] for k, v in state.items()}}
    with torch.no_grad():
        out = module.forward_inference(batch)
        value = module.compute_values(batch)
    state_out = {k: v[0] for k, v in out[Columns.STATE_OUT].items()}
    return out[Columns.ACTION_DIST_INPUTS][0, 0], float(value[0, 0]), state_out


def _direct_unroll(module, batch):
    """(logits [T, B, n], values [T, B], next values [T, B]) by stepping the module through each
    column, from the stored state at the column's start and at each episode start."""
    T, B = batch[Columns.REWARDS].shape
    names = list(module.get_initial_state())
    ends = batch[Columns.TERMINATEDS] | batch[Columns.TRUNCATEDS]
    logits, values, next_values = [[None] * B for _ in range(T)], np.zeros((T, B)), np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            if t == 0 or ends[t - 1, b]:
                state = {k: batch[state_column(k)][t, b] for k in names}
            logits[t][b], values[t, b], state = _step(module, batch[Columns.OBS][t, b], state)
            if ends[t, b] or t == T - 1:  # V of the observation after the cut, with the state carried on
                next_values[t, b] = _step(module, batch[Columns.NEXT_OBS][t, b], state)[1]
    next_values[:-1] = np.where(ends[:-1], next_values[:-1], values[1:])
    return torch.stack([torch.stack(row) for row in logits]), values, next_values


def _learner_loss(learner, config, batch):
    layout = learner.sequence_layout(batch)
    data = learner.loss_inputs(batch, layout)
    fwd = learner.forward_minibatch(data, layout.for_columns(np.arange(batch[Columns.REWARDS].shape[1])))
    return learner.compute_loss_for_module(module_id="default_policy", config=config, batch=data, fwd_out=fwd)


def _impala_loss_by_hand(module, batch, config):
    logits, values, next_values = _direct_unroll(module, batch)
    T, B = values.shape
    dist = module.get_train_action_dist_cls().from_logits(logits.reshape(T * B, -1))
    logp = dist.logp(torch.as_tensor(batch[Columns.ACTIONS]).reshape(-1)).numpy().reshape(T, B)
    entropy = dist.entropy().numpy()
    done = batch[Columns.TERMINATEDS] | batch[Columns.TRUNCATEDS]
    pi, vf = [], []
    for b in range(B):
        vs, adv = vtrace_reference(logp[:, b] - batch[Columns.ACTION_LOGP][:, b], batch[Columns.REWARDS][:, b],
                                   values[:, b], next_values[:, b], batch[Columns.TERMINATEDS][:, b], done[:, b],
                                   GAMMA, config.vtrace_clip_rho_threshold, config.vtrace_clip_pg_rho_threshold)
        pi.append(-logp[:, b] * adv)
        vf.append(0.5 * (values[:, b] - vs) ** 2)
    return float(np.mean(pi) + config.vf_loss_coeff * np.mean(vf) - 0.01 * entropy.mean())


def test_recurrent_vtrace_loss_equals_a_direct_unroll():
    algo = _algo()
    try:
        learner = algo.learner
        learner._curr_entropy_coeff = 0.01
        module = learner.rl_module
        batch = _batch(module)
        loss = _learner_loss(learner, algo.config, batch).item()
        assert loss == pytest.approx(_impala_loss_by_hand(module, batch, algo.config), rel=1e-5, abs=1e-5)
        # The stored state at the fragment's start matters: from zeros the loss is another.
        zeroed = {**batch, **{state_column(k): np.zeros_like(batch[state_column(k)])
                              for k in module.get_initial_state()}}
        assert _learner_loss(learner, algo.config, zeroed).item() != pytest.approx(loss, rel=1e-4)
    finally:
        algo.stop()


def test_shorter_sequences_start_from_the_stored_states():
    algo = _algo()
    try:
        learner = algo.learner
        module = learner.rl_module
        batch = _batch(module)
        full = _learner_loss(learner, algo.config, batch).item()
        # Stored states as the EnvRunner writes them (the state before each step) make sequences of
        # 3 steps give the loss of sequences covering the fragment; the junk ones do not.
        ends = batch[Columns.TERMINATEDS] | batch[Columns.TRUNCATEDS]
        consistent = dict(batch)
        names = list(module.get_initial_state())
        columns = {k: batch[state_column(k)].copy() for k in names}
        T, B = ends.shape
        for b in range(B):
            state = {k: columns[k][0, b] for k in names}
            for t in range(T):
                if t > 0 and ends[t - 1, b]:
                    state = {k: columns[k][t, b] for k in names}
                for k in names:
                    columns[k][t, b] = state[k]
                state = {k: v.numpy() for k, v in _step(module, batch[Columns.OBS][t, b], state)[2].items()}
        consistent.update({state_column(k): v for k, v in columns.items()})
        module.model_config["max_seq_len"] = 3
        assert _learner_loss(learner, algo.config, consistent).item() == pytest.approx(full, rel=1e-5, abs=1e-6)
        assert _learner_loss(learner, algo.config, batch).item() != pytest.approx(full, rel=1e-4)
    finally:
        algo.stop()


def test_minibatches_of_columns_unroll_each_column_as_the_whole_batch_does():
    # IMPALA's minibatches are columns in shuffled order; each column keeps its sequences and states.
    algo = _algo(model={**SMALL_LSTM, "max_seq_len": 3})
    try:
        learner = algo.learner
        batch = _batch(learner.rl_module, B=3)
        layout = learner.sequence_layout(batch)
        data = learner.loss_inputs(batch, layout)
        with torch.no_grad():
            whole = learner.forward_minibatch(data, layout.for_columns(np.arange(3)))
            chosen = np.array([2, 0])
            index = torch.as_tensor(chosen)
            part = learner.forward_minibatch({k: v.index_select(1, index) for k, v in data.items()},
                                             layout.for_columns(chosen))
        for key in (Columns.ACTION_DIST_INPUTS, Columns.VF_PREDS):
            T = batch[Columns.REWARDS].shape[0]
            expected = whole[key].reshape((T, 3) + whole[key].shape[1:])[:, chosen]
            assert torch.allclose(part[key].reshape(expected.shape), expected, atol=1e-6), key
    finally:
        algo.stop()


def _loss_and_grads(learner, config, batch):
    learner.rl_module.zero_grad()
    loss = _learner_loss(learner, config, batch)
    loss.backward()
    return loss.item(), [p.grad.clone() for p in learner.params if p.grad is not None]


@pytest.mark.parametrize("config_cls", [IMPALAConfig, APPOConfig])
@pytest.mark.parametrize("model", [SMALL_LSTM, SMALL_ATTENTION], ids=["lstm", "attention"])
def test_padding_changes_neither_the_loss_nor_the_gradients(config_cls, model):
    algo = _algo(config_cls, model)
    try:
        learner = algo.learner
        batch = _batch(learner.rl_module)
        valid = np.ones(batch[Columns.REWARDS].shape, bool)
        valid[6:, 1] = False  # column 1 ends after t=5: the rows after are padding
        batch[Columns.VALID] = valid
        junk = {k: v.copy() for k, v in batch.items()}
        rng = np.random.default_rng(1)
        for key in (Columns.OBS, Columns.NEXT_OBS, Columns.REWARDS, Columns.ACTION_LOGP):
            junk[key][6:, 1] = rng.normal(size=junk[key][6:, 1].shape) * 5.0
        junk[Columns.TERMINATEDS][7, 1] = True
        loss, grads = _loss_and_grads(learner, algo.config, batch)
        loss_junk, grads_junk = _loss_and_grads(learner, algo.config, junk)
        assert loss == pytest.approx(loss_junk, rel=1e-6, abs=1e-6)
        assert grads and all(torch.allclose(g, h, atol=1e-6) for g, h in zip(grads, grads_junk))
        # A change to a real step does change them.
        real = {k: v.copy() for k, v in batch.items()}
        real[Columns.REWARDS][5, 1] += 1.0
        assert _loss_and_grads(learner, algo.config, real)[0] != pytest.approx(loss, rel=1e-6)
    finally:
        algo.stop()


def test_appo_target_policy_runs_over_the_same_sequences():
    algo = _algo(APPOConfig, use_kl_loss=True)
    try:
        learner = algo.learner
        with torch.no_grad():  # the online module moves away from the target network
            for p in learner.rl_module.parameters():
                p.add_(0.3 * torch.randn_like(p))
        batch = _batch(learner.rl_module)
        layout = learner.sequence_layout(batch)
        data = learner.loss_inputs(batch, layout)
        fwd = learner.forward_minibatch(data, layout.for_columns(np.arange(2)))
        target_logits = _direct_unroll(learner.target, batch)[0].reshape(-1, 2)
        online_logits = _direct_unroll(learner.rl_module, batch)[0].reshape(-1, 2)
        assert torch.allclose(fwd[TARGET_NETWORK_ACTION_DIST_INPUTS], target_logits, atol=1e-5)
        assert torch.allclose(fwd[Columns.ACTION_DIST_INPUTS], online_logits, atol=1e-5)
        assert not torch.allclose(target_logits, online_logits, atol=1e-3)
        loss = learner.compute_loss_for_module(module_id="default_policy", config=algo.config, batch=data, fwd_out=fwd)
        assert torch.isfinite(loss) and learner._loss_stats["mean_kl_loss"] > 0
        # The target of a recurrent module cannot run on flat observations.
        with pytest.raises(ValueError, match="sequences"):
            learner.target_action_dist_inputs(data)
    finally:
        algo.stop()


def test_appo_without_vtrace_uses_gae_over_the_sequences():
    algo = _algo(APPOConfig, vtrace=False, lambda_=0.95)
    try:
        learner = algo.learner
        batch = _batch(learner.rl_module)
        data = learner.loss_inputs(batch)
        _, values, next_values = _direct_unroll(learner.rl_module, batch)
        term = batch[Columns.TERMINATEDS]
        done = term | batch[Columns.TRUNCATEDS]
        T, B = values.shape
        expected = np.zeros((T, B))
        for b in range(B):
            acc = 0.0
            for t in range(T - 1, -1, -1):
                delta = batch[Columns.REWARDS][t, b] + GAMMA * (1 - term[t, b]) * next_values[t, b] - values[t, b]
                acc = delta + (0.0 if done[t, b] or t == T - 1 else GAMMA * 0.95 * acc)
                expected[t, b] = acc
        assert np.allclose(data[Columns.ADVANTAGES].numpy(), expected, atol=1e-5)
        assert np.allclose(data[Columns.VALUE_TARGETS].numpy(), expected + values, atol=1e-5)
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- asynchronous sampling


def test_a_remote_runner_continues_each_sub_envs_state_across_fragments():
    algo = (IMPALAConfig().environment(RepeatAfterMeEnv, env_config={"episode_len": 50})
            .env_runners(num_env_runners=1, env_runner_backend="thread", num_envs_per_env_runner=3,
                         rollout_fragment_length=8)
            .training(model={**SMALL_LSTM, "max_seq_len": 8})
            .debugging(seed=0).build())
    try:
        group = algo.env_runner_group
        fragments = []
        while len(fragments) < 3:  # the runner's weights are the learner's (version 1 forces the sync)
            fragments += [s.batch for s in group.async_sample(weights_from=algo.learner, weights_seq_no=1)]
        module = algo.learner.rl_module
        names = list(module.get_initial_state())
        for first, second in zip(fragments, fragments[1:]):
            for b in range(3):
                assert not (first[Columns.TERMINATEDS][-1, b] or first[Columns.TRUNCATEDS][-1, b])
                assert np.array_equal(second[Columns.OBS][0, b], first[Columns.NEXT_OBS][-1, b])
                state = {k: first[state_column(k)][-1, b] for k in names}
                after = _step(module, first[Columns.OBS][-1, b], state)[2]
                for k in names:
                    assert np.allclose(second[state_column(k)][0, b], after[k].numpy(), atol=1e-5), k
                assert np.any(second[state_column("h")][0, b])
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- checkpoints and errors


@pytest.mark.parametrize("config_cls", [IMPALAConfig, APPOConfig])
def test_checkpoints_restore_the_recurrent_module(config_cls, tmp_path):
    def build():
        return _repeat_config(config_cls, {**SMALL_LSTM, "max_seq_len": 10}).build()

    algo = build()
    try:
        for _ in range(2):
            algo.train()
        if config_cls is APPOConfig:  # a target network unlike the freshly built one
            with torch.no_grad():
                for p in algo.learner.target.parameters():
                    p.add_(0.1)
        path = algo.save(str(tmp_path / "ckpt")).checkpoint.path
        restored = build()
        try:
            restored.restore(path)
            weights, again = algo.get_module().get_state(), restored.get_module().get_state()
            assert weights.keys() == again.keys() and all(np.array_equal(weights[k], again[k]) for k in weights)
            if config_cls is APPOConfig:
                target, target_again = algo.learner.target.state_dict(), restored.learner.target.state_dict()
                assert all(torch.equal(target[k], target_again[k]) for k in target)
            state = algo.get_policy().get_initial_state()
            a = algo.compute_single_action(1, state=state, full_fetch=True)[2]["action_dist_inputs"]
            b = restored.compute_single_action(1, state=state, full_fetch=True)[2]["action_dist_inputs"]
            assert np.allclose(a, b)
        finally:
            restored.stop()
    finally:
        algo.stop()


class _FeedForwardOnlyLearner(TorchLearner):
    """A Learner that does not train recurrent modules (no supports_recurrent_modules)."""

    def update_from_batch(self, batch, timestep):
        return {}


def test_unsupported_combinations_are_refused_with_the_fix():
    with pytest.raises(ConfigError, match="use_lstm.*use_attention.*only one"):
        IMPALAConfig().environment("CartPole-v1").training(model={**SMALL_LSTM, "use_attention": True}).build()
    with pytest.raises(NotSupportedYetError, match="recurrent.*_FeedForwardOnlyLearner.*IMPALA and APPO"):
        (APPOConfig().environment("CartPole-v1").training(model=SMALL_LSTM, learner_class=_FeedForwardOnlyLearner)
         .build())
