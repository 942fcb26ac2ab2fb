"""Writing sampled experiences (`output`) and training from them (`input_`), RLlib's offline data API.

- Files: JSON lines (one SampleBatch per line, RLlib's column names, obs/new_obs compressed
  by default) and Parquet; every sampled step written once, episodes with ids and step indices
  that continue across batches, local or remote EnvRunners, single- or multi-agent.
- Reading: paths, globs, lists, directories, mixes with the sampler, user readers; bad files
  and records that do not fit the env get errors naming the file and line.
- The seed's episode-trace command writes readable traces.
"""
from __future__ import annotations

import collections
import glob
import json
import os
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_rlx
from rlx.algorithms.ppo import PPOConfig
from rlx.offline import (IOContext, InputReader, JsonReader, JsonWriter, MixedInput, NoopOutput, OutputWriter,
                         ShuffledInput)
from rlx.offline.compression import PREFIX, pack, unpack
from rlx.offline.spaces import OfflineDataError
from rlx.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlx.utils.errors import ConfigError

BATCH = 400
RLLIB_COLUMNS = {"obs", "new_obs", "actions", "rewards", "terminateds", "truncateds", "eps_id", "t", "agent_index",
                 "unroll_id", "action_logp", "action_prob", "action_dist_inputs"}


def small(seed: int = 0, **offline) -> PPOConfig:
    config = (PPOConfig().environment("CartPole-v1").training(train_batch_size=BATCH, minibatch_size=100, num_epochs=1)
              .debugging(seed=seed))
    return config.offline_data(**offline) if offline else config


def records(directory: Path) -> list[dict]:
    """Every JSON record under `directory`, in file order."""
    out = []
    for path in sorted(glob.glob(str(directory / "*.json"))):
        out.extend(json.loads(line) for line in Path(path).read_text().splitlines() if line.strip())
    return out


def write_samples(directory: Path, iterations: int = 2, **offline) -> int:
    """Train a small PPO that writes to `directory`; returns the env steps it sampled."""
    algo = small(output=str(directory), **offline).build()
    try:
        for _ in range(iterations):
            result = algo.train()
    finally:
        algo.stop()
    return result["num_env_steps_sampled_lifetime"]


@pytest.fixture(scope="module")
def cartpole_data(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("cartpole-data")
    write_samples(directory, iterations=3)
    return directory


# ----------------------------------------------------------------------------- writing


def test_json_output_holds_every_sampled_step_with_rllibs_columns(tmp_path):
    steps = write_samples(tmp_path, iterations=3)
    files = sorted(tmp_path.glob("output-*_worker-0_*.json"))
    assert len(files) == 1
    recs = records(tmp_path)
    assert len(recs) == 3  # one line per sampled batch
    assert all(r["type"] == "SampleBatch" for r in recs)
    assert set(recs[0]) - {"type"} == RLLIB_COLUMNS
    assert sum(len(r["rewards"]) for r in recs) == steps
    # obs and new_obs are compressed by default; the rest are lists.
    assert recs[0]["obs"].startswith(PREFIX) and recs[0]["new_obs"].startswith(PREFIX)
    obs = unpack(recs[0]["obs"])
    assert obs.shape == (len(recs[0]["rewards"]), 4) and obs.dtype == np.float32
    assert np.allclose(recs[0]["action_prob"], np.exp(recs[0]["action_logp"]), rtol=1e-5)


def test_episodes_keep_their_ids_and_step_indices_across_batches(tmp_path):
    write_samples(tmp_path, iterations=3)
    steps = collections.defaultdict(list)
    for rec in records(tmp_path):
        ends = np.logical_or(rec["terminateds"], rec["truncateds"])
        for eps_id, t, end in zip(rec["eps_id"], rec["t"], ends):
            steps[eps_id].append((t, bool(end)))
    assert len(steps) > 10
    for eps_id, rows in steps.items():
        ts = [t for t, _ in rows]
        assert ts == list(range(len(ts))), f"episode {eps_id} has steps {ts[:10]}..."
        assert not any(end for _, end in rows[:-1])
    finished = [rows for rows in steps.values() if rows[-1][1]]
    assert finished and all(len(rows) == rows[-1][0] + 1 for rows in finished)


def test_next_obs_of_a_step_is_the_obs_of_the_next_step(tmp_path):
    write_samples(tmp_path, iterations=1)
    rec = records(tmp_path)[0]
    obs, new_obs = unpack(rec["obs"]), unpack(rec["new_obs"])
    same_episode = np.asarray(rec["eps_id"][1:]) == np.asarray(rec["eps_id"][:-1])
    assert same_episode.sum() > 100
    assert np.array_equal(new_obs[:-1][same_episode], obs[1:][same_episode])


def test_uncompressed_output_writes_plain_lists(tmp_path):
    write_samples(tmp_path, iterations=1, output_compress_columns=[])
    rec = records(tmp_path)[0]
    assert isinstance(rec["obs"], list) and len(rec["obs"][0]) == 4
    assert isinstance(rec["new_obs"], list)


def test_output_logdir_writes_into_the_trial_directory():
    algo = small(output="logdir").build()
    try:
        algo.train()
        logdir = Path(algo.logdir)
    finally:
        algo.stop()
    assert len(list(logdir.glob("output-*.json"))) == 1


def test_building_writes_nothing_until_a_batch_is_sampled(tmp_path):
    algo = small(output=str(tmp_path / "out")).build()
    try:
        assert not (tmp_path / "out").exists()
        algo.train()
        assert (tmp_path / "out").exists()
    finally:
        algo.stop()


def test_output_rolls_over_to_new_files_at_max_file_size(tmp_path):
    write_samples(tmp_path, iterations=3, output_max_file_size=1000)
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 3
    assert all(len(p.read_text().splitlines()) == 1 for p in files)


def test_remote_env_runners_write_every_step_once(tmp_path):
    algo = small(output=str(tmp_path)).env_runners(num_env_runners=2, env_runner_backend="thread").build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    recs = records(tmp_path)
    assert sum(len(r["rewards"]) for r in recs) == result["num_env_steps_sampled_lifetime"]
    ts_by_episode = collections.defaultdict(list)
    for rec in recs:
        for eps_id, t in zip(rec["eps_id"], rec["t"]):
            ts_by_episode[eps_id].append(t)
    assert all(ts == list(range(len(ts))) for ts in ts_by_episode.values())


def test_multi_agent_batches_are_written_and_read_with_their_policy_ids(tmp_path):
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    def config():
        return (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
                .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda aid, *a, **k: f"p{aid}")
                .training(train_batch_size=BATCH, minibatch_size=100, num_epochs=1).debugging(seed=0))

    algo = config().offline_data(output=str(tmp_path)).build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    rec = records(tmp_path)[0]
    assert rec["type"] == "MultiAgentBatch"
    assert set(rec["policy_batches"]) == {"p0", "p1"}
    assert rec["count"] == result["num_env_steps_sampled_lifetime"]
    agent_steps = sum(len(b["rewards"]) for b in rec["policy_batches"].values())
    assert agent_steps == result["num_agent_steps_sampled_lifetime"]
    batch = JsonReader(str(tmp_path)).next()
    assert isinstance(batch, MultiAgentBatch) and set(batch.policy_batches) == {"p0", "p1"}
    # A multi-agent Algorithm trains its policies on the files.
    reader_algo = config().offline_data(input_=str(tmp_path)).build()
    try:
        result = reader_algo.train()
        assert set(result["learners"]) >= {"p0", "p1"}
        assert result["num_env_steps_sampled_lifetime"] >= rec["count"]
    finally:
        reader_algo.stop()


def test_parquet_output_reads_back_as_the_json_output_does(tmp_path):
    pytest.importorskip("pyarrow")
    write_samples(tmp_path / "json", iterations=1)
    algo = small(output=str(tmp_path / "pq"), output_config={"format": "parquet"}).build()
    try:
        algo.train()
    finally:
        algo.stop()
    files = list((tmp_path / "pq").glob("output-*.parquet"))
    assert len(files) == 1
    from rlx.offline.parquet_io import ParquetReader

    from_parquet = next(ParquetReader(str(tmp_path / "pq")).read_all_files())
    from_json = next(JsonReader(str(tmp_path / "json")).read_all_files())
    assert set(from_parquet) == set(from_json)
    for key in ("obs", "actions", "rewards", "terminateds", "t"):
        assert np.array_equal(from_parquet[key], from_json[key]), key
    # The Parquet files train as the JSON ones do.
    trainer = small(input_=str(tmp_path / "pq")).build()
    try:
        assert trainer.train()["num_env_steps_sampled_lifetime"] >= BATCH
    finally:
        trainer.stop()


def test_parquet_without_pyarrow_names_the_extra(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError("No module named 'pyarrow'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    algo = small(output=str(tmp_path), output_config={"format": "parquet"}).build()
    try:
        with pytest.raises(ConfigError, match=r"pyarrow.*'parquet' extra.*\.\[parquet\]"):
            algo.train()
    finally:
        algo.stop()


def test_custom_output_writer_gets_an_io_context(tmp_path):
    seen = []

    class Collect(OutputWriter):
        def __init__(self, ioctx):
            seen.append(ioctx)

        def write(self, sample_batch):
            seen.append(sample_batch)

    algo = small(output=Collect, output_config={"tag": 1}).build()
    try:
        algo.train()
    finally:
        algo.stop()
    assert isinstance(seen[0], IOContext) and seen[0].output_config == {"tag": 1}
    assert isinstance(seen[1], SampleBatch) and len(seen[1]) >= BATCH
    NoopOutput().write(seen[1])


def test_json_writer_and_reader_round_trip_a_sample_batch(tmp_path):
    batch = SampleBatch({"obs": np.arange(12, dtype=np.float32).reshape(3, 4), "actions": np.array([0, 1, 1]),
                         "rewards": np.array([1.0, 0.5, -1.0], np.float32), "eps_id": np.array([7, 7, 7])})
    writer = JsonWriter(str(tmp_path), compress_columns=["obs"])
    writer.write(batch)
    writer.close()
    back = next(JsonReader(str(tmp_path)).read_all_files())
    for key, value in batch.items():
        assert np.array_equal(back[key], value), key
    assert back["obs"].dtype == np.float32


def test_compressed_columns_are_npy_zlib_base64():
    array = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    text = pack(array)
    assert text.startswith("rlx:npy+zlib:")
    import base64
    import io
    import zlib

    raw = zlib.decompress(base64.b64decode(text[len(PREFIX):]))
    assert np.array_equal(np.load(io.BytesIO(raw), allow_pickle=False), array)


# ----------------------------------------------------------------------------- reading


def test_json_reader_takes_a_directory_glob_file_or_list(cartpole_data):
    files = sorted(str(p) for p in cartpole_data.glob("*.json"))
    for inputs in (str(cartpole_data), str(cartpole_data / "*.json"), files[0], files):
        reader = JsonReader(inputs)
        assert reader.files == files
        batch = reader.next()
        assert isinstance(batch, SampleBatch) and len(batch) >= 1


def test_json_reader_returns_at_least_train_batch_size_rows(cartpole_data):
    ioctx = IOContext(config=PPOConfig().training(train_batch_size=1000))
    batch = JsonReader(str(cartpole_data), ioctx).next()
    assert len(batch) >= 1000


def test_training_from_files_samples_no_env(cartpole_data):
    algo = small(input_=str(cartpole_data)).build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["num_env_steps_sampled_lifetime"] >= BATCH
    assert result["env_runners"]["num_episodes"] == 0
    assert result["learners"]["default_policy"]["num_minibatch_updates"] >= 1


def test_old_input_key_and_dqn_train_on_files(cartpole_data):
    from rlx.algorithms.dqn import DQNConfig

    config = DQNConfig().environment("CartPole-v1").debugging(seed=0)
    config.update_from_dict({"input": str(cartpole_data), "num_steps_sampled_before_learning_starts": 100})
    algo = config.build()
    try:
        for _ in range(3):
            result = algo.train()
    finally:
        algo.stop()
    assert result["num_env_steps_trained_lifetime"] > 0
    assert result["env_runners"]["num_episodes"] == 0


def test_mixed_input_draws_from_the_sampler_and_the_files(cartpole_data):
    algo = small(input_={"sampler": 0.5, str(cartpole_data): 0.5}).build()
    try:
        episodes = 0
        for _ in range(6):
            episodes += algo.train()["env_runners"]["num_episodes"]
    finally:
        algo.stop()
    assert episodes > 0  # some batches came from the envs


def test_mixed_input_probabilities_must_sum_to_one(cartpole_data):
    with pytest.raises(ConfigError, match="must sum to 1.0, they sum to 0.9"):
        small(input_={"sampler": 0.4, str(cartpole_data): 0.5})
    with pytest.raises(ConfigError, match="probability -0.5"):
        small(input_={"sampler": 1.5, str(cartpole_data): -0.5})


def test_mixed_and_shuffled_input_classes(cartpole_data):
    ioctx = IOContext(config=PPOConfig().training(train_batch_size=10).debugging(seed=3))

    class Constant(InputReader):
        def __init__(self, ioctx):
            self.ioctx = ioctx

        def next(self):
            return SampleBatch({"rewards": np.full(5, 42.0)})

    mixed = MixedInput({Constant: 0.5, str(cartpole_data): 0.5}, ioctx)
    kinds = {bool(np.all(mixed.next()["rewards"] == 42.0)) for _ in range(30)}
    assert kinds == {True, False}
    shuffled = ShuffledInput(Constant(ioctx), n=3, seed=0)
    assert len(shuffled.next()["rewards"]) == 5 and len(shuffled.buffer) == 3


def test_shuffle_buffer_size_wraps_the_reader(cartpole_data):
    algo = small(input_=str(cartpole_data), shuffle_buffer_size=2).build()
    try:
        assert isinstance(algo.env_runner_group.offline_io.reader, ShuffledInput)
        algo.train()
    finally:
        algo.stop()


def test_callable_input_gets_the_io_context(cartpole_data):
    contexts = []

    def make_reader(ioctx):
        contexts.append(ioctx)
        return JsonReader(str(cartpole_data), ioctx)

    algo = small(input_=make_reader, input_config={"note": "x"}).build()
    try:
        algo.train()
    finally:
        algo.stop()
    ioctx = contexts[0]
    assert ioctx.input_config == {"note": "x"} and ioctx.worker is algo.env_runner
    assert ioctx.config.train_batch_size == BATCH


def test_input_that_is_not_a_reader_is_refused():
    algo = small(input_=lambda ioctx: 3).build()
    try:
        with pytest.raises(ConfigError, match="returned int, which has no next"):
            algo.train()
    finally:
        algo.stop()
    with pytest.raises(ConfigError, match="'input_' must be 'sampler'"):
        small(input_=3)
    with pytest.raises(ConfigError, match="format 'csv'"):
        small(output_config={"format": "csv"})


def test_missing_input_files_are_named(tmp_path):
    cases = [(str(tmp_path / "nope.json"), f"offline input file {tmp_path}/nope.json not found"),
             (str(tmp_path / "*.json"), "no files match"),
             (str(tmp_path), "holds no .json or .jsonl files")]
    for input_, message in cases:
        algo = small(input_=input_).build()  # the files are opened by the first train(), not by build()
        try:
            with pytest.raises(OfflineDataError, match=message):
                algo.train()
        finally:
            algo.stop()


def test_a_checkpoint_of_an_offline_algorithm_restores_without_its_input(cartpole_data, tmp_path):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(cartpole_data, data)
    algo = small(input_=str(data)).build()
    try:
        algo.train()
        checkpoint = algo.save(str(tmp_path / "ckpt"))
    finally:
        algo.stop()
    shutil.rmtree(data)
    restored = type(algo).from_checkpoint(checkpoint)
    try:
        assert restored.compute_single_action(np.zeros(4, np.float32)) in (0, 1)
    finally:
        restored.stop()


def test_unreadable_line_is_named_by_file_and_line(cartpole_data, tmp_path):
    source = sorted(cartpole_data.glob("*.json"))[0]
    lines = source.read_text().splitlines()
    bad = tmp_path / "bad.json"
    bad.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2] + "\n")
    reader = JsonReader(str(bad))
    reader.batch_size = 10 ** 9  # read on into the broken line
    with pytest.raises(OfflineDataError, match=rf"{bad}, line 2: not valid JSON"):
        reader.next()
    bad.write_text('{"type": "Sample", "obs": []}\n')
    with pytest.raises(OfflineDataError, match=rf"{bad}, line 1: unknown record type 'Sample'"):
        JsonReader(str(bad)).next()


def test_records_that_do_not_fit_the_env_are_refused(cartpole_data, tmp_path):
    rec = json.loads(sorted(cartpole_data.glob("*.json"))[0].read_text().splitlines()[0])
    three_dim = dict(rec, obs=[[0.0, 0.0, 0.0]] * len(rec["rewards"]))
    (tmp_path / "a.json").write_text(json.dumps(three_dim) + "\n")
    algo = small(input_=str(tmp_path / "a.json")).build()
    try:
        with pytest.raises(OfflineDataError, match=r"a.json, line 1: column 'obs' has rows of shape \(3,\), but the "
                                                    r"policy's observations have shape \(4,\)"):
            algo.train()
    finally:
        algo.stop()
    bad_actions = dict(rec, actions=[5] * len(rec["rewards"]))
    (tmp_path / "b.json").write_text(json.dumps(bad_actions) + "\n")
    algo = small(input_=str(tmp_path / "b.json")).build()
    try:
        with pytest.raises(OfflineDataError, match=r"b.json, line 1: column 'actions' holds values from 5 to 5, "
                                                    r"outside the action space Discrete\(2\)"):
            algo.train()
    finally:
        algo.stop()


def test_rllib_style_records_are_read(tmp_path):
    """Plain lists and the old 'dones' column, as RLlib's JsonWriter wrote them with no compression."""
    n = 6
    rec = {"type": "SampleBatch", "obs": [[0.01 * i, 0.0, 0.0, 0.0] for i in range(n)],
           "new_obs": [[0.01 * (i + 1), 0.0, 0.0, 0.0] for i in range(n)], "actions": [0, 1] * (n // 2),
           "rewards": [1.0] * n, "dones": [False] * (n - 1) + [True], "eps_id": [3] * n, "t": list(range(n)),
           "action_prob": [0.5] * n, "agent_index": [0] * n}
    (tmp_path / "rllib.json").write_text(json.dumps(rec) + "\n")
    batch = JsonReader(str(tmp_path)).next()
    assert batch["terminateds"].tolist() == [False] * (n - 1) + [True]
    algo = small(input_=str(tmp_path)).build()
    try:
        algo.train()
    finally:
        algo.stop()


def test_rllib_lz4_columns_get_an_explanation(tmp_path):
    rec = {"type": "SampleBatch", "obs": "BCJNGGhAAAAAAAAAAAA=", "rewards": [1.0]}
    (tmp_path / "lz4.json").write_text(json.dumps(rec) + "\n")
    with pytest.raises(OfflineDataError, match="RLlib's format \\(LZ4 over a pickle\\).*output_compress_columns=\\[\\]"):
        JsonReader(str(tmp_path)).next()


def test_box_actions_are_normalized_unless_already_normalized(tmp_path):
    n = 4
    rec = {"type": "SampleBatch", "obs": [[1.0, 0.0, 0.0]] * n, "new_obs": [[1.0, 0.0, 0.0]] * n,
           "actions": [[2.0], [-2.0], [0.0], [1.0]], "rewards": [0.0] * n, "terminateds": [False] * n,
           "eps_id": [1] * n}
    (tmp_path / "p.json").write_text(json.dumps(rec) + "\n")

    def actions_trained_on(**offline):
        config = (PPOConfig().environment("Pendulum-v1").training(train_batch_size=n, minibatch_size=n, num_epochs=1)
                  .offline_data(input_=str(tmp_path), **offline))
        algo = config.build()
        try:
            batch = algo.env_runner_group.sample(num_timesteps=n)
        finally:
            algo.stop()
        valid = batch.get("valid", np.ones(batch["rewards"].shape, bool))
        return sorted(batch["actions"][valid][:, 0].tolist())

    assert actions_trained_on() == [-1.0, 0.0, 0.5, 1.0]  # [-2, 2] -> [-1, 1]
    assert actions_trained_on(actions_in_input_normalized=True) == [-2.0, 0.0, 1.0, 2.0]


def test_fragments_cut_by_a_record_end_are_bootstrapped_not_joined(cartpole_data):
    from rlx.offline.training_batch import to_training_batch
    from rlx.offline.spaces import spaces_of

    algo = small().build()
    try:
        spaces = spaces_of(algo.env_runner)
    finally:
        algo.stop()
    batch = next(JsonReader(str(cartpole_data)).read_all_files())
    train = to_training_batch(batch, spaces, "test", multi_agent=False, normalize_actions=False,
                              keep_postprocessed=True)
    valid = train.get("valid", np.ones(train["rewards"].shape, bool))
    assert int(valid.sum()) == len(batch)
    ends = train["terminateds"] | train["truncateds"]
    # Every column's last valid row ends its fragment.
    for b in range(valid.shape[1]):
        rows = np.flatnonzero(valid[:, b])
        assert ends[rows[-1], b]
    # As many fragment ends as episodes in the record.
    assert int((ends & valid).sum()) == len(set(batch["eps_id"].tolist()))


def test_postprocessed_columns_are_kept_unless_postprocess_inputs(cartpole_data, tmp_path):
    rec = json.loads(sorted(cartpole_data.glob("*.json"))[0].read_text().splitlines()[0])
    n = len(rec["rewards"])
    rec["advantages"] = [5.0] * n
    rec["value_targets"] = [7.0] * n
    (tmp_path / "pp.json").write_text(json.dumps(rec) + "\n")
    for postprocess, expect in ((False, True), (True, False)):
        algo = small(input_=str(tmp_path), postprocess_inputs=postprocess).build()
        try:
            batch = algo.env_runner_group.sample(num_timesteps=BATCH)
        finally:
            algo.stop()
        assert ("advantages" in batch) is expect


# ----------------------------------------------------------------------------- the seed's episode traces


def test_seed_episode_trace_command_writes_readable_traces(tmp_path):
    debug = tmp_path / "debug"
    proc = run_rlx("train", "--run", "PPO", "--env", "CartPole-v1",
                   "--config", json.dumps({"output": str(debug), "output_compress_columns": [],
                                           "train_batch_size": 256, "minibatch_size": 64}),
                   "--stop", json.dumps({"training_iteration": 2}), results_dir=tmp_path / "results")
    assert proc.returncode == 0, proc.stderr
    files = sorted(os.listdir(debug))
    assert files and all(f.startswith("output-") and f.endswith("_worker-0_0.json") for f in files)
    recs = records(debug)
    assert len(recs) == 2 and isinstance(recs[0]["obs"][0], list)
    assert sum(len(r["rewards"]) for r in recs) >= 512


def test_asynchronous_sampling_writes_every_step_and_refuses_input(tmp_path):
    from rlx.algorithms.registry import ALGORITHMS, get_algorithm_config

    if "IMPALA" not in ALGORITHMS:
        pytest.skip("IMPALA is not registered")
    algo = get_algorithm_config("IMPALA").environment("CartPole-v1").offline_data(output=str(tmp_path)) \
        .reporting(min_time_s_per_iteration=0.5).debugging(seed=0).build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert sum(len(r["rewards"]) for r in records(tmp_path)) == result["num_env_steps_sampled_lifetime"]
    reader = get_algorithm_config("IMPALA").environment("CartPole-v1").offline_data(input_=str(tmp_path)).build()
    try:
        with pytest.raises(ConfigError, match="not supported yet: input_ with asynchronous sampling"):
            reader.train()
    finally:
        reader.stop()


def test_rllib_dataset_settings_name_the_files(tmp_path):
    """RLlib's Ray Data form: input_/output 'dataset' with the format and paths in input_config/output_config."""
    algo = small(output="dataset", output_config={"format": "json", "path": str(tmp_path / "ds")}).build()
    try:
        algo.train()
    finally:
        algo.stop()
    assert len(records(tmp_path / "ds")) == 1
    reader = small(input_="dataset", input_config={"format": "json", "paths": [str(tmp_path / "ds")]}).build()
    try:
        assert reader.train()["num_env_steps_sampled_lifetime"] >= BATCH
    finally:
        reader.stop()
    missing = small(output="dataset").build()
    try:
        with pytest.raises(ConfigError, match=r"output='dataset' writes to output_config\['path'\]"):
            missing.train()
    finally:
        missing.stop()
