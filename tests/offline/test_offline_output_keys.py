"""RLlib 2.60's offline output settings: `output_write_episodes`, `output_max_rows_per_file` and
`output_write_remaining_data` (as RLlib's `offline_rl/cartpole_recording.py` sets them).

- Episode records: one JSON line (Parquet row) per episode chunk, read back into the same
  training rows, so BC and MARWIL train on them.
- Files of exactly `output_max_rows_per_file` rows (episodes, or steps), the rest written at
  stop only with `output_write_remaining_data`.
- The default keeps RLlib's old-stack format (one record per sampled batch).
"""
from __future__ import annotations

import collections
import glob
import json
from pathlib import Path

import numpy as np
import pytest

from rlx.algorithms.bc import BCConfig
from rlx.algorithms.marwil import MARWILConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.offline import JsonReader
from rlx.utils.errors import ConfigError

BATCH = 400


def recorder(output, **offline) -> PPOConfig:
    # JSON unless a test says otherwise: output_max_rows_per_file alone would pick Parquet, as RLlib's new stack.
    offline.setdefault("output_config", {"format": "json"})
    return (PPOConfig().environment("CartPole-v1")
            .training(train_batch_size=BATCH, minibatch_size=100, num_epochs=1)
            .offline_data(output=output, **offline).debugging(seed=0))


def record(output, iterations: int = 2, batch_mode: str = "truncate_episodes", **offline) -> int:
    """Train a small PPO writing to `output`; returns the env steps it sampled."""
    algo = recorder(str(output), **offline).env_runners(batch_mode=batch_mode).build()
    try:
        for _ in range(iterations):
            result = algo.train()
    finally:
        algo.stop()
    return result["num_env_steps_sampled_lifetime"]


def json_files(directory: Path) -> list[list[dict]]:
    """The records of each JSON file under `directory`, files in name order."""
    return [[json.loads(line) for line in Path(p).read_text().splitlines() if line.strip()]
            for p in sorted(glob.glob(str(directory / "*.json")))]


def train_bc_and_marwil(data: Path) -> None:
    for config in (BCConfig(), MARWILConfig()):
        algo = (config.environment("CartPole-v1").offline_data(input_=str(data))
                .training(train_batch_size=BATCH).debugging(seed=0).build())
        try:
            result = algo.train()
        finally:
            algo.stop()
        assert result["num_env_steps_trained_lifetime"] >= BATCH
        assert np.isfinite(result["learners"]["default_policy"]["policy_loss"])


def test_the_settings_are_accepted_checked_and_default_to_the_old_stack_format():
    config = PPOConfig().offline_data(output="local:///tmp/cartpole/", output_write_episodes=True,
                                      output_max_rows_per_file=1000, output_write_remaining_data=True)
    assert (config.output_write_episodes, config.output_max_rows_per_file, config.output_write_remaining_data) \
        == (True, 1000, True)
    default = PPOConfig()
    assert (default.output_write_episodes, default.output_max_rows_per_file,
            default.output_write_remaining_data) == (False, None, False)
    with pytest.raises(ConfigError, match="output_max_rows_per_file"):
        PPOConfig().offline_data(output_max_rows_per_file=0)
    with pytest.raises(ConfigError, match="output_write_episodes"):
        PPOConfig().offline_data(output_write_episodes="yes")


def test_complete_episodes_are_one_record_each_and_train_bc_and_marwil(tmp_path):
    steps = record(tmp_path, batch_mode="complete_episodes", output_write_episodes=True,
                   output_compress_columns=[])
    recs = [r for f in json_files(tmp_path) for r in f]
    assert len(recs) > 10
    for rec in recs:
        assert rec["type"] == "SampleBatch"
        assert len(set(rec["eps_id"])) == 1
        assert rec["t"] == list(range(len(rec["t"])))
        ends = np.logical_or(rec["terminateds"], rec["truncateds"])
        assert ends[-1] and not ends[:-1].any()  # a whole episode
    assert len({r["eps_id"][0] for r in recs}) == len(recs)
    assert sum(len(r["rewards"]) for r in recs) == steps
    # The readers give back one episode per record ...
    per_record = list(JsonReader(str(tmp_path)).read_all_files())
    assert [len(b) for b in per_record] == [len(r["rewards"]) for r in recs]
    # ... and BC and MARWIL train on them.
    train_bc_and_marwil(tmp_path)


def test_episodes_cut_by_a_batch_end_span_records_with_continuing_steps(tmp_path):
    steps = record(tmp_path, iterations=3, output_write_episodes=True)
    recs = [r for f in json_files(tmp_path) for r in f]
    assert sum(len(r["rewards"]) for r in recs) == steps
    steps_of = collections.defaultdict(list)
    for rec in recs:
        assert len(set(rec["eps_id"])) == 1
        ends = np.logical_or(rec["terminateds"], rec["truncateds"])
        assert not ends[:-1].any()
        steps_of[rec["eps_id"][0]].extend(rec["t"])
    assert all(ts == list(range(len(ts))) for ts in steps_of.values())
    assert len(recs) > len(steps_of)  # some episodes were cut, into several records


def test_step_records_fill_files_of_max_rows_and_the_rest_needs_write_remaining_data(tmp_path):
    rows = 300
    steps = record(tmp_path / "drop", output_max_rows_per_file=rows)
    files = json_files(tmp_path / "drop")
    assert [sum(len(r["rewards"]) for r in f) for f in files] == [rows] * (steps // rows)
    kept = record(tmp_path / "keep", output_max_rows_per_file=rows, output_write_remaining_data=True)
    assert kept == steps
    files = json_files(tmp_path / "keep")
    sizes = [sum(len(r["rewards"]) for r in f) for f in files]
    assert sizes == [rows] * (steps // rows) + ([steps % rows] if steps % rows else [])
    # Steps stay in order: episode ids and step indices continue across the file boundaries.
    steps_of = collections.defaultdict(list)
    for rec in (r for f in files for r in f):
        for eps_id, t in zip(rec["eps_id"], rec["t"]):
            steps_of[eps_id].append(t)
    assert all(ts == list(range(len(ts))) for ts in steps_of.values())


def test_episode_records_fill_files_of_max_rows_episodes(tmp_path):
    record(tmp_path, batch_mode="complete_episodes", output_write_episodes=True, output_max_rows_per_file=7,
           output_write_remaining_data=True)
    counts = [len(f) for f in json_files(tmp_path)]
    assert len(counts) > 2 and all(c == 7 for c in counts[:-1]) and 1 <= counts[-1] <= 7


def test_parquet_episode_records_are_rows_and_train_bc_and_marwil(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    steps = record(tmp_path, batch_mode="complete_episodes", output_config={"format": "parquet"},
                   output_write_episodes=True, output_max_rows_per_file=10, output_write_remaining_data=True)
    files = sorted(tmp_path.glob("*.parquet"))
    tables = [pq.read_table(f) for f in files]
    assert all(t.num_rows == 10 for t in tables[:-1]) and 1 <= tables[-1].num_rows <= 10
    lengths = [len(x) for t in tables for x in t.column("rewards").to_pylist()]
    assert sum(lengths) == steps
    first = tables[0].column("obs").to_pylist()[0]
    assert len(first) == lengths[0] and len(first[0]) == 4  # one row: the episode's observations
    from rlx.offline.parquet_io import ParquetReader

    episodes = list(ParquetReader(str(tmp_path)).read_all_files())
    assert [len(e) for e in episodes] == lengths
    assert all(len(set(e["eps_id"].tolist())) == 1 and e["terminateds"][-1] | e["truncateds"][-1]
               for e in episodes)
    assert episodes[0]["obs"].shape == (lengths[0], 4) and episodes[0]["obs"].dtype == np.float32
    train_bc_and_marwil(tmp_path)


def test_rllib_cartpole_recording_settings_write_readable_files(tmp_path):
    """The settings of RLlib's cartpole_recording.py, with a local:// output URI."""
    steps = record(f"local://{tmp_path}/cartpole", batch_mode="complete_episodes", output_write_episodes=True,
                   output_max_rows_per_file=1000, output_write_remaining_data=True,
                   output_compress_columns=["obs", "actions"])
    files = json_files(tmp_path / "cartpole")
    assert len(files) == 1  # fewer than 1000 episodes: the remaining data alone
    assert isinstance(files[0][0]["actions"], str)  # compressed, as asked
    assert sum(len(b) for b in JsonReader(f"local://{tmp_path}/cartpole").read_all_files()) == steps


def test_multi_agent_episode_records_are_refused_with_the_fix(tmp_path):
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    config = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
              .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **k: f"p{aid}")
              .training(train_batch_size=BATCH, minibatch_size=100, num_epochs=1))
    for setting, offline in (("output_write_episodes=True", {"output_write_episodes": True}),
                             ("output_max_rows_per_file", {"output_max_rows_per_file": 100})):
        with pytest.raises(ConfigError, match=rf"{setting} with multi-agent output.*output_write_episodes=False"):
            config.copy().offline_data(output=str(tmp_path), **offline).build()


def test_a_custom_output_writer_refuses_the_file_settings():
    class Collect:
        def __init__(self, ioctx):
            self.batches = []

        def write(self, batch):
            self.batches.append(batch)

    algo = recorder(Collect, output_max_rows_per_file=10).build()
    try:
        with pytest.raises(ConfigError, match="output_max_rows_per_file shape the JSON and Parquet files"):
            algo.train()
    finally:
        algo.stop()
