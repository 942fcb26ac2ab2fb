"""Datasets of other tools as offline input: Minari datasets (`input_="minari:<id>"`) and
D4RL-style HDF5 files (`input_="/path/file.hdf5"`), read into the batches rlx's own files give."""
from __future__ import annotations

import gymnasium as gym
import h5py
import numpy as np
import pytest

from rlx.algorithms.bc import BCConfig
from rlx.core.columns import Columns
from rlx.offline.dataset_readers import D4RLReader, MinariReader
from rlx.offline.io_context import IOContext
from rlx.offline.spaces import OfflineDataError


def expert_action(obs: np.ndarray) -> int:
    """A hand-written CartPole controller that balances the pole for all 500 steps."""
    return int(obs[2] + 0.5 * obs[3] > 0)


def expert_episodes(num: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Episodes of the controller: observations (one more than steps), actions, rewards, flags."""
    env = gym.make("CartPole-v1")
    episodes = []
    for i in range(num):
        obs, _ = env.reset(seed=seed + i)
        observations, actions, rewards, terms, truncs = [obs], [], [], [], []
        done = False
        while not done:
            action = expert_action(obs)
            obs, reward, terminated, truncated, _ = env.step(action)
            observations.append(obs)
            actions.append(action)
            rewards.append(reward)
            terms.append(terminated)
            truncs.append(truncated)
            done = terminated or truncated
        episodes.append({"observations": np.array(observations, np.float32), "actions": np.array(actions),
                         "rewards": np.array(rewards, np.float32), "terminations": np.array(terms),
                         "truncations": np.array(truncs)})
    return episodes


def _config(batch_size: int = 64) -> dict:
    return {"train_batch_size": batch_size, "seed": 0}


# ----------------------------------------------------------------------------- D4RL-style HDF5


def _write_hdf5(path, **datasets) -> str:
    with h5py.File(path, "w") as f:
        for name, values in datasets.items():
            f.create_dataset(name, data=values)
    return str(path)


def test_hdf5_with_next_observations_keeps_every_row(tmp_path):
    obs = np.arange(10, dtype=np.float32).reshape(5, 2)
    path = _write_hdf5(tmp_path / "d.hdf5", observations=obs, next_observations=obs + 100,
                       actions=np.arange(5), rewards=np.ones(5), terminals=[0, 1, 0, 0, 1], timeouts=np.zeros(5))
    reader = D4RLReader(path, IOContext(config=_config(5)))
    assert (reader.num_episodes, reader.num_steps) == (2, 5)
    batch = reader.next()
    assert len(batch[Columns.REWARDS]) == 5
    order = np.argsort(batch[Columns.ACTIONS], kind="stable")
    np.testing.assert_array_equal(batch[Columns.NEXT_OBS][order], obs + 100)
    np.testing.assert_array_equal(batch[Columns.EPS_ID][order], [0, 0, 1, 1, 1])


def test_hdf5_without_next_observations_drops_timeouts_and_truncates_before_them(tmp_path):
    # Episode 0: rows 0-2, timeout at row 2. Episode 1: rows 3-5, terminal at 5. Row 6: the file ends mid-episode.
    obs = np.arange(7, dtype=np.float32).reshape(7, 1)
    path = _write_hdf5(tmp_path / "d.h5", observations=obs, actions=np.zeros((7, 1), np.float32),
                       rewards=np.arange(7), terminals=[0, 0, 0, 0, 0, 1, 0], timeouts=[0, 0, 1, 0, 0, 0, 0])
    reader = D4RLReader(path, IOContext(config=_config(1)))
    rows = reader.columns
    np.testing.assert_array_equal(rows[Columns.REWARDS], [0, 1, 3, 4, 5])
    np.testing.assert_array_equal(rows[Columns.NEXT_OBS][:, 0][[0, 1, 2, 3]], [1, 2, 4, 5])
    np.testing.assert_array_equal(rows[Columns.TRUNCATEDS], [False, True, False, False, False])
    np.testing.assert_array_equal(rows[Columns.TERMINATEDS], [False, False, False, False, True])
    np.testing.assert_array_equal(rows[Columns.EPS_ID], [0, 0, 1, 1, 1])


def test_hdf5_errors_name_the_problem(tmp_path):
    with pytest.raises(OfflineDataError, match="not a D4RL-style dataset.*terminals"):
        D4RLReader(_write_hdf5(tmp_path / "a.hdf5", observations=np.zeros((3, 2)), actions=np.zeros(3),
                               rewards=np.zeros(3)))
    with pytest.raises(OfflineDataError, match="different lengths"):
        D4RLReader(_write_hdf5(tmp_path / "b.hdf5", observations=np.zeros((3, 2)), actions=np.zeros(2),
                               rewards=np.zeros(3), terminals=np.zeros(3)))
    (tmp_path / "c.hdf5").write_text("not hdf5")
    with pytest.raises(OfflineDataError, match="cannot read .* as HDF5"):
        D4RLReader(str(tmp_path / "c.hdf5"))
    with pytest.raises(OfflineDataError, match="not found"):
        D4RLReader(str(tmp_path / "missing.hdf5"))


def test_bc_trains_on_an_hdf5_file_through_input_(tmp_path):
    episodes = expert_episodes(2)
    path = _write_hdf5(
        tmp_path / "cartpole.hdf5",
        observations=np.concatenate([e["observations"][:-1] for e in episodes]),
        next_observations=np.concatenate([e["observations"][1:] for e in episodes]),
        actions=np.concatenate([e["actions"] for e in episodes]),
        rewards=np.concatenate([e["rewards"] for e in episodes]),
        terminals=np.concatenate([e["terminations"] for e in episodes]),
        timeouts=np.concatenate([e["truncations"] for e in episodes]))
    algo = BCConfig().environment("CartPole-v1").offline_data(input_=path).training(train_batch_size=500).build()
    try:
        result = algo.train()
        assert result["num_env_steps_trained_lifetime"] >= 500
        assert np.isfinite(result["learners"]["default_policy"]["policy_loss"])
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- Minari


@pytest.fixture
def minari_cartpole(tmp_path, monkeypatch):
    """A local Minari dataset "cartpole/expert-v0" of 20 expert episodes (10k steps)."""
    import minari
    from minari.data_collector import EpisodeBuffer

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    episodes = expert_episodes(20)
    buffers = [EpisodeBuffer(id=i, observations=e["observations"], actions=e["actions"], rewards=e["rewards"],
                             terminations=e["terminations"], truncations=e["truncations"])
               for i, e in enumerate(episodes)]
    with pytest.warns(UserWarning):  # minari warns that eval_env defaults to the env
        minari.create_dataset_from_buffers(dataset_id="cartpole/expert-v0", buffer=buffers,
                                           env=gym.make("CartPole-v1"), algorithm_name="hand-written controller",
                                           author="rlx tests", author_email="tests@example.com",
                                           code_permalink="https://example.com/rlx", description="CartPole expert")
    return episodes


def test_minari_reader_serves_each_episodes_steps(minari_cartpole):
    reader = MinariReader("cartpole/expert-v0", IOContext(config=_config(700)))
    assert reader.num_episodes == 20 and reader.num_steps == sum(len(e["rewards"]) for e in minari_cartpole)
    batch = reader.next()
    assert len(batch[Columns.REWARDS]) == 700
    first = minari_cartpole[int(batch[Columns.EPS_ID][0])]
    # The batch starts at an episode's first step; new_obs is the following observation.
    np.testing.assert_allclose(batch[Columns.OBS][:5], first["observations"][:5])
    np.testing.assert_allclose(batch[Columns.NEXT_OBS][:5], first["observations"][1:6])
    np.testing.assert_array_equal(batch[Columns.ACTIONS][:5], first["actions"][:5])


def test_unknown_minari_dataset_is_a_clear_error(minari_cartpole):
    with pytest.raises(OfflineDataError, match="'cartpole/nothing-v0' could not be loaded.*minari list local"):
        MinariReader("cartpole/nothing-v0")


def test_bc_learns_cartpole_from_a_minari_dataset(minari_cartpole):
    algo = (BCConfig().environment("CartPole-v1").offline_data(input_="minari:cartpole/expert-v0")
            .training(lr=1e-2, train_batch_size=1000)
            .evaluation(evaluation_interval=5, evaluation_duration=10, evaluation_config={"explore": False})
            .debugging(seed=0).build())
    try:
        best = 0.0
        for _ in range(60):
            result = algo.train()
            if "evaluation" in result:
                best = max(best, result["evaluation"]["env_runners"]["episode_return_mean"])
                if best >= 450:
                    break
        assert best >= 450
    finally:
        algo.stop()
