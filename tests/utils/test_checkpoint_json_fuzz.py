"""Corrupted checkpoint JSON is refused with a CheckpointError naming the file, or it loads
and trains: never a raw RecursionError / ValueError / TypeError, never accepted and then
failing at the next `train()` (issue 33, item 7's checkpoint-JSON part).

A fixed-seed fuzz of every JSON file of a checkpoint (flipped characters, truncation, deep
nesting, 5,000-digit integers, values of the wrong type, deleted keys), bounded in time, and
the cases it found written out one by one.
"""
from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

import pytest

from conftest import save_trained_checkpoint
from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.ppo import PPOConfig
from rlx.core.rl_module.rl_module import RLModule
from rlx.utils.errors import CheckpointError, RLXError

MODULE_DIR = "learner_group/learner/rl_module/default_policy"
JSON_FILES = ["config.json", "algorithm_state.json", "rlx_checkpoint.json",
              "policies/default_policy/optimizer.json", f"{MODULE_DIR}/rlx_module.json"]
#: Values of the wrong type or range put in place of a stored one.
WRONG = [None, True, -1, 0, 1e308, -1e308, float("nan"), "x", "", [], {}, [1, [2]], {"a": 1}, 2**70, 1.5,
         "../x", {"__import__": "x:y"}, {"__tuple__": 3}, {"__ndarray__": [1], "dtype": "object"},
         {"__space__": {"type": "Box"}}]
DEEP = "[" * 50_000 + "]" * 50_000
HUGE_INT = "7" * 5000


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = (PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0)
              .training(train_batch_size=64, minibatch_size=32, num_epochs=1).debugging(seed=0))
    return save_trained_checkpoint(config, tmp_path_factory.mktemp("json_fuzz") / "pristine")


def paths_in(value, path=()):
    """Every path to a value nested in decoded JSON."""
    yield path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield from paths_in(item, path + (key,))


def put(data, path, new) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = new


def mutate(text: str, rng: random.Random) -> str:
    """One corruption of a JSON text."""
    kind = rng.randrange(6)
    if kind == 0:
        i = rng.randrange(len(text))
        return text[:i] + chr(rng.randrange(32, 127)) + text[i + 1:]
    if kind == 1:
        return text[:rng.randrange(len(text))]
    data = json.loads(text)
    paths = [p for p in paths_in(data) if p]
    path = rng.choice(paths)
    if kind in (2, 3):
        put(data, path, "@@MARK@@")
        return json.dumps(data).replace('"@@MARK@@"', DEEP if kind == 2 else HUGE_INT)
    if kind == 4 or not isinstance(_parent(data, path), dict):
        put(data, path, rng.choice(WRONG))
    else:
        del _parent(data, path)[path[-1]]
    return json.dumps(data)


def _parent(data, path):
    for key in path[:-1]:
        data = data[key]
    return data


def load_outcome(ckpt: Path, name: str) -> str:
    """'refused' (an rlx error), or 'loaded' once the loaded Algorithm trained an iteration;
    anything else raises."""
    try:
        if name.endswith("rlx_module.json"):
            RLModule.from_checkpoint(ckpt / MODULE_DIR)
            return "loaded"
        algo = Algorithm.from_checkpoint(ckpt)
    except RLXError:
        return "refused"
    try:
        algo.train()  # accepted: then it must train, not fail at the next step
    finally:
        algo.stop()
    return "loaded"


def test_fuzzed_checkpoint_json_is_refused_clearly_or_loads_and_trains(pristine, tmp_path):
    rng = random.Random(33)
    deadline = time.monotonic() + 8.0
    outcomes: dict[str, int] = {}
    for i in range(150):
        if time.monotonic() > deadline:
            break
        ckpt = tmp_path / f"c{i}"
        shutil.copytree(pristine, ckpt)
        name = rng.choice(JSON_FILES)
        text = (ckpt / name).read_text()
        corrupted = mutate(text, rng)
        (ckpt / name).write_text(corrupted)
        try:
            outcome = load_outcome(ckpt, name)
        except Exception as err:  # noqa: BLE001 - the point of the test: name the case that escaped
            pytest.fail(f"case {i}: {name} corrupted as {corrupted[:200]!r}... raised {type(err).__name__}: {err}")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        shutil.rmtree(ckpt)
    assert outcomes.get("refused", 0) >= 10, outcomes


@pytest.mark.parametrize("name", JSON_FILES)
@pytest.mark.parametrize("garbage", [DEEP, HUGE_INT, "[" * 100_000], ids=["deep", "5000-digit-int", "deep-unclosed"])
def test_deep_nesting_and_huge_integers_are_a_checkpoint_error_naming_the_file(pristine, tmp_path, name, garbage):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(pristine, ckpt)
    text = (ckpt / name).read_text()
    (ckpt / name).write_text(text.replace("{", '{"zz": ' + garbage + ",", 1) if garbage != "[" * 100_000 else garbage)
    with pytest.raises(CheckpointError, match=Path(name).name.replace(".", r"\.")):
        if name.endswith("rlx_module.json"):
            RLModule.from_checkpoint(ckpt / MODULE_DIR)
        else:
            Algorithm.from_checkpoint(ckpt)


def edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("name, change, field", [
    # the three the fuzz found accepted, then failing at the next train()
    ("policies/default_policy/optimizer.json",
     lambda d: d["param_groups"][0].__setitem__("lr", [1, [2]]), "param_groups[0].lr"),
    ("policies/default_policy/optimizer.json",
     lambda d: d["param_groups"][0].__setitem__("betas", "x"), "param_groups[0].betas"),
    ("algorithm_state.json",
     lambda d: d["metrics"]["stats"][3].__setitem__("values", [{"a": 1}]), "metrics.stats[3].values"),
    ("algorithm_state.json",
     lambda d: d["metrics"]["stats"][3].__setitem__("key", 7), "metrics.stats[3].key"),
    ("algorithm_state.json", lambda d: d["metrics"].__setitem__("stats", {}), "metrics.stats"),
])
def test_wrong_types_that_would_fail_the_next_train_are_refused_at_load(pristine, tmp_path, name, change, field):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(pristine, ckpt)
    edit(ckpt / name, change)
    with pytest.raises(CheckpointError) as info:
        Algorithm.from_checkpoint(ckpt)
    assert Path(name).name in str(info.value) and field in str(info.value)


@pytest.mark.parametrize("change, field", [
    (lambda d: d.__setitem__("format_version", "1"), "format_version"),
    (lambda d: d.__setitem__("inference_only", "yes"), "inference_only"),
    (lambda d: d.__setitem__("module_class", {"__import__": "rlx.core.rl_module.rl_module:RLModuleSpec"}),
     "module_class"),
    (lambda d: d.__setitem__("model_config", {"fcnet_hiddens": "x"}), "rlx_module.json"),
])
def test_a_damaged_module_file_is_a_checkpoint_error(pristine, tmp_path, change, field):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(pristine, ckpt)
    edit(ckpt / MODULE_DIR / "rlx_module.json", change)
    with pytest.raises(CheckpointError, match=field.replace(".", r"\.")):
        RLModule.from_checkpoint(ckpt / MODULE_DIR)
