"""Experiment specs: what one `rlx train` run trains, from flags or from an experiment file.

Files follow the seeds' format, YAML or JSON,

    cartpole-ppo:
        run: PPO            # or algo:
        env: CartPole-v1
        stop: {env_runners/episode_return_mean: 450}
        config: {lr: 0.0003}

with any number of experiments, or are Python files defining `config` (an
AlgorithmConfig, or a dict with --algo) and optionally `stop` (a dict). A YAML or JSON
file may also be given by an http(s) URL; it is downloaded (at most 1 MiB).
"""
from __future__ import annotations

import json
import runpy
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.cli.checkpoint_keeper import check_checkpoint_policy
from rlx.cli.names import check_dir_name
from rlx.cli.safe_yaml import load_bounded_yaml
from rlx.utils.errors import ConfigError, did_you_mean
from rlx.utils.version import __version__


@dataclass
class ExperimentSpec:
    """One experiment: algorithm, env, settings, stop criteria and checkpoint policy.

    `config` is a dict of settings, or an AlgorithmConfig (from a Python file). Checkpoint
    fields left None take the command line's value or the default.
    """

    name: str
    algo: str | None = None
    env: Any = None
    config: Any = field(default_factory=dict)
    stop: dict[str, Any] = field(default_factory=dict)
    checkpoint_freq: int | None = None
    checkpoint_at_end: bool | None = None
    keep_checkpoints_num: int | None = None
    checkpoint_score_attribute: str | None = None
    checkpoint_score_order: str | None = None
    storage_path: str | None = None


#: Keys an experiment of a YAML/JSON file may have.
_FILE_KEYS = {
    "run", "algo", "env", "config", "stop", "checkpoint_freq", "checkpoint_at_end", "keep_checkpoints_num",
    "checkpoint_config", "storage_path", "local_dir",
}
#: Tune keys that make no sense for rlx's single-trial runs; named in the error.
_TUNE_ONLY = {"num_samples", "resources_per_trial", "scheduler", "search_alg", "upload_dir", "sync_config"}
#: checkpoint_config keys (Ray AIR's CheckpointConfig) and the ExperimentSpec field each sets.
_CHECKPOINT_CONFIG = {"checkpoint_frequency": "checkpoint_freq", "checkpoint_at_end": "checkpoint_at_end",
                      "num_to_keep": "keep_checkpoints_num",
                      "checkpoint_score_attribute": "checkpoint_score_attribute",
                      "checkpoint_score_order": "checkpoint_score_order"}


#: Largest experiment file downloaded from a URL, and how long to wait for the server.
MAX_URL_BYTES = 1 << 20
URL_TIMEOUT_S = 30.0


def is_url(text: str | Path) -> bool:
    """Whether an experiment file argument is an http(s) URL rather than a path."""
    return isinstance(text, str) and urllib.parse.urlsplit(text).scheme.lower() in ("http", "https")


def load_experiment_file(path: str | Path) -> list[ExperimentSpec]:
    """The experiments of a .yaml/.yml/.json/.py file (or of a .yaml/.yml/.json http(s)
    URL), in file order."""
    if is_url(path):
        return _url_experiments(str(path))
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"Experiment file {path} does not exist.")
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; give an experiment file (.yaml, .yml, .json or .py).")
    suffix = path.suffix.lower()
    if suffix == ".py":
        return [_python_experiment(path)]
    if suffix not in (".json", ".yaml", ".yml"):
        raise ConfigError(f"{path}: unknown experiment file type '{suffix}'; use .yaml, .yml, .json or .py.")
    return experiments_from_dict(_parse(path.read_text(encoding="utf-8"), suffix, str(path)), str(path))


def _parse(text: str, suffix: str, source: str) -> Any:
    """The data of a JSON (`suffix` .json) or YAML text (bounded: see rlx.cli.safe_yaml)."""
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError(f"{source} is not valid JSON: {err.msg} "
                              f"(line {err.lineno}, column {err.colno}).") from err
        except RecursionError as err:
            raise ConfigError(f"{source}: the JSON is nested too deeply.") from err
    return load_bounded_yaml(text, source)


def _url_experiments(url: str) -> list[ExperimentSpec]:
    suffix = PurePosixPath(urllib.parse.urlsplit(url).path).suffix.lower()
    if suffix == ".py":
        raise ConfigError(f"{url}: rlx does not run Python code from a URL. Download the file, read it, and pass "
                          "its path: rlx train file my_experiment.py")
    if suffix not in (".json", ".yaml", ".yml"):
        raise ConfigError(f"{url}: unknown experiment file type '{suffix}' (taken from the URL's path); "
                          "a URL must name a .yaml, .yml or .json file.")
    data = download(url)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{url} is not a UTF-8 text file: {err}.") from err
    return experiments_from_dict(_parse(text, suffix, url), url)


def download(url: str, max_bytes: int = MAX_URL_BYTES, timeout: float = URL_TIMEOUT_S) -> bytes:
    """The body of `url` (http or https), refusing more than `max_bytes` and giving up after
    `timeout` seconds without an answer; failures are one-line ConfigErrors."""
    limit = f"{max_bytes / (1 << 20):g} MiB"
    request = urllib.request.Request(url, headers={"User-Agent": f"rlx/{__version__}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > max_bytes:
                raise ConfigError(f"{url} is {int(length):,} bytes; experiment files from a URL may be at most "
                                  f"{limit}. Download it and pass its path.")
            data = response.read(max_bytes + 1)
    except urllib.error.HTTPError as err:
        raise ConfigError(f"Downloading {url} failed: HTTP {err.code} {err.reason}. Check the address.") from err
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", None) or err
        raise ConfigError(f"Cannot download {url}: {reason}. Check the address and the network, or download the "
                          "file and pass its path.") from err
    if len(data) > max_bytes:
        raise ConfigError(f"{url} is larger than {limit}, the most rlx downloads for an experiment file. "
                          "Download it and pass its path.")
    return data


def experiments_from_dict(data: Any, source: str) -> list[ExperimentSpec]:
    """Experiments from a parsed {name: {run, env, stop, config, ...}} mapping."""
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{source} must map experiment names to {{run, env, stop, config}} settings.")
    specs = []
    for name, body in data.items():
        if not isinstance(body, dict):
            raise ConfigError(f"{source}: experiment '{name}' must be a mapping with run, env, stop and config.")
        name = str(name)
        if name:  # an empty name falls back to 'default'
            check_dir_name(name, f"{source}: experiment name")
        specs.append(_spec_from_body(name, body, source))
    return specs


def _spec_from_body(name: str, body: dict, source: str) -> ExperimentSpec:
    where = f"{source}, experiment '{name}'"
    for key in body:
        if key in _TUNE_ONLY:
            raise ConfigError(f"{where}: '{key}' is a Ray Tune setting; rlx train runs one trial per experiment. "
                              "Remove it, or run sweeps with Ray Tune.")
        if key not in _FILE_KEYS:
            raise ConfigError(f"{where}: unknown key '{key}'.{did_you_mean(key, _FILE_KEYS)} "
                              f"Known keys: {', '.join(sorted(_FILE_KEYS))}.")
    config = dict(body.get("config") or {})
    if not isinstance(body.get("config") or {}, dict):
        raise ConfigError(f"{where}: 'config' must be a mapping of settings.")
    stop = body.get("stop") or {}
    if not isinstance(stop, dict):
        raise ConfigError(f"{where}: 'stop' must be a mapping {{result_key: value}}.")
    spec = ExperimentSpec(
        name=name,
        algo=body.get("run") or body.get("algo"),
        env=body.get("env", config.pop("env", None)),
        config=config,
        stop=dict(stop),
        checkpoint_freq=body.get("checkpoint_freq"),
        checkpoint_at_end=body.get("checkpoint_at_end"),
        keep_checkpoints_num=body.get("keep_checkpoints_num"),
        storage_path=body.get("storage_path", body.get("local_dir")),
    )
    _apply_checkpoint_config(spec, body.get("checkpoint_config") or {}, where)
    if spec.algo is None:
        raise ConfigError(f"{where}: no algorithm; add 'run: PPO' (or 'algo: PPO').")
    return spec


def _apply_checkpoint_config(spec: ExperimentSpec, checkpoint_config: Any, where: str) -> None:
    """Set `spec`'s checkpoint policy from a checkpoint_config mapping (or a Tune CheckpointConfig)."""
    if not isinstance(checkpoint_config, dict) and hasattr(checkpoint_config, "checkpoint_score_order"):
        checkpoint_config = {key: getattr(checkpoint_config, key) for key in _CHECKPOINT_CONFIG}
    if not isinstance(checkpoint_config, dict):
        raise ConfigError(f"{where}: 'checkpoint_config' must be a mapping.")
    for key, value in checkpoint_config.items():
        if key not in _CHECKPOINT_CONFIG:
            raise ConfigError(f"{where}: unknown checkpoint_config key '{key}'.{did_you_mean(key, _CHECKPOINT_CONFIG)} "
                              f"Known keys: {', '.join(sorted(_CHECKPOINT_CONFIG))}.")
        setattr(spec, _CHECKPOINT_CONFIG[key], value)
    check_checkpoint_policy(spec.keep_checkpoints_num, spec.checkpoint_score_attribute, spec.checkpoint_score_order,
                            f"{where}, checkpoint_config")


def _python_experiment(path: Path) -> ExperimentSpec:
    try:
        namespace = runpy.run_path(str(path), run_name="__rlx_experiment__")
    except Exception as err:
        raise ConfigError(f"Running {path} failed: {type(err).__name__}: {err}") from err
    if "config" not in namespace:
        raise ConfigError(f"{path} must define `config` (an AlgorithmConfig such as PPOConfig().environment(...)).")
    config = namespace["config"]
    stop = namespace.get("stop") or {}
    if not isinstance(stop, dict):
        raise ConfigError(f"{path}: `stop` must be a dict {{result_key: value}}, got {type(stop).__name__}.")
    if isinstance(config, AlgorithmConfig):
        algo_class = config.algo_class
        algo = getattr(algo_class, "__name__", algo_class) if algo_class is not None else None
        spec = ExperimentSpec(name=path.stem, algo=algo, env=None, config=config, stop=dict(stop))
    elif isinstance(config, dict):
        spec = ExperimentSpec(name=path.stem, algo=namespace.get("algo"), env=config.get("env"),
                              config={k: v for k, v in config.items() if k != "env"}, stop=dict(stop))
    else:
        spec = None
    if spec is not None:
        # `checkpoint_config`: a dict or a tune.CheckpointConfig, as a Tune script passes to RunConfig.
        _apply_checkpoint_config(spec, namespace.get("checkpoint_config") or {}, str(path))
        return spec
    raise ConfigError(f"{path}: `config` must be an AlgorithmConfig or a dict, got {type(config).__name__}.")
