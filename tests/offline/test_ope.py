"""Off-policy estimation (`ray.rllib.offline.estimators`): IS, WIS, DM and DR against hand
computations on tiny bandits and episodes, FQE against known Q-values, and the estimates in
an Algorithm's evaluation results (`evaluation/off_policy_estimator/<name>`).

The target policy of the hand-computed cases is a table pi(a | s) (the state id is obs[:, 0]);
the behaviour probabilities are the data's `action_prob` column.
"""
from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.bc import BCConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.offline import JsonReader
from rlx.offline.estimators import (DirectMethod, DoublyRobust, FQETorchModel, ImportanceSampling,
                                    OffPolicyEstimator, WeightedImportanceSampling)
from rlx.policy.sample_batch import SampleBatch
from rlx.utils.errors import ConfigError

@pytest.fixture(autouse=True)
def one_torch_thread():
    """As Algorithms run torch (torch_num_threads=1): FQE's small networks are slower on more."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


KEYS = {"v_behavior", "v_behavior_std", "v_target", "v_target_std", "v_gain", "v_delta"}


class TablePolicy:
    """Target policy pi(a | s) = table[s, a], with s = obs[:, 0]."""

    def __init__(self, table):
        self.table = np.asarray(table, np.float64)
        self.action_space = gym.spaces.Discrete(self.table.shape[1])

    def compute_log_likelihoods(self, actions, obs_batch):
        states = np.asarray(obs_batch)[:, 0].astype(int)
        return np.log(self.table[states, np.asarray(actions).astype(int)])


class TableQ:
    """A fixed Q-model (q_model_config={'type': TableQ, 'q': ...}): Q(s, a) = q[s, a]."""

    def __init__(self, policy, gamma, q):
        self.policy, self.q = policy, np.asarray(q, np.float64)
        self.trained_on = 0

    def train(self, batch):
        self.trained_on += len(batch["rewards"])
        return [0.0]

    def estimate_q(self, batch):
        s = np.asarray(batch["obs"])[:, 0].astype(int)
        return self.q[s, np.asarray(batch["actions"]).astype(int)]

    def estimate_v(self, batch):
        s = np.asarray(batch["obs"])[:, 0].astype(int)
        return np.sum(self.policy.table[s] * self.q[s], axis=-1)


# A contextual bandit: 2 states, 2 actions, every row a one-step episode.
PI = [[0.8, 0.2], [0.3, 0.7]]
BANDIT_ROWS = [  # (state, action, reward, behaviour probability mu(a|s))
    (0, 0, 1.0, 0.5),
    (0, 1, 0.0, 0.5),
    (1, 1, 2.0, 0.4),
    (1, 0, 1.0, 0.6),
]
# rho = pi / mu per row: 0.8/0.5 = 1.6, 0.2/0.5 = 0.4, 0.7/0.4 = 1.75, 0.3/0.6 = 0.5.
RHO = [1.6, 0.4, 1.75, 0.5]
Q_TABLE = [[0.9, 0.1], [1.2, 1.8]]


def bandit_batch() -> SampleBatch:
    s, a, r, mu = (np.array(c) for c in zip(*BANDIT_ROWS))
    n = len(s)
    return SampleBatch(obs=s[:, None].astype(np.float32), new_obs=s[:, None].astype(np.float32), actions=a,
                       rewards=r, terminateds=np.ones(n, bool), truncateds=np.zeros(n, bool), action_prob=mu,
                       eps_id=np.arange(n))


def test_importance_sampling_on_a_bandit_by_hand():
    est = ImportanceSampling(TablePolicy(PI), gamma=0.99).estimate(bandit_batch())
    # v_target per row: rho * r = 1.6*1, 0.4*0, 1.75*2, 0.5*1 = 1.6, 0, 3.5, 0.5.
    targets = [1.6, 0.0, 3.5, 0.5]
    assert set(est) == KEYS
    assert est["v_behavior"] == pytest.approx((1 + 0 + 2 + 1) / 4)
    assert est["v_target"] == pytest.approx(5.6 / 4)
    assert est["v_target_std"] == pytest.approx(np.std(targets))
    assert est["v_behavior_std"] == pytest.approx(np.std([1, 0, 2, 1]))
    assert est["v_gain"] == pytest.approx(1.4 / 1.0)
    assert est["v_delta"] == pytest.approx(0.4)


def test_weighted_importance_sampling_on_a_bandit_by_hand():
    est = WeightedImportanceSampling(TablePolicy(PI), gamma=0.99).estimate(bandit_batch())
    # One-step episodes: w_0 = mean(rho) = (1.6 + 0.4 + 1.75 + 0.5) / 4 = 1.0625, and
    # v_target = mean(rho * r) / w_0 = 1.4 / 1.0625.
    assert est["v_target"] == pytest.approx(1.4 / 1.0625)
    assert est["v_behavior"] == pytest.approx(1.0)


def test_row_wise_estimates_match_episode_wise_ones_on_a_bandit():
    batch = bandit_batch()
    for cls in (ImportanceSampling, WeightedImportanceSampling):
        by_episode = cls(TablePolicy(PI), gamma=0.5).estimate(batch)
        by_row = cls(TablePolicy(PI), gamma=0.5).estimate(batch, split_batch_by_episode=False)
        assert by_row["v_target"] == pytest.approx(by_episode["v_target"])
        assert by_row["v_behavior"] == pytest.approx(by_episode["v_behavior"])


def test_direct_method_and_doubly_robust_on_a_bandit_by_hand():
    config = {"type": TableQ, "q": Q_TABLE}
    policy = TablePolicy(PI)
    # V(s) = sum_a pi(a|s) Q(s, a): V(0) = 0.8*0.9 + 0.2*0.1 = 0.74; V(1) = 0.3*1.2 + 0.7*1.8 = 1.62.
    v = {0: 0.74, 1: 1.62}
    dm = DirectMethod(policy, gamma=0.9, q_model_config=dict(config))
    est = dm.estimate(bandit_batch())
    assert est["v_target"] == pytest.approx((v[0] + v[0] + v[1] + v[1]) / 4)
    assert est["v_behavior"] == pytest.approx(1.0)
    # DR per row: V(s) + rho (r - Q(s, a)).
    dr_rows = [v[0] + 1.6 * (1.0 - 0.9), v[0] + 0.4 * (0.0 - 0.1), v[1] + 1.75 * (2.0 - 1.8), v[1] + 0.5 * (1.0 - 1.2)]
    dr = DoublyRobust(policy, gamma=0.9, q_model_config=dict(config))
    for split in (True, False):
        est = dr.estimate(bandit_batch(), split_batch_by_episode=split)
        assert est["v_target"] == pytest.approx(np.mean(dr_rows))
        assert est["v_target_std"] == pytest.approx(np.std(dr_rows))
    assert dr.train(bandit_batch()) == {"loss": 0.0} and dr.model.trained_on == 4


def test_epsilon_greedy_mixes_the_target_policy_with_the_uniform_one():
    eps = 0.2
    est = ImportanceSampling(TablePolicy(PI), gamma=0.0, epsilon_greedy=eps).estimate(bandit_batch())
    # pi'(a|s) = 0.8 pi(a|s) + 0.1: rows 0.74/0.5, 0.26/0.4 (r=0), 0.66/0.4, 0.34/0.6.
    expected = (0.74 / 0.5 * 1.0 + 0.66 / 0.4 * 2.0 + 0.34 / 0.6 * 1.0) / 4
    assert est["v_target"] == pytest.approx(expected)


# Two episodes (gamma 0.9) of lengths 2 and 3. pi(a|s) = 0.5 everywhere, so mu = 0.5 / rho.
EPISODES = [  # (rewards, per-step rho)
    ([1.0, 2.0], [2.0, 0.5]),
    ([0.0, 1.0, 3.0], [0.5, 4.0, 1.0]),
]


def episodes_batch() -> SampleBatch:
    rows = []
    for eps_id, (rewards, rho) in enumerate(EPISODES):
        for t, (r, w) in enumerate(zip(rewards, rho)):
            rows.append((eps_id, t, r, 0.5 / w, t == len(rewards) - 1))
    eps, t, r, mu, done = (np.array(c) for c in zip(*rows))
    n = len(r)
    obs = np.zeros((n, 1), np.float32)
    return SampleBatch(obs=obs, new_obs=obs, actions=np.zeros(n, np.int64), rewards=r, terminateds=done,
                       truncateds=np.zeros(n, bool), action_prob=mu, eps_id=eps, t=t)


def test_importance_sampling_over_episodes_by_hand():
    est = ImportanceSampling(TablePolicy([[0.5, 0.5]]), gamma=0.9).estimate(episodes_batch())
    # Cumulative ratios p_t: episode A [2.0, 1.0], episode B [0.5, 2.0, 2.0].
    # A: 2.0*1 + 0.9*1.0*2 = 3.8;   B: 0.5*0 + 0.9*2.0*1 + 0.81*2.0*3 = 6.66.
    assert est["v_target"] == pytest.approx((3.8 + 6.66) / 2)
    # Behaviour returns: A: 1 + 0.9*2 = 2.8;   B: 0 + 0.9*1 + 0.81*3 = 3.33.
    assert est["v_behavior"] == pytest.approx((2.8 + 3.33) / 2)
    assert est["v_behavior_std"] == pytest.approx(np.std([2.8, 3.33]))


def test_weighted_importance_sampling_over_episodes_by_hand():
    est = WeightedImportanceSampling(TablePolicy([[0.5, 0.5]]), gamma=0.9).estimate(episodes_batch())
    # Normalizers: w_0 = (2.0 + 0.5)/2 = 1.25, w_1 = (1.0 + 2.0)/2 = 1.5, w_2 = 2.0/1 = 2.0.
    # A: 2.0/1.25*1 + 0.9*(1.0/1.5)*2 = 1.6 + 1.2 = 2.8
    # B: 0 + 0.9*(2.0/1.5)*1 + 0.81*(2.0/2.0)*3 = 1.2 + 2.43 = 3.63
    assert est["v_target"] == pytest.approx((2.8 + 3.63) / 2)


def test_doubly_robust_over_episodes_by_hand():
    policy = TablePolicy([[0.5, 0.5]])
    dr = DoublyRobust(policy, gamma=0.9, q_model_config={"type": TableQ, "q": [[1.0, 3.0]]})
    est = dr.estimate(episodes_batch())
    # V(s) = 0.5*1 + 0.5*3 = 2, Q(s, a=0) = 1. Backwards: V_DR(t) = 2 + rho_t (r_t + 0.9 V_DR(t+1) - 1).
    a1 = 2 + 0.5 * (2.0 - 1)                   # 2.5
    a0 = 2 + 2.0 * (1.0 + 0.9 * a1 - 1)        # 6.5
    b2 = 2 + 1.0 * (3.0 - 1)                   # 4.0
    b1 = 2 + 4.0 * (1.0 + 0.9 * b2 - 1)        # 16.4
    b0 = 2 + 0.5 * (0.0 + 0.9 * b1 - 1)        # 8.88
    assert est["v_target"] == pytest.approx((a0 + b0) / 2)


def test_episodes_are_split_by_id_even_without_a_done_between_them():
    batch = episodes_batch()
    batch["terminateds"] = np.zeros_like(batch["terminateds"])  # only eps_id tells them apart
    est = ImportanceSampling(TablePolicy([[0.5, 0.5]]), gamma=0.9).estimate(batch)
    assert est["v_target"] == pytest.approx((3.8 + 6.66) / 2)
    del batch["terminateds"]
    est = ImportanceSampling(TablePolicy([[0.5, 0.5]]), gamma=0.9).estimate(batch)
    assert est["v_target"] == pytest.approx((3.8 + 6.66) / 2)


def test_fqe_learns_the_target_policys_q_values():
    # States 0 and 1 (one-hot), two actions; reward r(s, a) is deterministic. From state 0 the
    # episode goes on to state 1 (gamma 0.5), state 1 ends it. So Q(1, a) = r(1, a) and
    # Q(0, a) = r(0, a) + 0.5 * V(1) with V(1) = sum_a pi(a|1) r(1, a).
    r = np.array([[1.0, 0.0], [2.0, 4.0]])
    pi = np.array([[0.8, 0.2], [0.25, 0.75]])

    class OneHotPolicy(TablePolicy):
        def compute_log_likelihoods(self, actions, obs_batch):
            return super().compute_log_likelihoods(actions, np.argmax(obs_batch, axis=1)[:, None])

    rng = np.random.default_rng(0)
    n = 64
    s = np.tile([0, 1], n // 2)
    a = rng.integers(0, 2, n)
    onehot = np.eye(2, dtype=np.float32)
    batch = SampleBatch(obs=onehot[s], new_obs=onehot[1 - s], actions=a, rewards=r[s, a],
                        terminateds=s == 1, action_prob=np.full(n, 0.5), eps_id=np.arange(n) // 2)
    policy = OneHotPolicy(pi)
    fqe = {"n_iters": 200, "lr": 0.02, "model_config": {"fcnet_hiddens": [32, 32]}, "seed": 0}
    model = FQETorchModel(policy, gamma=0.5, **fqe)
    losses = model.train(batch)
    v1 = float(pi[1] @ r[1])  # 3.5
    q_true = np.array([r[0] + 0.5 * v1, r[1]])
    probe = SampleBatch(obs=onehot[[0, 0, 1, 1]], actions=np.array([0, 1, 0, 1]))
    assert model.estimate_q(probe) == pytest.approx(q_true.reshape(-1), abs=0.1)
    assert model.estimate_v(SampleBatch(obs=onehot[[0, 1]])) == pytest.approx([pi[0] @ q_true[0], v1], abs=0.1)
    assert losses[-1] < losses[0]
    # DM with this model: the episodes start in state 0, so v_target ~ V(0).
    dm = DirectMethod(policy, gamma=0.5, q_model_config=fqe)
    dm.train(batch)
    assert dm.estimate(batch)["v_target"] == pytest.approx(pi[0] @ q_true[0], abs=0.1)


def test_estimators_need_the_behaviour_probabilities():
    batch = bandit_batch()
    del batch["action_prob"]
    with pytest.raises(ValueError, match="action_prob"):
        ImportanceSampling(TablePolicy(PI)).estimate(batch)
    batch["action_logp"] = np.log(np.array([r[3] for r in BANDIT_ROWS]))
    est = ImportanceSampling(TablePolicy(PI)).estimate(batch)
    assert est["v_target"] == pytest.approx(1.4)


def test_fqe_refuses_continuous_actions():
    policy = TablePolicy(PI)
    policy.action_space = gym.spaces.Box(-1.0, 1.0, (1,))
    with pytest.raises(ValueError, match="Discrete action space"):
        DirectMethod(policy, gamma=0.9)


# ----------------------------------------------------------------------------- config and Algorithm


def test_off_policy_estimation_options_are_checked():
    config = PPOConfig()
    with pytest.raises(ConfigError, match="must be a dict with a 'type'"):
        config.evaluation(off_policy_estimation_methods={"is": ImportanceSampling})
    with pytest.raises(ConfigError, match="Must be either a class path or a sub-class"):
        config.evaluation(off_policy_estimation_methods={"x": {"type": dict}})
    with pytest.raises(ConfigError, match="unknown entry 'wiss'. Did you mean one of: 'wis'"):
        config.offline_data(input_evaluation=["wiss"])
    config.evaluation(off_policy_estimation_methods={"is": {"type": ImportanceSampling}}, ope_split_batch_by_episode=False)
    assert config.ope_split_batch_by_episode is False
    assert issubclass(config.off_policy_estimation_methods["is"]["type"], OffPolicyEstimator)


@pytest.fixture(scope="module")
def ppo_data(tmp_path_factory):
    """400 CartPole steps of an untrained PPO, written with `output`, and that PPO's weights."""
    path = tmp_path_factory.mktemp("ope-data")
    algo = (PPOConfig().environment("CartPole-v1").offline_data(output=str(path))
            .training(train_batch_size=400, minibatch_size=100).debugging(seed=0).build())
    try:
        algo.env_runner_group.sample(num_timesteps=400)
        weights = algo.get_weights()
    finally:
        algo.stop()
    return path, weights


def test_the_policy_that_wrote_the_data_is_estimated_at_its_own_return(ppo_data):
    """The written action_prob is the behaviour policy's: estimating that same policy gives
    ratios of 1, so IS equals the behaviour return (a check of the column and of the target
    probabilities computed from the module)."""
    path, weights = ppo_data
    algo = PPOConfig().environment("CartPole-v1").debugging(seed=1).build()
    try:
        algo.set_weights(weights)
        batch = JsonReader(str(path)).next()
        est = ImportanceSampling(algo.get_policy(), gamma=0.99).estimate(batch)
        assert est["v_target"] == pytest.approx(est["v_behavior"], rel=1e-4)
        assert est["v_target_std"] == pytest.approx(est["v_behavior_std"], rel=1e-4)
        # A policy that always pushes right (logits +-50) gets ratio 0 on every episode that ever
        # pushed left, and ratio (1/mu)^T on the rest.
        policy = {k: v * 0.0 for k, v in weights["default_policy"].items()}
        last_bias = [k for k in policy if k.endswith("bias") and policy[k].shape == (2,)][-1]
        policy[last_bias] = np.array([-50.0, 50.0], np.float32)
        algo.set_weights({"default_policy": policy})
        right = ImportanceSampling(algo.get_policy(), gamma=0.99).estimate(batch)
        assert right["v_target"] != pytest.approx(est["v_target"], rel=1e-2)
    finally:
        algo.stop()


def test_bc_reports_every_estimator_in_its_evaluation(ppo_data):
    path, _ = ppo_data
    methods = {"is": {"type": ImportanceSampling}, "wis": {"type": WeightedImportanceSampling},
               "dm": {"type": DirectMethod, "q_model_config": {"n_iters": 2}}, "dr": {"type": "dr"}}
    algo = (BCConfig().environment("CartPole-v1").offline_data(input_=str(path))
            .evaluation(evaluation_interval=1, evaluation_duration=2, off_policy_estimation_methods=methods)
            .debugging(seed=0).build())
    try:
        result = algo.train()
    finally:
        algo.stop()
    ope = result["evaluation"]["off_policy_estimator"]
    assert set(ope) == {"is", "wis", "dm", "dr"}
    for name, est in ope.items():
        assert KEYS <= set(est), name
        assert all(math.isfinite(v) for v in est.values()), (name, est)
        assert est["v_gain"] == pytest.approx(est["v_target"] / max(est["v_behavior"], 1e-8))
    assert "loss" in ope["dm"] and "loss" in ope["dr"]
    # One behaviour return, whatever the estimator.
    assert len({round(e["v_behavior"], 9) for e in ope.values()}) == 1
    assert result["evaluation"]["env_runners"]["num_episodes"] >= 2  # the env evaluation still ran


def test_ppo_estimates_on_evaluation_input_and_old_input_evaluation_names(ppo_data):
    path, _ = ppo_data
    algo = (PPOConfig().environment("CartPole-v1").training(train_batch_size=200, minibatch_size=100)
            .offline_data(input_evaluation=["is", "wis", "simulation"])
            .evaluation(evaluation_interval=1, evaluation_duration=1,
                        evaluation_config={"input_": str(path), "explore": False})
            .debugging(seed=0).build())
    try:
        result = algo.train()
    finally:
        algo.stop()
    ope = result["evaluation"]["off_policy_estimator"]
    assert set(ope) == {"is", "wis"}
    assert KEYS <= set(ope["is"]) and KEYS <= set(ope["wis"])


def test_estimation_needs_offline_evaluation_input():
    algo = (PPOConfig().environment("CartPole-v1").training(train_batch_size=200, minibatch_size=100)
            .evaluation(evaluation_interval=1, evaluation_duration=1,
                        off_policy_estimation_methods={"is": {"type": ImportanceSampling}})
            .debugging(seed=0).build())
    try:
        with pytest.raises(ConfigError, match="evaluation_config=\\{'input_'"):
            algo.train()
    finally:
        algo.stop()


def test_estimators_survive_a_checkpoint(ppo_data, tmp_path):
    """The estimator classes are stored as import paths in the checkpoint's config.json."""
    from rlx.algorithms.algorithm import Algorithm

    path, _ = ppo_data
    algo = (PPOConfig().environment("CartPole-v1").training(train_batch_size=200, minibatch_size=100)
            .evaluation(evaluation_interval=1, evaluation_duration=1, evaluation_config={"input_": str(path)},
                        off_policy_estimation_methods={"dr": {"type": DoublyRobust,
                                                              "q_model_config": {"n_iters": 2}}})
            .debugging(seed=0).build())
    try:
        checkpoint = algo.save(str(tmp_path / "ckpt")).checkpoint.path
    finally:
        algo.stop()
    restored = Algorithm.from_checkpoint(checkpoint)
    try:
        assert restored.config.off_policy_estimation_methods["dr"]["type"] is DoublyRobust
        assert KEYS <= set(restored.evaluate()["off_policy_estimator"]["dr"])
    finally:
        restored.stop()


def test_estimators_set_in_evaluation_config_overrides(ppo_data):
    """RLlib's form: the estimators and their data as evaluation_config overrides."""
    from rlx.algorithms.algorithm_config import AlgorithmConfig

    path, _ = ppo_data
    overrides = AlgorithmConfig.overrides(input_=str(path), ope_split_batch_by_episode=False,
                                          off_policy_estimation_methods={"wis": {"type": WeightedImportanceSampling}})
    algo = (PPOConfig().environment("CartPole-v1")
            .evaluation(evaluation_duration=100, evaluation_duration_unit="timesteps", evaluation_config=overrides)
            .debugging(seed=0).build())
    try:
        results = algo.evaluate()
    finally:
        algo.stop()
    # Row-wise (ope_split_batch_by_episode=False): v_behavior is the mean reward per row, 1 on CartPole.
    assert results["off_policy_estimator"]["wis"]["v_behavior"] == pytest.approx(1.0)
