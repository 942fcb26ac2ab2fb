"""User OfflineData / OfflinePreLearner subclasses and the learner connector in the prelearner
(issue 35; RLlib's `offline_rl/offline_rl_with_image_data.py` and its `classes`).

- rlx.examples.offline_rl.classes: ImageOfflineData serves decoded images, ImageOfflinePreLearner
  maps them to episodes and the base class turns those into a flat train batch.
- `offline_data(prelearner_class=..., offline_data_class=...)`: an Algorithm trains through the
  user's classes.
- As in RLlib 2.60, the OfflinePreLearner runs the learner connector pieces on what it maps;
  inside an Algorithm the Learner runs them, so they run once per train row.

Ray is not started: the data is read as rlx reads it without Ray.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlx.algorithms.bc import BCConfig
from rlx.connectors.connector_v2 import ConnectorV2
from rlx.core.columns import Columns
from rlx.core.sample_batch import MultiAgentBatch
from rlx.offline.offline_prelearner import OfflinePreLearner

OBS_SPACE = gym.spaces.Box(-5.0, 5.0, (4,), np.float32)
ACT_SPACE = gym.spaces.Discrete(2)


@pytest.fixture
def no_ray(monkeypatch):
    """Read as rlx does when Ray is not installed (no Ray start)."""
    import rlx.offline.offline_data as offline_data

    monkeypatch.setattr(offline_data, "ray_data", lambda: None)


def step_rows(n: int = 40, seed: int = 0) -> dict[str, np.ndarray]:
    """n rows of steps (RLlib's new-stack layout) of random 4-dim observations, episodes of 10."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (n + 1, 4)).astype(np.float32)
    return {"obs": obs[:-1], "new_obs": obs[1:], "actions": rng.integers(0, 2, n), "rewards": np.ones(n, np.float32),
            "terminateds": (np.arange(n) % 10) == 9, "truncateds": np.zeros(n, bool),
            "eps_id": np.array([f"e{i // 10}" for i in range(n)])}


def write_parquet(path, rows: dict[str, np.ndarray]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({k: [v.tolist() for v in values] if values.ndim > 1 else values.tolist()
                             for k, values in rows.items()}), path / "rows.parquet")


class AddTen(ConnectorV2):
    """A learner connector piece adding 10 to every reward, counting the rows it saw."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rows_seen = 0
        self.modules = []

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        batch[Columns.REWARDS] = np.asarray(batch[Columns.REWARDS]) + 10.0
        self.rows_seen += int(np.size(batch[Columns.REWARDS]))
        self.modules.append(rl_module)
        return batch


def test_image_offline_data_and_prelearner_turn_image_files_into_train_rows(tmp_path, no_ray):
    from PIL import Image

    from rlx.examples.offline_rl.classes.image_offline_data import ImageOfflineData
    from rlx.examples.offline_rl.classes.image_offline_prelearner import ImageOfflinePreLearner

    rng = np.random.default_rng(0)
    images = [rng.integers(0, 255, (8, 8, 3), dtype=np.uint8) for _ in range(3)]
    for i, image in enumerate(images):
        Image.fromarray(image).save(tmp_path / f"img{i}.png")
    obs_space = gym.spaces.Box(0, 255, (8, 8, 3), np.float32)
    config = (BCConfig().environment(observation_space=obs_space, action_space=ACT_SPACE)
              .offline_data(input_=[str(tmp_path)], prelearner_class=ImageOfflinePreLearner).debugging(seed=0))
    data = ImageOfflineData(config)
    batch = data.data.take_batch(3)
    assert np.array_equal(batch["array"], np.stack(images))  # decoded, in file order

    prelearner = ImageOfflinePreLearner(config=config, learner=None, spaces=(obs_space, ACT_SPACE))
    out = prelearner(batch)
    assert np.array_equal(out["default_policy/obs"], np.stack(images).astype(np.float32))
    assert np.array_equal(out["default_policy/new_obs"], out["default_policy/obs"])  # one-step episodes
    assert set(out["default_policy/actions"].tolist()) <= {0, 1}
    assert out["default_policy/terminateds"].all() and len(set(out["default_policy/eps_id"].tolist())) == 3

    # OfflineData.sample maps the rows with the config's prelearner_class.
    sampled = data.sample(num_samples=2)
    assert isinstance(sampled, MultiAgentBatch)
    assert sampled.policy_batches["default_policy"]["obs"].shape == (2, 8, 8, 3)


def test_an_algorithm_trains_through_the_users_prelearner_and_offline_data_classes(tmp_path, no_ray):
    from rlx.offline.offline_data import OfflineData

    write_parquet(tmp_path / "data", step_rows())

    class FlipActions(OfflinePreLearner):
        """Maps rows as the base class does, with every action flipped."""

        instances: list = []

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            FlipActions.instances.append(self)
            self.calls = 0

        def __call__(self, batch):
            self.calls += 1
            batch = dict(batch, actions=1 - np.asarray(batch["actions"]))
            return super().__call__(batch)

    class CountingData(OfflineData):
        samples = 0

        def sample(self, *args, **kwargs):
            CountingData.samples += 1
            return super().sample(*args, **kwargs)

    FlipActions.instances = []
    CountingData.samples = 0
    config = (BCConfig().environment(observation_space=OBS_SPACE, action_space=ACT_SPACE)
              .offline_data(input_=str(tmp_path / "data"), input_read_method="read_parquet",
                            prelearner_class=FlipActions, offline_data_class=CountingData)
              .training(train_batch_size=20).debugging(seed=0))
    algo = config.build()
    try:
        seen = {}
        original = algo.learner.update_from_batch

        def spy(batch, timestep):
            valid = np.asarray(batch.get(Columns.VALID, np.ones(np.shape(batch[Columns.ACTIONS]), bool)), bool)
            seen["actions"] = np.asarray(batch[Columns.ACTIONS])[valid]
            seen["obs"] = np.asarray(batch[Columns.OBS])[valid]
            return original(batch, timestep)

        algo.learner.update_from_batch = spy
        algo.train()
    finally:
        algo.stop()
    assert CountingData.samples >= 1
    assert FlipActions.instances and FlipActions.instances[0].calls >= 1
    # Every trained row has the flipped action of the recorded row with its observation.
    rows = step_rows()
    recorded = {tuple(o.tolist()): int(a) for o, a in zip(rows["obs"], rows["actions"])}
    assert len(seen["actions"]) == 20
    assert all(int(a) == 1 - recorded[tuple(o.tolist())] for o, a in zip(seen["obs"], seen["actions"]))


def test_the_prelearner_runs_the_learner_connector_pieces_on_what_it_maps(no_ray):
    pieces = []

    def make(obs_space, act_space):
        pieces.append(AddTen())
        return pieces[-1]

    config = (BCConfig().environment(observation_space=OBS_SPACE, action_space=ACT_SPACE)
              .training(learner_connector=make).debugging(seed=0))
    rows = step_rows(20)
    prelearner = OfflinePreLearner(config=config, spaces=(OBS_SPACE, ACT_SPACE))
    # RLlib's mapping of rows of steps: one one-step episode per row.
    episodes = prelearner._map_to_episodes(rows)["episodes"]
    assert [len(e) for e in episodes] == [1] * 20
    assert np.allclose([e.get_observations()[0] for e in episodes], rows["obs"])
    out = prelearner(rows)
    assert np.allclose(out["default_policy/rewards"], rows["rewards"] + 10.0)
    assert pieces[-1].rows_seen == 20
    module = pieces[-1].modules[-1]
    assert module is not None and module.observation_space.shape == (4,)  # the module the pipeline runs with

    # A prelearner whose batches a Learner processes leaves the pieces to it.
    left = OfflinePreLearner(config=config, spaces=(OBS_SPACE, ACT_SPACE), learner_connector_in_learner=True)(rows)
    assert np.allclose(left["default_policy/rewards"], rows["rewards"])


def test_inside_an_algorithm_the_learner_connector_pieces_run_once_per_row(tmp_path, no_ray):
    write_parquet(tmp_path / "data", step_rows())
    pieces = []

    def make(obs_space, act_space):
        pieces.append(AddTen())
        return pieces[-1]

    config = (BCConfig().environment(observation_space=OBS_SPACE, action_space=ACT_SPACE)
              .offline_data(input_=str(tmp_path / "data"), input_read_method="read_parquet")
              .training(learner_connector=make, train_batch_size=20).debugging(seed=0))
    algo = config.build()
    try:
        seen = {}
        original = algo.learner.update_from_batch

        def spy(batch, timestep):
            seen["rewards"] = np.array(batch[Columns.REWARDS]).reshape(-1)
            return original(batch, timestep)

        algo.learner.update_from_batch = spy
        algo.train()
    finally:
        algo.stop()
    assert sum(p.rows_seen for p in pieces) == 20  # the Learner's pipeline only, not the prelearner's too
    assert np.allclose(seen["rewards"], 11.0)  # +10 once
