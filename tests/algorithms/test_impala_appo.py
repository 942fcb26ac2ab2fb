"""IMPALA and APPO: V-trace against the paper, the losses, asynchronous sampling, learning.

- `vtrace` matches a reference written from Espeholt et al. (2018)'s equations (the explicit sum
  of eq. 1, not the recursion the implementation uses) on a 5-step example with clipped
  importance weights, a termination and a truncation.
- IMPALA's and APPO's losses match hand computations on a small batch.
- Asynchronous sampling (EnvRunnerGroup.async_sample): runners sample while the driver is busy,
  results carry the version of the weights that produced them, requests stop under back
  pressure; IMPALA's learner queue stays bounded and the policy lag is reported.
- The tuned examples learn CartPole-v1 with 2 remote runners (CI-sized bar), multi-agent runs
  train one learner per policy, and checkpoints keep APPO's target network.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from rlx.algorithms.appo import APPO, APPOConfig
from rlx.algorithms.impala import IMPALA, IMPALAConfig
from rlx.algorithms.impala.impala_learner import IMPALALearner
from rlx.algorithms.impala.learner_queue import LearnerQueue
from rlx.algorithms.impala.vtrace import vtrace
from rlx.algorithms.registry import get_algorithm_class, get_algorithm_config
from rlx.core.columns import Columns
from rlx.utils.errors import ConfigError, NotSupportedYetError

ROOT = Path(__file__).resolve().parents[2]
GAMMA = 0.9


# ----------------------------------------------------------------------------- V-trace


def vtrace_reference(log_rhos, rewards, values, next_values, terminated, done, gamma, rho_bar, pg_rho_bar, c_bar=1.0):
    """V-trace for one trajectory column, straight from the paper (Espeholt et al. 2018, eq. 1 and
    sec. 4.2): v_s = V(x_s) + sum_{t=s}^{end} (prod_{i=s}^{t-1} gamma_i c_i) delta_t, with
    delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t)), the sum ending where the trajectory is
    cut; A_s = rho_pg_s (r_s + gamma_s v_{s+1} - V(x_s)), v_{s+1} = V(x_{s+1}) after a cut."""
    n = len(rewards)
    ratio = np.exp(log_rhos)
    rho, c, rho_pg = np.minimum(rho_bar, ratio), np.minimum(c_bar, ratio), np.minimum(pg_rho_bar, ratio)
    disc = [0.0 if terminated[t] else gamma for t in range(n)]
    delta = [rho[t] * (rewards[t] + disc[t] * next_values[t] - values[t]) for t in range(n)]
    vs = np.zeros(n)
    for s in range(n):
        total, coef = 0.0, 1.0
        for t in range(s, n):
            total += coef * delta[t]
            if done[t]:
                break
            coef *= disc[t] * c[t]
        vs[s] = values[s] + total
    vs_next = [next_values[s] if done[s] or s == n - 1 else vs[s + 1] for s in range(n)]
    adv = np.array([rho_pg[s] * (rewards[s] + disc[s] * vs_next[s] - values[s]) for s in range(n)])
    return vs, adv


def _five_step_example():
    rng = np.random.default_rng(7)
    T, B = 5, 2
    values = rng.normal(size=(T, B))
    next_values = np.zeros((T, B))
    next_values[:-1] = values[1:]
    next_values[-1] = rng.normal(size=B)       # bootstrap at the end of the batch
    next_values[3, 1] = 0.7                    # column 1 truncated after t=3: V of its final obs
    terminated = np.zeros((T, B), bool)
    terminated[2, 0] = True                    # column 0 terminates after t=2
    truncated = np.zeros((T, B), bool)
    truncated[3, 1] = True
    return {
        "behaviour": rng.normal(-0.7, 0.3, size=(T, B)),
        "target": rng.normal(-0.7, 0.3, size=(T, B)),  # ratios both above and below 1
        "rewards": rng.normal(1.0, 0.5, size=(T, B)),
        "values": values, "next_values": next_values,
        "terminated": terminated, "done": terminated | truncated,
    }


@pytest.mark.parametrize("rho_bar, pg_rho_bar", [(1.0, 1.0), (0.9, 1.2), (100.0, 100.0)])
def test_vtrace_matches_the_papers_equations_on_a_5_step_example(rho_bar, pg_rho_bar):
    ex = _five_step_example()
    t = {k: torch.as_tensor(v, dtype=torch.float32) if v.dtype != bool else torch.as_tensor(v) for k, v in ex.items()}
    vs, adv = vtrace(t["behaviour"], t["target"], t["rewards"], t["values"], t["next_values"], t["terminated"],
                     t["done"], GAMMA, rho_bar, pg_rho_bar)
    assert (np.exp(ex["target"] - ex["behaviour"]) > 1.0).any() and (np.exp(ex["target"] - ex["behaviour"]) < 1).any()
    for b in range(2):
        ref_vs, ref_adv = vtrace_reference(ex["target"][:, b] - ex["behaviour"][:, b], ex["rewards"][:, b],
                                           ex["values"][:, b], ex["next_values"][:, b], ex["terminated"][:, b],
                                           ex["done"][:, b], GAMMA, rho_bar, pg_rho_bar)
        np.testing.assert_allclose(vs[:, b].numpy(), ref_vs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(adv[:, b].numpy(), ref_adv, rtol=1e-5, atol=1e-5)


def test_on_policy_vtrace_is_the_n_step_return():
    ex = _five_step_example()
    t = {k: torch.as_tensor(v, dtype=torch.float32) if v.dtype != bool else torch.as_tensor(v) for k, v in ex.items()}
    same = t["behaviour"]
    vs, _ = vtrace(same, same, t["rewards"], t["values"], t["next_values"], t["terminated"], t["done"], GAMMA)
    r, nv = ex["rewards"], ex["next_values"]
    # Column 0: steps 0-2 end in a termination; steps 3-4 are bootstrapped at the batch's end.
    assert vs[0, 0].item() == pytest.approx(r[0, 0] + GAMMA * r[1, 0] + GAMMA ** 2 * r[2, 0], rel=1e-5)
    assert vs[3, 0].item() == pytest.approx(r[3, 0] + GAMMA * r[4, 0] + GAMMA ** 2 * nv[4, 0], rel=1e-5)
    # Column 1: truncated after t=3, bootstrapped from the final observation's value.
    assert vs[0, 1].item() == pytest.approx(sum(GAMMA ** k * r[k, 1] for k in range(4)) + GAMMA ** 4 * 0.7, rel=1e-5)


# ----------------------------------------------------------------------------- losses


def _time_major_batch(T=5, B=2, seed=0):
    rng = np.random.default_rng(seed)
    terminated = np.zeros((T, B), bool)
    terminated[2, 0] = True
    truncated = np.zeros((T, B), bool)
    truncated[3, 1] = True
    return {
        Columns.OBS: rng.normal(size=(T, B, 4)).astype(np.float32),
        Columns.NEXT_OBS: rng.normal(size=(T, B, 4)).astype(np.float32),
        Columns.ACTIONS: rng.integers(0, 2, size=(T, B)),
        Columns.ACTION_LOGP: rng.normal(-0.7, 0.2, size=(T, B)).astype(np.float32),
        Columns.REWARDS: rng.normal(1.0, 0.5, size=(T, B)).astype(np.float32),
        Columns.TERMINATEDS: terminated,
        Columns.TRUNCATEDS: truncated,
    }


def _local(config):
    return config.environment("CartPole-v1").training(gamma=GAMMA).debugging(seed=0).build()


def _hand_inputs(module, batch, policy_module=None):
    """(values, logp, next_values) as numpy [T, B], computed directly from the module."""
    T, B = batch[Columns.REWARDS].shape
    with torch.no_grad():
        obs = torch.from_numpy(batch[Columns.OBS].reshape(T * B, 4))
        out = (policy_module or module).forward_train({Columns.OBS: obs})
        dist = module.get_train_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS])
        logp = dist.logp(torch.from_numpy(batch[Columns.ACTIONS].reshape(-1))).numpy().reshape(T, B)
        values = module.compute_values({Columns.OBS: obs}).numpy().reshape(T, B)
        next_all = module.compute_values({Columns.OBS: torch.from_numpy(batch[Columns.NEXT_OBS].reshape(T * B, 4))})
        next_all = next_all.numpy().reshape(T, B)
    next_values = np.zeros((T, B), np.float32)
    next_values[:-1] = values[1:]
    cut = batch[Columns.TRUNCATEDS].copy()
    cut[-1] |= ~batch[Columns.TERMINATEDS][-1]
    next_values[cut] = next_all[cut]
    return values, logp, next_values, dist.entropy().numpy().reshape(T, B)


def _learner_loss(learner, config, batch):
    data = learner.loss_inputs(batch)
    flat = {Columns.OBS: data[Columns.OBS].reshape(-1, 4)}
    fwd = learner.rl_module.forward_train(flat)
    loss = learner.compute_loss_for_module(module_id="default_policy", config=config, batch=data, fwd_out=fwd)
    return loss.item(), learner._loss_stats


def test_impala_loss_against_a_hand_computation():
    algo = _local(IMPALAConfig().training(vf_loss_coeff=0.5, entropy_coeff=0.01, vtrace_clip_rho_threshold=1.0,
                                          vtrace_clip_pg_rho_threshold=1.0))
    try:
        batch = _time_major_batch()
        learner = algo.learner
        learner._curr_entropy_coeff = 0.01
        loss, stats = _learner_loss(learner, algo.config, batch)
        values, logp, next_values, entropy = _hand_inputs(learner.rl_module, batch)
        done = batch[Columns.TERMINATEDS] | batch[Columns.TRUNCATEDS]
        pi_terms, vf_terms = [], []
        for b in range(2):
            vs, adv = vtrace_reference(logp[:, b] - batch[Columns.ACTION_LOGP][:, b], batch[Columns.REWARDS][:, b],
                                       values[:, b], next_values[:, b], batch[Columns.TERMINATEDS][:, b], done[:, b],
                                       GAMMA, 1.0, 1.0)
            pi_terms.append(-logp[:, b] * adv)
            vf_terms.append(0.5 * (values[:, b] - vs) ** 2)
        policy_loss, vf_loss = np.mean(pi_terms), np.mean(vf_terms)
        assert stats["policy_loss"].item() == pytest.approx(policy_loss, rel=1e-4)
        assert stats["vf_loss"].item() == pytest.approx(vf_loss, rel=1e-4)
        assert loss == pytest.approx(policy_loss + 0.5 * vf_loss - 0.01 * entropy.mean(), rel=1e-4)
    finally:
        algo.stop()


def test_appo_loss_against_a_hand_computation():
    algo = _local(APPOConfig().training(clip_param=0.3, vf_loss_coeff=0.5, entropy_coeff=0.0, use_kl_loss=True,
                                        kl_coeff=0.2))
    try:
        batch = _time_major_batch(seed=1)
        learner = algo.learner
        with torch.no_grad():  # make the target (old) policy differ from the current one
            for p in learner.target.parameters():
                p.add_(0.05 * torch.randn_like(p))
        loss, stats = _learner_loss(learner, algo.config, batch)
        values, logp, next_values, _ = _hand_inputs(learner.rl_module, batch)
        _, old_logp, _, _ = _hand_inputs(learner.rl_module, batch, policy_module=learner.target)
        mu = batch[Columns.ACTION_LOGP]
        done = batch[Columns.TERMINATEDS] | batch[Columns.TRUNCATEDS]
        surrogate, vf = [], []
        for b in range(2):
            vs, adv = vtrace_reference(old_logp[:, b] - mu[:, b], batch[Columns.REWARDS][:, b], values[:, b],
                                       next_values[:, b], batch[Columns.TERMINATEDS][:, b], done[:, b], GAMMA, 1.0,
                                       1.0)
            is_ratio = np.clip(np.exp(mu[:, b] - old_logp[:, b]), 0.0, 2.0)
            ratio = is_ratio * np.exp(logp[:, b] - mu[:, b])
            surrogate.append(np.minimum(adv * ratio, adv * np.clip(ratio, 0.7, 1.3)))
            vf.append(0.5 * (values[:, b] - vs) ** 2)
        obs = torch.from_numpy(batch[Columns.OBS].reshape(-1, 4))
        with torch.no_grad():
            dist_cls = learner.rl_module.get_train_action_dist_cls()
            new = dist_cls.from_logits(learner.rl_module.forward_train({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS])
            old = dist_cls.from_logits(learner.target.forward_train({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS])
            kl = old.kl(new).mean().item()
        policy_loss = -np.mean(surrogate)
        assert stats["policy_loss"].item() == pytest.approx(policy_loss, rel=1e-4)
        assert stats["mean_kl_loss"].item() == pytest.approx(kl, rel=1e-4) and kl > 0
        assert loss == pytest.approx(policy_loss + 0.5 * np.mean(vf) + 0.2 * kl, rel=1e-4)
    finally:
        algo.stop()


def test_appo_gae_mode_and_target_network_updates():
    algo = _local(APPOConfig().training(vtrace=False, lambda_=0.95, train_batch_size=100, target_network_update_freq=1,
                                        circular_buffer_num_batches=2, circular_buffer_iterations_per_batch=1, tau=0.5)
                  .env_runners(rollout_fragment_length=50).reporting(min_time_s_per_iteration=0))
    try:
        before = {k: v.clone() for k, v in algo.learner.target.state_dict().items()}
        result = None
        while result is None or result["num_env_steps_trained_lifetime"] < 400:
            result = algo.train()
        metrics = result["learners"]["default_policy"]
        assert metrics["num_target_updates"] >= 1 and math.isfinite(metrics["vf_loss"])
        after = algo.learner.target.state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before)
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- asynchronous sampling


def _remote(config, runners=2, backend="thread"):
    return (config.environment("CartPole-v1").env_runners(num_env_runners=runners, env_runner_backend=backend,
                                                          rollout_fragment_length=20)
            .debugging(seed=0).build())


def test_runners_sample_while_the_driver_is_busy_and_report_weight_versions():
    algo = _remote(IMPALAConfig())
    group = algo.env_runner_group
    try:
        first = group.async_sample()
        assert first and all(s.weights_seq_no == 0 and s.env_steps == 20 for s in first)
        assert group.num_sample_requests_in_flight() <= 2 * 2  # max_requests_in_flight_per_env_runner
        time.sleep(0.5)  # the driver is busy: the runners fill their queued requests meanwhile
        t0 = time.monotonic()
        ready = group.async_sample(wait_s=0.0)
        assert ready and time.monotonic() - t0 < 0.25
        # New weights go out with the next requests; results sampled with them say so.
        seen = set()
        deadline = time.monotonic() + 20
        while 7 not in seen and time.monotonic() < deadline:
            seen |= {s.weights_seq_no for s in group.async_sample(weights_from=algo.learner, weights_seq_no=7)}
        assert 7 in seen
        # Back pressure: without new requests the queued ones drain and the runners go idle.
        while group.num_sample_requests_in_flight():
            group.async_sample(max_new_requests=0)
        assert group.async_sample(max_new_requests=0, wait_s=0.1) == []
        # A small budget goes to the idle runners first.
        group.async_sample(max_new_requests=2, wait_s=0.0)
        assert sorted(len(q) for q in group._in_flight.values()) in ([1, 1], [0, 1])
    finally:
        algo.stop()


class _SlowLearner(IMPALALearner):
    """A learner slower than the samplers: the learner queue fills up."""

    def update_from_batch(self, batch, timestep):
        time.sleep(0.05)
        return super().update_from_batch(batch, timestep)


@pytest.mark.slow
def test_learner_queue_stays_bounded_and_policy_lag_is_reported():
    # Runners that could run 8 fragments (4 train batches) ahead of a slow learner whose queue
    # holds 2 batches: the requests are throttled so that queued and pending data fit the queue.
    config = IMPALAConfig().training(learner_queue_size=2, train_batch_size=40, learner_class=_SlowLearner,
                                     max_requests_in_flight_per_env_runner=4).reporting(min_time_s_per_iteration=1)
    algo = _remote(config, backend="process")
    try:
        sizes, in_flight = [], []
        for _ in range(30):
            algo.training_step()
            sizes.append(len(algo.learner_queue))
            in_flight.append(algo.env_runner_group.num_sample_requests_in_flight())
        assert max(sizes) <= 2, sizes
        assert max(in_flight[3:]) <= 4, in_flight  # at most 2 batches of 20-step fragments pending
        result = algo.train()
        section = result["async_sampling"]
        assert section["learner_queue_capacity"] == 2
        assert section["num_env_steps_dropped_lifetime"] == 0
        assert section["policy_lag_max"] >= 1 and section["policy_lag_mean"] > 0
    finally:
        algo.stop()


def test_learner_queue_fifo_and_circular():
    fifo = LearnerQueue(2)
    assert fifo.put("a", 10) == 0 and fifo.put("b", 10) == 0 and fifo.full
    assert fifo.put("c", 10) == 10  # the oldest ("a") made room
    assert [fifo.get(), fifo.get(), fifo.get()] == ["b", "c", None]
    circular = LearnerQueue(3, uses_per_batch=2, rng=np.random.default_rng(0))
    for name in "xyz":
        circular.put(name, 1)
    drawn = [circular.get() for _ in range(6)]
    assert sorted(drawn) == ["x", "x", "y", "y", "z", "z"] and len(circular) == 0


def test_without_remote_runners_sampling_is_local_with_no_lag():
    algo = IMPALAConfig().environment("CartPole-v1").training(train_batch_size=100).reporting(
        min_time_s_per_iteration=0).debugging(seed=0).build()
    try:
        result = algo.train()
        while "policy_lag_mean" not in result.get("async_sampling", {}) or \
                math.isnan(result["async_sampling"]["policy_lag_mean"]):
            result = algo.train()
        assert result["async_sampling"]["policy_lag_mean"] == 0.0
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- surface and config


def test_import_paths_and_old_names():
    import rlx.agents.appo as old_appo
    import rlx.agents.impala as old_impala
    from rlx.algorithms.appo import APPOLearner, APPOTrainer
    from rlx.algorithms.appo.torch.appo_torch_learner import APPOTorchLearner
    from rlx.algorithms.impala import ImpalaConfig, ImpalaTrainer
    from rlx.algorithms.impala.torch.impala_torch_learner import IMPALATorchLearner

    assert APPOTrainer is APPO and old_appo.APPOConfig is APPOConfig and old_appo.APPOTrainer is APPO
    assert ImpalaTrainer is IMPALA and ImpalaConfig is IMPALAConfig and old_impala.ImpalaTrainer is IMPALA
    assert issubclass(APPOTorchLearner, APPOLearner) and issubclass(APPOLearner, IMPALALearner)
    assert issubclass(IMPALATorchLearner, IMPALALearner) and issubclass(APPO, IMPALA)
    assert get_algorithm_class("impala") is IMPALA and get_algorithm_class("APPO") is APPO
    assert old_impala.DEFAULT_CONFIG["vtrace_clip_rho_threshold"] == 1.0


def test_rllib_options_and_defaults():
    impala = IMPALAConfig().training(num_multi_gpu_tower_stacks=2, broadcast_interval=3, learner_queue_timeout=30)
    assert (impala.rollout_fragment_length, impala.train_batch_size, impala.lr, impala.grad_clip) == \
        (50, 500, 0.0005, 40.0)
    assert (impala.learner_queue_size, impala.num_multi_gpu_tower_stacks, impala.broadcast_interval) == (3, 2, 3)
    appo = APPOConfig().training(target_update_frequency=3, use_kl_loss=True, kl_target=0.02, tau=0.5)
    assert appo.target_network_update_freq == 3 and appo.clip_param == 0.4 and appo.kl_coeff == 1.0
    assert (appo.circular_buffer_num_batches, appo.circular_buffer_iterations_per_batch) == (8, 2)
    rms = IMPALAConfig().environment("CartPole-v1").training(opt_type="rmsprop", decay=0.9, epsilon=0.01)
    rms.validate()
    assert rms.optimizer == {"type": "RMSprop", "alpha": 0.9, "momentum": 0.0, "eps": 0.01}
    assert APPOConfig().learners(num_aggregator_actors_per_learner=2).num_aggregator_actors_per_learner == 2


def test_options_that_cannot_work_are_refused():
    with pytest.raises(ConfigError, match="IMPALA needs vtrace=True"):
        IMPALAConfig().training(vtrace=False)
    with pytest.raises(NotSupportedYetError, match="replay_proportion"):
        IMPALAConfig().training(replay_proportion=0.5)
    with pytest.raises(NotSupportedYetError, match="minibatch_buffer_size"):
        APPOConfig().training(minibatch_buffer_size=4)
    with pytest.raises(ConfigError, match="circular_buffer_num_batches"):
        APPOConfig().environment("CartPole-v1").training(learner_queue_size=4).validate()
    with pytest.raises(ConfigError, match="multiple of rollout_fragment_length"):
        IMPALAConfig().environment("CartPole-v1").training(minibatch_size=70).validate()
    with pytest.raises(ConfigError, match="APPO always uses a value function"):
        APPOConfig().training(use_critic=False)


def test_minibatches_of_whole_trajectories_and_epochs():
    algo = IMPALAConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=4).training(
        train_batch_size=200, minibatch_size=100, num_epochs=2).reporting(min_time_s_per_iteration=0).debugging(
        seed=0).build()
    try:
        result = algo.train()
        while not result["learners"]:
            result = algo.train()
        assert result["learners"]["default_policy"]["num_minibatch_updates"] == 4
    finally:
        algo.stop()


def test_checkpoint_keeps_the_target_network_and_kl_coefficient(tmp_path):
    from rlx.algorithms.algorithm import Algorithm

    config = APPOConfig().environment("CartPole-v1").training(use_kl_loss=True, train_batch_size=100).reporting(
        min_time_s_per_iteration=0).debugging(seed=0)
    algo = config.build()
    try:
        for _ in range(3):
            algo.train()
        with torch.no_grad():
            for p in algo.learner.target.parameters():
                p.add_(1.0)
        target = {k: v.clone() for k, v in algo.learner.target.state_dict().items()}
        kl_coeff = algo.learner.kl_coeff
        algo.save(str(tmp_path / "ckpt"))
    finally:
        algo.stop()
    restored = Algorithm.from_checkpoint(str(tmp_path / "ckpt"))
    try:
        assert isinstance(restored, APPO) and restored.learner.kl_coeff == kl_coeff
        for k, v in restored.learner.target.state_dict().items():
            assert torch.equal(v, target[k]), k
    finally:
        restored.stop()


# ----------------------------------------------------------------------------- multi-agent


def _two_policies(agent_id, episode, **kwargs):
    return f"p{agent_id % 2}"


@pytest.mark.parametrize("config_cls", [IMPALAConfig, APPOConfig], ids=["IMPALA", "APPO"])
def test_multi_agent_trains_one_learner_per_policy(config_cls):
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    config = (config_cls().environment(MultiAgentCartPole, env_config={"num_agents": 4})
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=_two_policies)
              .env_runners(num_env_runners=1, env_runner_backend="thread", rollout_fragment_length=25)
              .training(train_batch_size=100).reporting(min_time_s_per_iteration=0).debugging(seed=0))
    algo = config.build()
    try:
        results = [algo.train() for _ in range(4)]
        assert any(set(r["learners"]) == {"p0", "p1"} for r in results)
        assert "policy_lag_mean" in results[-1]["async_sampling"]
        assert results[-1]["num_agent_steps_trained_lifetime"] > results[-1]["num_env_steps_trained_lifetime"]
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- learning


def _tuned(relpath: str) -> dict:
    data = yaml.safe_load((ROOT / "tuned_examples" / relpath).read_text())
    return next(iter(data.values()))


@pytest.mark.slow
@pytest.mark.parametrize("relpath", ["impala/cartpole-impala.yaml", "appo/cartpole-appo.yaml"])
def test_tuned_example_learns_cartpole_with_two_remote_runners(relpath):
    """CI bar: 300 within 400k env steps (the full criterion, 450 within 500k, is the tuned
    example's; benchmarks/tuned_example.py runs it)."""
    spec = _tuned(relpath)
    assert spec["stop"] == {"env_runners/episode_return_mean": 450, "num_env_steps_sampled_lifetime": 500_000}
    assert spec["config"]["num_env_runners"] == 2
    config = get_algorithm_config(spec["run"]).update_from_dict(dict(spec["config"]))
    algo = config.environment(spec["env"]).debugging(seed=0).build()
    progress = []
    try:
        while True:
            result = algo.train()
            ret = result["env_runners"]["episode_return_mean"]
            progress.append((result["num_env_steps_sampled_lifetime"], round(ret, 1)))
            if not math.isnan(ret) and ret >= 300:
                break
            assert result["num_env_steps_sampled_lifetime"] < 400_000, f"did not reach 300: {progress}"
        assert result["async_sampling"]["sample_requests_in_flight"] >= 0
    finally:
        algo.stop()
