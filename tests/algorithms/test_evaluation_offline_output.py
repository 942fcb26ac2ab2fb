"""Offline output from evaluation EnvRunners (issue 35; RLlib's `offline_rl/cartpole_recording.py`).

In RLlib 2.60 every EnvRunner of a config with `output` records what it samples, so an
Algorithm that only evaluates (`algo.evaluate()`) records its evaluation episodes. rlx's
evaluation runners write their samples into `output` with the config's record settings, and
the files are complete once the Algorithm stops.
"""
from __future__ import annotations

import glob
import json

import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.callbacks.rllib_callback import RLlibCallback
from rlx.offline.input_factory import output_format
from rlx.offline.parquet_io import ParquetReader

pq = pytest.importorskip("pyarrow.parquet")


def recording_config(output: str, num_eval_runners: int, **offline) -> PPOConfig:
    """A PPO config that evaluates 3 CartPole episodes per evaluate() call and records them,
    with an on_episode_end callback keeping every evaluation episode's observations."""

    class KeepEvalEpisodes(RLlibCallback):
        episodes: list[np.ndarray] = []

        def on_episode_end(self, *, episode, env_runner=None, **kwargs):
            if env_runner is not None and env_runner.config.in_evaluation:
                KeepEvalEpisodes.episodes.append(np.asarray(episode.get_observations()))

    KeepEvalEpisodes.episodes = []
    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=0, batch_mode="complete_episodes")
              .evaluation(evaluation_num_env_runners=num_eval_runners, evaluation_duration=3,
                          evaluation_duration_unit="episodes", evaluation_interval=1,
                          evaluation_config=PPOConfig.overrides(explore=False))
              .offline_data(output=output, **offline)
              .callbacks(KeepEvalEpisodes)
              .debugging(seed=0))
    return config, KeepEvalEpisodes


def test_evaluation_runners_record_their_episodes_as_rllib_recording_does(tmp_path):
    """RLlib's recording settings (episode records, files of N rows, the rest at stop): the files
    hold exactly the evaluation episodes' steps, read back with their observations."""
    config, kept = recording_config(f"local://{tmp_path}/cartpole", 1, output_write_episodes=True,
                                    output_max_rows_per_file=4, output_write_remaining_data=True)
    assert output_format(config) == "parquet"  # RLlib's new-stack recorder writes Parquet
    algo = config.build()
    try:
        for _ in range(2):
            algo.evaluate()
        assert not glob.glob(f"{tmp_path}/cartpole/*.parquet")[1:]  # 6 episodes: one file of 4, 2 still buffered
    finally:
        algo.stop()
    files = sorted(glob.glob(f"{tmp_path}/cartpole/*.parquet"))
    tables = [pq.read_table(f) for f in files]
    assert [t.num_rows for t in tables] == [4, 2]  # the remaining 2 episodes at stop
    assert all("worker-1_" in f for f in files)  # written by the evaluation runner (index 1)
    episodes = kept.episodes
    assert len(episodes) == 6
    # Read back with rlx's offline reader: one batch per episode, the evaluation episodes' steps.
    batches = list(ParquetReader(f"local://{tmp_path}/cartpole").read_all_files())
    assert sorted(len(b) for b in batches) == sorted(len(e) - 1 for e in episodes)
    assert all(b["terminateds"][-1] or b["truncateds"][-1] for b in batches)
    obs = np.concatenate([b["obs"] for b in batches])
    recorded = np.concatenate([e[:-1] for e in episodes]).astype(np.float32)
    assert sorted(map(tuple, obs.round(5))) == sorted(map(tuple, recorded.round(5)))


def test_evaluation_in_the_driver_records_json_steps_and_training_output_is_unchanged(tmp_path):
    """No evaluation runners (the driver evaluates), RLlib's old-stack settings: JSON lines of
    steps, as the training output writes them, each evaluation episode complete."""
    config, kept = recording_config(str(tmp_path), 0, output_compress_columns=[])
    assert output_format(config) == "json"
    algo = config.build()
    try:
        algo.evaluate()
    finally:
        algo.stop()
    records = [json.loads(line) for f in sorted(glob.glob(f"{tmp_path}/*.json")) for line in open(f)]
    rewards = sum(len(r["rewards"]) for r in records)
    assert rewards == sum(len(e) - 1 for e in kept.episodes) and len(kept.episodes) == 3
    ends = sum(sum(r["terminateds"]) + sum(r["truncateds"]) for r in records)
    assert ends == 3
    first_obs = {tuple(np.asarray(r["obs"][i], np.float32).tolist()) for r in records
                 for i, t in enumerate(r["t"]) if t == 0}
    assert first_obs == {tuple(np.asarray(e[0], np.float32).tolist()) for e in kept.episodes}


def test_a_runner_that_returns_episodes_has_their_steps_written(tmp_path):
    """An evaluation runner of a user's training loop returns SingleAgentEpisodes: their steps
    are written, chunks of one episode under one eps_id."""
    from rlx.env.single_agent_episode import SingleAgentEpisode
    from rlx.offline.runner_output import close_runner_output, record_runner_sample

    config = PPOConfig().offline_data(output=str(tmp_path), output_config={"format": "json"},
                                      output_compress_columns=[])
    class Runner:  # what the writer reads of an EnvRunner
        worker_index = 3

    runner = Runner()
    runner.config = config
    first = SingleAgentEpisode(observations=[[0.0], [1.0], [2.0]], actions=[0, 1], rewards=[1.0, 2.0],
                               len_lookback_buffer=0)
    rest = SingleAgentEpisode(id_=first.id_, observations=[[2.0], [3.0]], actions=[1], rewards=[3.0],
                              terminated=True, len_lookback_buffer=0, t_started=2)
    record_runner_sample(runner, [first], fresh_episodes=False)
    record_runner_sample(runner, [rest], fresh_episodes=False)
    close_runner_output(runner)
    (path,) = glob.glob(f"{tmp_path}/*worker-3_*.json")
    records = [json.loads(line) for line in open(path)]
    assert [r["obs"] for r in records] == [[[0.0], [1.0]], [[2.0]]]
    assert [r["new_obs"][-1] for r in records] == [[2.0], [3.0]]
    assert [r["t"] for r in records] == [[0, 1], [2]] and records[1]["terminateds"] == [True]
    assert len({e for r in records for e in r["eps_id"]}) == 1
