"""What DQN and SAC share (rlx.algorithms.off_policy): the replay training step (learning starts,
training_intensity, n-step ranges, priority updates), replay-buffer options and their legacy
flat keys, the replayed batches the learner sees, and the replay buffer in checkpoints.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import ormsgpack
import pytest

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.dqn import DQN, DQNConfig
from rlx.algorithms.off_policy import OffPolicyAlgorithm, OffPolicyConfig
from rlx.algorithms.sac import SACConfig
from rlx.utils.errors import CheckpointError, ConfigError
from rlx.utils.replay_buffers import PrioritizedReplayBuffer, ReplayBuffer, make_replay_buffer

BATCH = 16


def dqn_config(seed: int = 0, steps: int = 64, **training) -> DQNConfig:
    """Tiny DQN on CartPole: 16-unit nets, 16-row train batches, fragments of 4 steps."""
    opts = dict(hiddens=[16], model={"fcnet_hiddens": [16]}, train_batch_size=BATCH,
                num_steps_sampled_before_learning_starts=32)
    opts.update(training)
    return (DQNConfig().environment("CartPole-v1").training(**opts)
            .reporting(min_sample_timesteps_per_iteration=steps).debugging(seed=seed))


def sac_config(seed: int = 0, **training) -> SACConfig:
    opts = dict(q_model_config={"fcnet_hiddens": [16]}, policy_model_config={"fcnet_hiddens": [16]},
                train_batch_size=BATCH, num_steps_sampled_before_learning_starts=32)
    opts.update(training)
    return (SACConfig().environment("Pendulum-v1").training(**opts)
            .reporting(min_sample_timesteps_per_iteration=64).debugging(seed=seed))


@pytest.fixture
def built():
    algos = []

    def make(config):
        algo = config.build()
        algos.append(algo)
        return algo

    yield make
    for algo in algos:
        algo.stop()


def record_updates(algo) -> list[tuple[dict, int, dict]]:
    """Wrap algo.learner.update_from_batch; return the list of (batch copy, timestep, metrics) it fills."""
    calls = []
    update = algo.learner.update_from_batch

    def wrapper(batch, timestep):
        copy = {k: np.array(v, copy=True) for k, v in batch.items()}
        metrics = update(batch, timestep)
        calls.append((copy, timestep, {k: (np.array(v, copy=True) if k == "td_error" else v)
                                       for k, v in metrics.items()}))
        return metrics

    algo.learner.update_from_batch = wrapper
    return calls


def record_buffer_samples(algo) -> list[dict]:
    """Wrap local_replay_buffer.sample; return the list of the kwargs of each call."""
    calls = []
    sample = algo.local_replay_buffer.sample

    def wrapper(num_items, **kwargs):
        calls.append(dict(kwargs, num_items=num_items))
        return sample(num_items, **kwargs)

    algo.local_replay_buffer.sample = wrapper
    return calls


# ----------------------------------------------------------------------------- training step


def test_dqn_and_sac_are_off_policy_algorithms():
    assert issubclass(DQN, OffPolicyAlgorithm)
    assert isinstance(DQNConfig(), OffPolicyConfig) and isinstance(SACConfig(), OffPolicyConfig)
    # The shared defaults: one env step per fragment unless the algorithm says otherwise.
    assert SACConfig().rollout_fragment_length == 1
    assert DQNConfig().rollout_fragment_length == 4


def test_dqn_train_returns_learner_metrics(built):
    algo = built(dqn_config())
    result = algo.train()
    metrics = result["learners"]["default_policy"]
    for key in ("total_loss", "qf_loss", "qf_mean", "curr_lr", "num_updates_this_step"):
        assert key in metrics and math.isfinite(metrics[key]), key
    assert "td_error" not in metrics  # consumed by the priority update, not reported
    assert metrics["curr_lr"] == pytest.approx(DQNConfig().lr)
    assert result["info"]["learner"]["default_policy"]["learner_stats"] == metrics
    assert result["num_env_steps_sampled_lifetime"] == 64
    assert result["num_env_steps_trained_lifetime"] > 0
    assert len(algo.local_replay_buffer) == 64


def test_no_updates_before_num_steps_sampled_before_learning_starts(built):
    algo = built(dqn_config(steps=40, num_steps_sampled_before_learning_starts=100))
    calls = record_updates(algo)
    weights = algo.get_weights()["default_policy"]
    for sampled in (40, 80):
        result = algo.train()
        assert result["num_env_steps_sampled_lifetime"] == sampled
        assert result["num_env_steps_trained_lifetime"] == 0
        assert result["learners"] == {}
        assert len(algo.local_replay_buffer) == sampled  # sampled steps are stored all along
    assert calls == [] and algo.learner.num_grad_updates == 0
    for k, v in algo.get_weights()["default_policy"].items():
        np.testing.assert_array_equal(v, weights[k])
    result = algo.train()
    # Fragments of 4 steps, one update per fragment from the one that reaches 100 steps on:
    # at 100, 104, ..., 120 sampled steps.
    assert [t for _, t, _ in calls] == [100, 104, 108, 112, 116, 120]
    assert result["num_env_steps_trained_lifetime"] == 6 * BATCH
    assert algo.learner.num_grad_updates == 6


def test_default_training_intensity_is_one_train_batch_per_sample_call(built):
    algo = built(dqn_config(num_steps_sampled_before_learning_starts=0))
    result = algo.train()
    assert result["num_env_steps_trained_lifetime"] == (64 // 4) * BATCH
    algo2 = built(dqn_config(num_steps_sampled_before_learning_starts=0).env_runners(num_envs_per_env_runner=2))
    result = algo2.train()
    assert result["num_env_steps_sampled_lifetime"] == 64
    assert result["num_env_steps_trained_lifetime"] == (64 // 8) * BATCH


@pytest.mark.parametrize("intensity", [2, 4, 8, 24])
def test_training_intensity_sets_replayed_steps_per_sampled_step(built, intensity):
    algo = built(dqn_config(num_steps_sampled_before_learning_starts=0, training_intensity=intensity))
    calls = record_updates(algo)
    result = algo.train()
    sampled = result["num_env_steps_sampled_lifetime"]
    assert sampled == 64
    assert result["num_env_steps_trained_lifetime"] == intensity * sampled
    assert len(calls) == intensity * sampled // BATCH
    assert all(c[0]["obs"].shape[0] == BATCH for c in calls)


def test_fractional_update_credit_carries_over(built):
    # 4 steps per fragment * 6 / 16 = 1.5 updates per fragment: 1, 2, 1, 2, ...
    algo = built(dqn_config(num_steps_sampled_before_learning_starts=0, training_intensity=6))
    calls = record_updates(algo)
    per_step = []
    for _ in range(6):
        before = len(calls)
        algo.training_step()
        per_step.append(len(calls) - before)
    assert per_step == [1, 2, 1, 2, 1, 2]


def test_learner_gets_the_sampled_timestep(built):
    algo = built(dqn_config())
    calls = record_updates(algo)
    algo.train()
    timesteps = [t for _, t, _ in calls]
    assert timesteps == list(range(32, 65, 4))


@pytest.mark.parametrize("n_step", [(2, 4), 3])
def test_n_step_is_drawn_per_batch_within_its_range(built, n_step):
    algo = built(dqn_config(steps=160, n_step=n_step))
    samples = record_buffer_samples(algo)
    calls = record_updates(algo)
    algo.train()
    drawn = [s["n_step"] for s in samples]
    assert len(drawn) == len(calls) >= 20
    low, high = n_step if isinstance(n_step, tuple) else (n_step, n_step)
    assert set(drawn) <= set(range(low, high + 1))
    if low < high:
        assert len(set(drawn)) >= 2
    assert all(s["gamma"] == pytest.approx(0.99) and s["num_items"] == BATCH for s in samples)
    for n, (batch, _, _) in zip(drawn, calls):
        col = batch["n_step"]
        assert col.min() >= 1 and col.max() <= n
        assert (col == n).mean() > 0.5  # most rows have n steps left in their episode


def test_prioritized_replay_priorities_follow_the_td_errors(built):
    algo = built(dqn_config())
    buf = algo.local_replay_buffer
    assert isinstance(buf, PrioritizedReplayBuffer)
    assert buf.alpha == 0.6 and buf.beta == 0.4
    calls = record_updates(algo)
    algo.train()
    priorities = buf.get_state()["priorities"]
    assert not np.allclose(priorities, priorities[0])  # no longer all max_priority ** alpha
    batch, _, metrics = calls[-1]
    last = {}
    for row, td in zip(batch["batch_indexes"], metrics["td_error"]):
        last[int(row)] = float(td)
    rows = np.array(sorted(last))
    expected = (np.array([last[r] for r in rows]) + buf.eps) ** buf.alpha
    np.testing.assert_allclose(priorities[rows], expected, rtol=1e-5)
    # Later batches carry importance weights below 1 for the likelier rows.
    algo.train()
    weights = np.concatenate([c[0]["weights"] for c in calls[-5:]])
    assert weights.max() <= 1.0 + 1e-6 and weights.min() < 0.99


def test_uniform_buffer_via_replay_buffer_config(built):
    config = dqn_config(replay_buffer_config={"type": "ReplayBuffer", "capacity": 50})
    assert config.replay_buffer_config == {"type": "ReplayBuffer", "capacity": 50}
    algo = built(config)
    buf = algo.local_replay_buffer
    assert type(buf) is ReplayBuffer and buf.capacity == 50
    calls = record_updates(algo)
    algo.train()
    assert calls
    assert all(np.all(c[0]["weights"] == 1.0) for c in calls)
    assert len(buf) == 50 and buf.num_added == 64


def test_replay_buffer_config_without_type_updates_the_default():
    config = dqn_config(replay_buffer_config={"capacity": 123, "alpha": 0.5})
    assert config.replay_buffer_config == {"type": "PrioritizedEpisodeReplayBuffer", "capacity": 123,
                                           "alpha": 0.5, "beta": 0.4}
    algo = config.build()
    try:
        buf = algo.local_replay_buffer
        assert isinstance(buf, PrioritizedReplayBuffer) and buf.capacity == 123 and buf.alpha == 0.5
    finally:
        algo.stop()


def test_legacy_flat_replay_keys_are_mapped():
    config = DQNConfig().update_from_dict({"buffer_size": 1000, "prioritized_replay": False, "learning_starts": 10})
    assert config.replay_buffer_config["capacity"] == 1000
    assert config.replay_buffer_config["type"] in ("ReplayBuffer", "EpisodeReplayBuffer")
    assert config.num_steps_sampled_before_learning_starts == 10
    config = DQNConfig().update_from_dict({
        "prioritized_replay": True, "prioritized_replay_alpha": 0.5, "prioritized_replay_beta": 0.7,
        "prioritized_replay_eps": 1e-4, "buffer_size": 300,
    })
    buf = make_replay_buffer(config.replay_buffer_config)
    assert isinstance(buf, PrioritizedReplayBuffer)
    assert (buf.capacity, buf.alpha, buf.beta, buf.eps) == (300, 0.5, 0.7, 1e-4)
    config = DQNConfig()
    config["buffer_size"] = 500
    assert config.replay_buffer_config["capacity"] == 500
    # Old "unset" values are accepted and change nothing.
    config = DQNConfig().update_from_dict({"buffer_size": None, "prioritized_replay_alpha": None})
    assert config.replay_buffer_config == DQNConfig().replay_buffer_config


def test_legacy_dict_config_builds_the_mapped_buffer():
    algo = DQN(config={"buffer_size": 1000, "prioritized_replay": False, "learning_starts": 10,
                       "train_batch_size": 8, "hiddens": [16], "model": {"fcnet_hiddens": [16]},
                       "min_sample_timesteps_per_iteration": 20, "seed": 0}, env="CartPole-v1")
    try:
        buf = algo.local_replay_buffer
        assert type(buf) is ReplayBuffer and buf.capacity == 1000
        calls = record_updates(algo)
        algo.train()
        assert calls and calls[0][1] == 12  # first fragment at or past 10 sampled steps
    finally:
        algo.stop()


@pytest.mark.parametrize("training,match", [
    (dict(n_step=0), "n_step"),
    (dict(n_step=(3, 2)), "low <= high"),
    (dict(n_step=(0, 2)), "'n_step' must be >= 1, got 0"),
    (dict(n_step="3"), "n_step"),
    (dict(n_step=True), "n_step"),
    (dict(replay_buffer_config={"type": "Nope"}), "unknown replay buffer type 'Nope'.*ReplayBuffer"),
    (dict(replay_buffer_config={"type": "PrioritizedReplayBufer"}), "Did you mean.*'PrioritizedReplayBuffer'"),
    (dict(replay_buffer_config={"capasity": 10}), "capasity.*Did you mean 'capacity'"),
    (dict(replay_buffer_config="big"), "replay_buffer_config"),
    (dict(training_intensity=0), "training_intensity"),
    (dict(tau=0.0), "tau"),
    (dict(tau=1.5), "tau"),
    (dict(num_steps_sampled_before_learning_starts=-1), "num_steps_sampled_before_learning_starts"),
])
def test_bad_replay_options_raise_config_errors(training, match):
    with pytest.raises(ConfigError, match=match):
        DQNConfig().training(**training)


# ----------------------------------------------------------------------------- replayed batches


REPLAY_COLUMNS = {"obs", "actions", "rewards", "new_obs", "terminateds", "truncateds", "weights", "n_step",
                  "batch_indexes"}


def check_replayed_batch(batch: dict, obs_dim: int) -> None:
    assert REPLAY_COLUMNS <= set(batch)
    for key, value in batch.items():
        assert value.shape[0] == BATCH, key
    assert batch["obs"].shape == (BATCH, obs_dim) and batch["new_obs"].shape == (BATCH, obs_dim)
    for key in ("rewards", "terminateds", "truncateds", "weights", "n_step", "batch_indexes"):
        assert batch[key].shape == (BATCH,), key
    assert batch["terminateds"].dtype == bool and batch["truncateds"].dtype == bool
    assert batch["weights"].dtype == np.float32
    assert np.issubdtype(batch["batch_indexes"].dtype, np.integer)
    assert np.issubdtype(batch["n_step"].dtype, np.integer)


def test_dqn_learner_receives_replayed_batches_with_consistent_columns(built):
    algo = built(dqn_config(n_step=1))
    calls = record_updates(algo)
    algo.train()
    assert calls
    for batch, _, _ in calls:
        check_replayed_batch(batch, 4)
        assert batch["actions"].shape == (BATCH,) and np.issubdtype(batch["actions"].dtype, np.integer)
        assert set(np.unique(batch["actions"])) <= {0, 1}
        # One-step transitions of CartPole: rewards of 1 and new_obs is a later observation.
        np.testing.assert_array_equal(batch["rewards"], 1.0)
        assert batch["batch_indexes"].max() < len(algo.local_replay_buffer)


def test_sac_learner_receives_replayed_batches_with_consistent_columns(built):
    algo = built(sac_config())
    calls = record_updates(algo)
    algo.train()
    assert calls
    for batch, _, _ in calls:
        check_replayed_batch(batch, 3)
        assert batch["actions"].shape == (BATCH, 1) and batch["actions"].dtype == np.float32
        # Actions are stored in the module's squashed [-1, 1] space, not Pendulum's [-2, 2].
        assert np.abs(batch["actions"]).max() <= 1.0
        np.testing.assert_array_equal(batch["weights"], 1.0)  # SAC's default buffer is uniform


def test_every_env_step_reaches_the_replay_buffer_as_the_env_made_it(built):
    """Each sub-env's transitions are stored in order, exactly as the env returned them: the env's
    action (Pendulum's [-2, 2]) is the stored squashed one unsquashed, and a truncated step's
    new_obs is the episode's last observation, not the next episode's first."""
    import gymnasium as gym

    from rlx.utils.registry import register_env

    logs: list[list[tuple]] = []

    class Recorder(gym.Wrapper):
        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            # Steps of an episode left unfinished (the env check's step before sampling starts)
            # reach no buffer: keep only finished episodes and the running one.
            while self.log and not (self.log[-1][4] or self.log[-1][5]):
                self.log.pop()
            self.last_obs = obs
            return obs, info

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.log.append((self.last_obs, np.array(action, dtype=np.float64), reward, obs, terminated, truncated))
            self.last_obs = obs
            return obs, reward, terminated, truncated, info

    def make_env(env_config):
        env = Recorder(gym.make("Pendulum-v1", max_episode_steps=20))
        env.log = []
        logs.append(env.log)
        return env

    register_env("recorded_pendulum_for_replay_test", make_env)
    algo = built(sac_config().environment("recorded_pendulum_for_replay_test")
                 .env_runners(num_env_runners=0, num_envs_per_env_runner=2, rollout_fragment_length=4))
    for _ in range(2):
        algo.train()
    buffer = algo.local_replay_buffer
    stored = buffer._columns
    assert len(buffer) == buffer.num_added == 128
    for lane in range(2):
        rows = {k: v[lane:len(buffer):2] for k, v in stored.items()}
        matches = [log for log in logs if len(log) == 64
                   and np.allclose(np.stack([step[0] for step in log]), rows["obs"], atol=1e-6)]
        assert len(matches) == 1, f"lane {lane}: {len(matches)} sub-env logs match its observations"
        log = matches[0]
        truncated = np.array([step[5] for step in log])
        assert truncated.sum() == 3  # 64 steps of 20-step episodes
        np.testing.assert_allclose(np.stack([step[3] for step in log]), rows["new_obs"], atol=1e-6)
        np.testing.assert_allclose(np.stack([step[1] for step in log]), 2.0 * rows["actions"], atol=1e-5)
        np.testing.assert_allclose([step[2] for step in log], rows["rewards"], rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(truncated, rows["truncateds"])
        np.testing.assert_array_equal([step[4] for step in log], rows["terminateds"])
        # Where an episode was cut, the next row starts a fresh episode (a reset observation).
        ends = np.nonzero(truncated)[0]
        assert not np.allclose(rows["new_obs"][ends], rows["obs"][ends + 1])


# ----------------------------------------------------------------------------- checkpoints


def assert_same_samples(a, b, n: int = 3) -> None:
    for _ in range(n):
        sa, sb = a.sample(8, n_step=2), b.sample(8, n_step=2)
        assert sa.keys() == sb.keys()
        for k in sa:
            np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)


def test_buffer_checkpoint_files_round_trip_the_buffer(built, tmp_path):
    config = dqn_config().checkpointing(store_buffer_in_checkpoints=True)
    algo = built(config)
    algo.train()
    files = algo.write_checkpoint_extras(tmp_path)
    assert sorted(files) == ["replay_buffer.json", "replay_buffer.safetensors"]
    assert all((tmp_path / f).is_file() for f in files)
    fresh = built(config)
    assert len(fresh.local_replay_buffer) == 0
    fresh.read_checkpoint_extras(tmp_path)
    a, b = algo.local_replay_buffer, fresh.local_replay_buffer
    assert (len(b), b.num_added) == (len(a), a.num_added) == (64, 64)
    np.testing.assert_allclose(b.get_state()["priorities"], a.get_state()["priorities"])
    assert b.max_priority == a.max_priority
    assert_same_samples(a, b)


def test_without_store_buffer_no_buffer_files_are_written(built, tmp_path):
    algo = built(dqn_config())
    algo.train()
    assert algo.write_checkpoint_extras(tmp_path) == []
    path = Path(algo.save(str(tmp_path / "ckpt")))
    assert not (path / "replay_buffer.safetensors").exists()
    assert not (path / "replay_buffer.json").exists()


def test_store_buffer_in_checkpoints_restores_the_buffer(built, tmp_path):
    algo = built(dqn_config().checkpointing(store_buffer_in_checkpoints=True))
    algo.train()
    path = Path(algo.save(str(tmp_path / "ckpt")))
    meta = json.loads((path / "rlx_checkpoint.json").read_text())
    assert {"replay_buffer.safetensors", "replay_buffer.json"} <= set(meta["files"])
    restored = Algorithm.from_checkpoint(str(path))
    try:
        a, b = algo.local_replay_buffer, restored.local_replay_buffer
        assert (len(b), b.num_added) == (len(a), a.num_added) == (64, 64)
        assert_same_samples(a, b)
    finally:
        restored.stop()


def test_without_store_buffer_the_restored_buffer_is_empty(built, tmp_path):
    algo = built(dqn_config())
    algo.train()
    path = algo.save(str(tmp_path / "ckpt"))
    restored = Algorithm.from_checkpoint(path)
    try:
        assert len(restored.local_replay_buffer) == 0
        assert restored.get_state()["counters"] == algo.get_state()["counters"]
    finally:
        restored.stop()


def test_empty_buffer_can_be_checkpointed(built, tmp_path):
    config = dqn_config().checkpointing(store_buffer_in_checkpoints=True)
    algo = built(config)
    algo.write_checkpoint_extras(tmp_path)
    fresh = built(config)
    fresh.read_checkpoint_extras(tmp_path)
    assert len(fresh.local_replay_buffer) == 0


def test_missing_replay_buffer_file_gives_a_checkpoint_error_naming_it(built, tmp_path):
    config = dqn_config().checkpointing(store_buffer_in_checkpoints=True)
    algo = built(config)
    algo.train()
    path = Path(algo.save(str(tmp_path / "ckpt")))
    (path / "replay_buffer.safetensors").unlink()
    with pytest.raises(CheckpointError, match="replay_buffer.safetensors"):
        Algorithm.from_checkpoint(str(path))
    # Also when the metadata's file list does not mention it: the buffer reader names it.
    fresh = built(config)
    with pytest.raises(CheckpointError, match="replay_buffer.safetensors"):
        fresh.read_checkpoint_extras(path)


def test_buffer_state_packs_with_ormsgpack(built):
    algo = built(dqn_config())
    algo.train()
    state = algo.local_replay_buffer.get_state()
    packed = ormsgpack.packb(state, option=ormsgpack.OPT_SERIALIZE_NUMPY)
    assert isinstance(packed, bytes) and len(packed) > 0
    fresh = built(dqn_config())
    fresh.local_replay_buffer.set_state(ormsgpack.unpackb(packed))
    assert len(fresh.local_replay_buffer) == len(algo.local_replay_buffer)
    assert_same_samples(algo.local_replay_buffer, fresh.local_replay_buffer)


def test_update_credit_and_n_step_generator_survive_get_state(built):
    config = dqn_config(num_steps_sampled_before_learning_starts=0, training_intensity=6, n_step=(1, 5))
    algo = built(config)
    algo.training_step()  # 1.5 updates of credit: one done, half carried over
    state = json.loads(json.dumps(algo.get_state()))
    fresh = built(config)
    fresh.set_state(state)
    fresh.local_replay_buffer.set_state(algo.local_replay_buffer.get_state())
    drawn = [record_buffer_samples(a) for a in (algo, fresh)]
    per_step = {0: [], 1: []}
    for i, a in enumerate((algo, fresh)):
        for _ in range(4):
            before = len(drawn[i])
            a.training_step()
            per_step[i].append(len(drawn[i]) - before)
    # The carried-over half update completes on the next step, in both.
    assert per_step[0] == per_step[1] == [2, 1, 2, 1]
    assert [s["n_step"] for s in drawn[0]] == [s["n_step"] for s in drawn[1]]
    assert len({s["n_step"] for s in drawn[0]}) >= 2


# ----------------------------------------------------------------------------- n-step transitions


def counting_config(**training) -> DQNConfig:
    """DQN on CountingEnv (obs = step count, reward 1, 5-step episodes): n-step rows are checkable."""
    opts = dict(hiddens=[8], model={"fcnet_hiddens": [8]}, train_batch_size=BATCH, n_step=3, gamma=0.5,
                num_steps_sampled_before_learning_starts=1000)
    opts.update(training)
    return (DQNConfig().environment("envs_for_tests:CountingEnv", env_config={"length": 5})
            .training(**opts).reporting(min_sample_timesteps_per_iteration=64).debugging(seed=0))


def assert_n_step_rows_stay_in_their_episode(buffer, n_step: int = 3, gamma: float = 0.5) -> None:
    s = buffer.sample(500, n_step=n_step, gamma=gamma)
    steps = s["n_step"]
    obs, new_obs = s["obs"][:, 0], s["new_obs"][:, 0]
    bad = new_obs - obs != steps
    assert not bad.any(), (
        f"{int(bad.sum())} n-step rows leave their episode, e.g. obs {obs[bad][:5]} -> new_obs {new_obs[bad][:5]}")
    np.testing.assert_allclose(s["rewards"], (1 - gamma ** steps) / (1 - gamma), rtol=1e-6)
    # Rows stop at the terminal step (t = 5) and only there.
    np.testing.assert_array_equal(s["terminateds"], new_obs == 5)


def test_replayed_n_step_rows_follow_one_episode(built):
    algo = built(counting_config(num_steps_sampled_before_learning_starts=0))
    calls = record_updates(algo)
    algo.train()
    assert_n_step_rows_stay_in_their_episode(algo.local_replay_buffer)
    for batch, _, _ in calls:
        np.testing.assert_array_equal(batch["new_obs"][:, 0] - batch["obs"][:, 0], batch["n_step"])


def test_restored_buffer_does_not_link_its_open_episode_to_new_episodes(built, tmp_path):
    config = counting_config().checkpointing(store_buffer_in_checkpoints=True)
    algo = built(config)
    result = algo.train()
    # 64 steps of 5-step episodes from a reset: the checkpoint is taken 4 steps into an episode.
    assert result["num_env_steps_sampled_lifetime"] == 64
    algo.write_checkpoint_extras(tmp_path)
    # What from_checkpoint does: a new Algorithm (whose env runner starts new episodes), then state + buffer.
    restored = built(config)
    restored.set_state(json.loads(json.dumps(algo.get_state())))
    restored.read_checkpoint_extras(tmp_path)
    restored.training_step()
    assert_n_step_rows_stay_in_their_episode(restored.local_replay_buffer)


# ----------------------------------------------------------------------------- legacy keys with a typed buffer


def test_legacy_flat_keys_are_not_lost_next_to_a_typed_replay_buffer_config():
    # RLlib 1.x configs carried both the typed replay_buffer_config and the flat keys.
    for d in ({"replay_buffer_config": {"type": "MultiAgentReplayBuffer"}, "buffer_size": 1000},
              {"buffer_size": 1000, "replay_buffer_config": {"type": "MultiAgentReplayBuffer"}}):
        config = DQNConfig().update_from_dict(d)
        assert config.replay_buffer_config.get("capacity") == 1000, d
    config = DQNConfig().update_from_dict({
        "replay_buffer_config": {"type": "MultiAgentPrioritizedReplayBuffer", "capacity": 300},
        "prioritized_replay_alpha": 0.5, "prioritized_replay_beta": 0.9,
    })
    buf = make_replay_buffer(config.replay_buffer_config)
    assert (buf.capacity, buf.alpha, buf.beta) == (300, 0.5, 0.9)


# ----------------------------------------------------------------------------- determinism


def weights_after_training(config, global_seed: int) -> dict:
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(global_seed)  # the algorithm's seed, not torch's global one, must decide
        np.random.seed(global_seed)
        algo = config.build()
        try:
            algo.train()
            algo.train()
            return algo.get_weights()["default_policy"]
        finally:
            algo.stop()


@pytest.mark.parametrize("make", [
    lambda: dqn_config(),
    lambda: dqn_config(noisy=True),
    lambda: dqn_config(num_atoms=5, v_min=0.0, v_max=20.0, n_step=(1, 3)),
    lambda: sac_config(),
    lambda: sac_config().environment("CartPole-v1"),
], ids=["dqn", "dqn-noisy", "dqn-distributional", "sac", "sac-discrete"])
def test_same_seed_gives_identical_weights(make):
    wa = weights_after_training(make(), global_seed=1)
    wb = weights_after_training(make(), global_seed=2)
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)


def test_sequence_storage_unit_may_come_before_use_lstm_in_one_training_call():
    """RLlib's replay-buffer example sets storage_unit=SEQUENCES with model use_lstm in the same
    training() call: the buffer setting is checked once the model is known, not refused early."""
    from rlx.algorithms.dqn import DQNConfig
    from rlx.utils.errors import NotSupportedYetError
    from rlx.utils.replay_buffers.replay_buffer import StorageUnit

    rb = {"type": "MultiAgentPrioritizedReplayBuffer", "storage_unit": StorageUnit.SEQUENCES}
    algo = (DQNConfig().environment("CartPole-v1")
            .training(replay_buffer_config=rb, model={"use_lstm": True, "max_seq_len": 8}).build())
    try:
        assert type(algo.local_replay_buffer).__name__ == "SequenceReplayBuffer"
    finally:
        algo.stop()
    with pytest.raises(NotSupportedYetError, match="sequences"):
        DQNConfig().environment("CartPole-v1").training(replay_buffer_config=rb).build()
