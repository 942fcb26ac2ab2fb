"""Offline input that cannot be trained on ends in a clear OfflineDataError naming the file, the
line (or row group) and the column, within a bound; input without rows never hangs `train()`;
and paths whose names hold `[` `]` are read as the files they name."""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.offline import JsonReader
from rlx.offline.compression import pack
from rlx.offline.spaces import OfflineDataError

N = 8
BOUND_S = 60


def record(**columns: Any) -> dict:
    """One RLlib-style CartPole record of N rows, `columns` replaced."""
    rec = {"type": "SampleBatch", "obs": [[0.01 * i, 0.0, 0.0, 0.0] for i in range(N)],
           "new_obs": [[0.01 * (i + 1), 0.0, 0.0, 0.0] for i in range(N)], "actions": [0, 1] * (N // 2),
           "rewards": [1.0] * N, "terminateds": [False] * (N - 1) + [True], "truncateds": [False] * N,
           "eps_id": [3] * N, "t": list(range(N)), "action_prob": [0.5] * N, "agent_index": [0] * N}
    rec.update(columns)
    return rec


def empty_record() -> dict:
    """A record of 0 rows whose observation columns have CartPole's row shape (4,)."""
    zeros = np.zeros((0, 4), np.float32)
    return {"type": "SampleBatch", "obs": pack(zeros), "new_obs": pack(zeros), "actions": [], "rewards": [],
            "terminateds": [], "truncateds": []}


def write_lines(path: Path, *records: dict, raw: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(raw if raw is not None else "".join(json.dumps(r) + "\n" for r in records))
    return path


def within_bound(fn: Callable[[], Any], seconds: float = BOUND_S) -> Any:
    """fn()'s result or exception; AssertionError when it runs longer than `seconds` (a hang)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            box["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: it hangs"
    if "error" in box:
        raise box["error"]
    return box.get("result")


def train_on(input_: Any) -> dict:
    algo = (PPOConfig().environment("CartPole-v1").training(train_batch_size=16, minibatch_size=8, num_epochs=1)
            .debugging(seed=0).offline_data(input_=input_)).build()
    try:
        return within_bound(algo.train)
    finally:
        algo.stop()


# ----------------------------------------------------------------------------- no rows: no hang


def test_zero_row_parquet_input_ends_train_with_an_error(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from rlx.offline.batch_codec import from_json_dict
    from rlx.offline.parquet_io import batch_to_table

    path = tmp_path / "empty.parquet"
    pq.write_table(batch_to_table(from_json_dict(json.loads(json.dumps(empty_record())))), str(path))
    with pytest.raises(OfflineDataError, match=rf"hold no rows.*{path.name}"):
        train_on(str(path))


def test_zero_row_json_records_are_skipped_and_input_of_only_them_is_an_error(tmp_path):
    only_empty = write_lines(tmp_path / "empty" / "a.json", empty_record(), empty_record())
    with pytest.raises(OfflineDataError, match=rf"hold no rows.*a.json"):
        train_on(str(only_empty))
    mixed = write_lines(tmp_path / "mixed" / "b.json", empty_record(), record(), empty_record())
    batch = within_bound(lambda: JsonReader(str(mixed)).next())
    assert len(batch) == N


def test_multi_agent_record_counting_no_env_steps_is_refused(tmp_path):
    rec = {"type": "MultiAgentBatch", "count": 0,
           "policy_batches": {"default_policy": {k: v for k, v in record().items() if k != "type"}}}
    path = write_lines(tmp_path / "ma.json", rec)
    with pytest.raises(OfflineDataError, match=r"ma.json, line 1: the MultiAgentBatch's 'count' \(env steps\) is 0"):
        within_bound(lambda: JsonReader(str(path)).next())


def test_a_custom_reader_returning_only_empty_batches_fails_within_a_bound():
    from rlx.offline import InputReader
    from rlx.policy.sample_batch import SampleBatch

    class EmptyReader(InputReader):
        def __init__(self, ioctx):
            self.calls = 0

        def next(self):
            self.calls += 1
            return SampleBatch({"obs": np.zeros((0, 4), np.float32), "rewards": np.zeros(0, np.float32)})

    with pytest.raises(OfflineDataError, match="input reader EmptyReader returned 1000 batches without rows"):
        train_on(EmptyReader)


# ----------------------------------------------------------------------------- values


def _first(value: Any, rest: list) -> list:
    return [value] + rest[1:]


BASE = record()
#: case: (column, its values, what the error says). NaN and Infinity are written as JSON's
#: NaN/Infinity tokens (which Python's json and RLlib's writer produce).
BAD_VALUES = {
    "nan_obs": ("obs", _first([float("nan"), 0.0, 0.0, 0.0], BASE["obs"]), r"NaN, infinite or beyond float32"),
    "float32_overflow_reward": ("rewards", _first(1e39, BASE["rewards"]), r"NaN, infinite or beyond float32"),
    "inf_new_obs": ("new_obs", _first([float("inf"), 0.0, 0.0, 0.0], BASE["new_obs"]), r"NaN, infinite"),
    "string_terminateds": ("terminateds", ["no"] * (N - 1) + ["yes"], r"must hold booleans"),
    "string_truncateds": ("truncateds", ["no"] * N, r"must hold booleans"),
    "two_as_terminated": ("terminateds", _first(2, BASE["terminateds"]), r"values other than 0 and 1"),
    "string_rewards": ("rewards", ["1"] * N, r"must hold numbers"),
    "dict_eps_id": ("eps_id", [{"a": 1}] * N, r"must hold integers or strings"),
    "negative_t": ("t", _first(-5, BASE["t"]), r"not whole numbers from -1 on"),
    "fractional_t": ("t", _first(0.5, BASE["t"]), r"not whole numbers from -1 on"),
    "negative_action_prob": ("action_prob", _first(-0.5, BASE["action_prob"]), r"non-negative"),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_values_rlx_cannot_train_on_are_named_by_file_line_and_column(tmp_path, case):
    column, values, message = BAD_VALUES[case]
    path = write_lines(tmp_path / f"{case}.json", record(**{column: values}))
    with pytest.raises(OfflineDataError, match=rf"{case}.json, line 1: column '{column}' .*{message}"):
        within_bound(lambda: JsonReader(str(path)).next())


def test_the_same_checks_guard_training(tmp_path):
    path = write_lines(tmp_path / "big.json", record(rewards=[1e39] * N))
    with pytest.raises(OfflineDataError, match=r"big.json, line 1: column 'rewards'"):
        train_on(str(path))


def test_good_records_pass_unchanged(tmp_path):
    rows = record(eps_id=["a1b2"] * N, t=[-1] + list(range(N - 1)), terminateds=[0] * (N - 1) + [1])
    path = write_lines(tmp_path / "good.json", rows)
    batch = within_bound(lambda: JsonReader(str(path)).next())
    assert batch["terminateds"].tolist() == [False] * (N - 1) + [True]


# ----------------------------------------------------------------------------- Parquet damage


def _parquet_file(tmp_path: Path) -> Path:
    from rlx.offline.batch_codec import from_json_dict
    from rlx.offline.parquet_io import ParquetWriter

    obs = [[0.123 * i + 0.5, 1.5 + i, 2.5 * i, 3.5 - i] for i in range(N)]
    writer = ParquetWriter(str(tmp_path / "pq"))
    writer.write(from_json_dict(record(obs=obs)))
    writer.close()
    return Path(writer.files[0])


def _flip(path: Path, column: int, where: str) -> None:
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(str(path)).metadata.row_group(0).column(column)
    start = meta.dictionary_page_offset if meta.has_dictionary_page else meta.data_page_offset
    end = start + meta.total_compressed_size
    data = bytearray(path.read_bytes())
    span = range(end - 10, end - 2) if where == "values" else range(start + 4, start + 12)
    for k in span:
        data[k] ^= 0x5A
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("where", ["values", "page header"])
def test_damaged_parquet_pages_are_named_by_file_row_group_and_column(tmp_path, where):
    pytest.importorskip("pyarrow")
    from rlx.offline.parquet_io import ParquetReader

    path = _parquet_file(tmp_path)
    _flip(path, 0, where)
    with pytest.raises(OfflineDataError, match=rf"{path.name}, row group 0: column 'obs' cannot be read.*damaged"):
        within_bound(lambda: ParquetReader(str(path)).next())


# ----------------------------------------------------------------------------- paths with [ ]


def test_paths_with_brackets_are_read_as_the_files_they_name(tmp_path):
    directory = tmp_path / "run[1]"
    path = write_lines(directory / "part[0].json", record(), record())
    for given in (str(directory), str(path), [str(path)], str(directory / "*.json")):
        assert len(within_bound(lambda: JsonReader(given).next())) == N, given
    result = train_on(str(directory))
    assert result["num_env_steps_sampled_lifetime"] >= 16
