"""What DQN, SAC, DDPG and TD3 share: replay options, the replay training step, buffer checkpoints.

`OffPolicyConfig` adds the replay-buffer and target-network options; `OffPolicyAlgorithm`
implements DESIGN.md's off-policy `training_step`: sample a fragment, add it to
`local_replay_buffer`, then (once `num_steps_sampled_before_learning_starts` is reached)
replay batches at `training_intensity`, update priorities, and let the learner update its
target networks.
"""
from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any

import numpy as np

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.algorithm_state import state_field
from rlx.algorithms.config_bounds import check_rows
from rlx.algorithms.config_options import INT32_MAX, Option, boolean, count, dictionary, integer, number
from rlx.core.sample_batch import MultiAgentBatch
from rlx.utils.checkpoints import read_json, read_tensors, write_json
from rlx.utils.errors import CheckpointError, ConfigError
from rlx.utils.metrics.result_keys import ENV_RUNNER_SAMPLING_TIMER, TIMERS
from rlx.utils.replay_buffers import make_replay_buffer
from rlx.utils.replay_buffers.multi_agent_replay_buffer import (LOCKSTEP, LockstepReplayBuffer, MultiAgentReplayBuffer,
                                                                check_lockstep_settings, replay_mode_of)
from rlx.utils.replay_buffers.replay_buffer import BATCH_INDEXES

T = ("training",)
BUFFER_FILE = "replay_buffer"


def _n_step(name: str, value: Any) -> Any:
    """An int >= 1 or a (low, high) range of ints with 1 <= low <= high."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return count(1)(name, value)  # an n-step of more than INT32_MAX steps cannot be collected
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value
    ):
        low, high = (count(1)(name, v) for v in value)
        if not 1 <= low <= high:
            raise ConfigError(f"'{name}' as a range (low, high) needs 1 <= low <= high, got {value!r}.")
        return (low, high)
    raise ConfigError(f"'{name}' must be an int >= 1 or a (low, high) pair of ints, got {value!r}.")


def _replay_buffer_config(name: str, value: Any) -> dict:
    value = dictionary()(name, value)
    if "capacity" in value and not isinstance(value["capacity"], (tuple, list)):
        # Checked before a buffer is made from it: the buffer allocates its index up front.
        capacity = integer(1)(f"{name}['capacity']", value["capacity"])
        check_rows(f"{name}['capacity']", capacity, "rows (the replay buffer)")
    # Buffers allocate lazily, so this only validates type and keys. The old sequence keys
    # (replay_sequence_length, ...) and storage_unit='sequences' are checked at validate():
    # recurrent algorithms take them, and `model` (use_lstm) may be set after this option.
    make_replay_buffer({k: v for k, v in value.items()
                        if k not in _SEQUENCE_KEYS and not (k == "storage_unit" and _is_sequences(v))})
    return value


def _is_sequences(storage_unit: Any) -> bool:
    return getattr(storage_unit, "value", storage_unit) == "sequences"


_SEQUENCE_KEYS = ("replay_sequence_length", "replay_burn_in", "replay_zero_init_states", "zero_init_states")


class OffPolicyConfig(AlgorithmConfig):
    """Options shared by the replay-based algorithms (DQN, SAC, DDPG, TD3)."""

    _extra_options = [
        Option("replay_buffer_config",
               {"type": "PrioritizedEpisodeReplayBuffer", "capacity": 50000, "alpha": 0.6, "beta": 0.4},
               T, _replay_buffer_config,
               doc="Replay buffer: 'type' (ReplayBuffer/EpisodeReplayBuffer for uniform, PrioritizedReplayBuffer/"
                   "PrioritizedEpisodeReplayBuffer for prioritized, or a class/import path), 'capacity' (env steps), "
                   "'alpha', 'beta', 'eps'. A dict without 'type' updates the current one."),
        Option("num_steps_sampled_before_learning_starts", 1000, T, integer(0),
               aliases=("learning_starts", "replay_buffer_initial_size"),
               doc="Env steps to sample before the first update."),
        Option("training_intensity", None, T, number(0.0, INT32_MAX, allow_none=True, exclusive_min=True),
               doc="Replayed steps per sampled step. None: one train batch per sample() call "
                   "(train_batch_size / (rollout_fragment_length * num_envs_per_env_runner))."),
        Option("n_step", 1, T, _n_step,
               doc="N-step returns: an int, or a (low, high) range from which n is drawn per train batch."),
        Option("tau", 1.0, T, number(0.0, 1.0, exclusive_min=True),
               doc="Target-network update rate: target <- tau * online + (1 - tau) * target."),
        Option("target_network_update_freq", 0, T, integer(0),
               doc="Env steps sampled between target-network updates (0: after every update)."),
        Option("store_buffer_in_checkpoints", False, T + ("checkpointing",), boolean,
               doc="Save and restore the replay buffer's contents with checkpoints."),
    ]
    _default_overrides = {
        "rollout_fragment_length": 1,
        "min_sample_timesteps_per_iteration": 1000,
    }

    def _legacy_replay_settings(self, key: str, value: Any) -> bool:
        """Map the old flat replay keys (buffer_size, prioritized_replay, ...) into replay_buffer_config."""
        rb = dict(self._values["replay_buffer_config"])
        if key == "buffer_size":
            rb["capacity"] = value
        elif key == "prioritized_replay":
            boolean(key, value)
            if value:
                rb["type"] = "PrioritizedEpisodeReplayBuffer"
                rb.setdefault("alpha", 0.6)
                rb.setdefault("beta", 0.4)
            else:
                rb["type"] = "EpisodeReplayBuffer"
        elif key in ("prioritized_replay_alpha", "prioritized_replay_beta", "prioritized_replay_eps"):
            rb[key.rsplit("_", 1)[1]] = value
        else:
            return False
        self._set("replay_buffer_config", {**rb})
        return True

    def update_from_dict(self, config_dict: dict[str, Any]) -> "OffPolicyConfig":
        """As AlgorithmConfig.update_from_dict, also accepting the old flat replay-buffer keys."""
        rest = {k: v for k, v in config_dict.items() if k not in _LEGACY_REPLAY_KEYS}
        super().update_from_dict(rest)
        # Applied after replay_buffer_config, so a typed replay_buffer_config does not erase them.
        for key in _LEGACY_REPLAY_KEYS:
            if config_dict.get(key) is not None:
                self._legacy_replay_settings(key, config_dict[key])
        return self

    @property
    def n_step_range(self) -> tuple[int, int]:
        """n_step as an inclusive (low, high) range."""
        n = self._values["n_step"]
        return (n, n) if isinstance(n, int) else (int(n[0]), int(n[1]))


_LEGACY_REPLAY_KEYS = ("buffer_size", "prioritized_replay", "prioritized_replay_alpha",
                       "prioritized_replay_beta", "prioritized_replay_eps")


class OffPolicyAlgorithm(Algorithm):
    """Base of replay-based algorithms: owns `local_replay_buffer` and the replay training step."""

    _config_class = OffPolicyConfig

    def setup(self, config: AlgorithmConfig) -> None:
        """Create runners, learner and the replay buffer."""
        lockstep = replay_mode_of(config) == LOCKSTEP
        if lockstep:  # RLlib's rules for lockstep replay, decided before anything is built
            probe = make_replay_buffer(config.replay_buffer_config)
            check_lockstep_settings(config, prioritized=hasattr(probe, "update_priorities"))
        super().setup(config)
        seed = None if config.seed is None else int(config.seed) + 17
        # A single-agent run (its learner container views one Learner) keeps one plain buffer.
        several_modules = self.learners.sole_module_id is None
        if several_modules and lockstep:
            def make_rows_buffer(policy_id: str, capacity: int) -> Any:
                offset = sorted(self.policy_ids).index(policy_id) if policy_id in self.policy_ids else 0
                return make_replay_buffer({**config.replay_buffer_config, "capacity": capacity},
                                          seed=None if seed is None else seed + 1009 * offset)

            self.local_replay_buffer: Any = LockstepReplayBuffer(make_rows_buffer, probe.capacity, seed=seed)
            self._prioritized = False
        elif several_modules:
            def make_buffer(policy_id: str) -> Any:
                module_config = config.get_config_for_module(policy_id)
                offset = sorted(self.policy_ids).index(policy_id) if policy_id in self.policy_ids else 0
                return make_replay_buffer(module_config.replay_buffer_config,
                                          seed=None if seed is None else seed + 1009 * offset)

            self.local_replay_buffer = MultiAgentReplayBuffer(make_buffer)
            self._prioritized = "update_priorities" in dir(make_buffer(self.policy_ids[0]))
        else:
            self.local_replay_buffer = make_replay_buffer(config.replay_buffer_config, seed=seed)
            self._prioritized = hasattr(self.local_replay_buffer, "update_priorities")
        self._n_step_rng = np.random.default_rng(seed)
        self._replayed_agent_steps = 0  # agent steps (rows) the last update trained on
        self._update_credit = 0.0
        self._runner_resets = 0

    @property
    def replay_ratio(self) -> float:
        """Train batches per sampled env step."""
        cfg = self.config
        if cfg.training_intensity is not None:
            return float(cfg.training_intensity) / cfg.total_train_batch_size
        per_call = cfg.get_rollout_fragment_length() * cfg.num_envs_per_env_runner
        return 1.0 / per_call

    def training_step(self) -> dict[str, Any]:
        """Sample a fragment into the buffer, then replay train batches and update."""
        cfg = self.config
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            batch = self.env_runner_group.sample()
        steps = self.count_sampled(batch)
        resets = self.env_runner_group.num_resets
        if resets != self._runner_resets:
            # The runner restarted its episodes: rows sampled before do not continue into this batch.
            self.local_replay_buffer.end_open_episodes()
            self._runner_resets = resets
        self.local_replay_buffer.add(batch, time_major=True)
        sampled = self._counters["num_env_steps_sampled_lifetime"]
        if sampled < cfg.num_steps_sampled_before_learning_starts:
            return {}
        self._update_credit += steps * self.replay_ratio
        num_updates = int(self._update_credit)
        self._update_credit -= num_updates
        metrics: dict[str, Any] = {}
        low, high = cfg.n_step_range
        batch_size = cfg.total_train_batch_size
        for _ in range(num_updates):
            n = low if low == high else int(self._n_step_rng.integers(low, high + 1))
            metrics = self._replay_update(n, sampled)
            self._counters["num_agent_steps_trained_lifetime"] += self._replayed_agent_steps
            self._counters["num_env_steps_trained_lifetime"] += batch_size
        if num_updates:
            self.sync_env_runner_weights()
            return {mid: {**{k: float(v) for k, v in m.items()}, "num_updates_this_step": num_updates}
                    for mid, m in metrics.items()}
        return {}

    def module_replay_buffers(self) -> dict[str, Any]:
        """{module_id: its replay buffer}: a multi-agent buffer's per-module buffers, or the one
        buffer of a single-agent run under its module id."""
        per_module = getattr(self.local_replay_buffer, "replay_buffers", None)
        if per_module is not None:
            return dict(per_module)
        return dict.fromkeys(self.learners.keys(), self.local_replay_buffer)

    def _replay_update(self, n_step: int, timestep: int) -> dict[str, Any]:
        """One replayed train batch per trainable module with data, one update on them, their new
        priorities written back; {module_id: metrics}. With replay_mode='lockstep' the batches hold
        the same train_batch_size env steps for every module."""
        lockstep = getattr(self.local_replay_buffer, "replay_mode", None) == LOCKSTEP
        replays = self._lockstep_replays(n_step) if lockstep else self._independent_replays(n_step)
        if not replays:
            self._replayed_agent_steps = 0
            return {}
        batch = MultiAgentBatch(replays, env_steps=self.config.total_train_batch_size)
        metrics = self.module_results(self.learn_on_batch(batch, timestep=timestep))
        # Agent steps trained: the rows of a lockstep replay, else the train batch size of each module.
        self._replayed_agent_steps = sum(
            len(replays[mid][BATCH_INDEXES]) if lockstep else self.config.get_config_for_module(mid).total_train_batch_size
            for mid in metrics if mid in replays)
        buffers = self.module_replay_buffers()
        for module_id, module_metrics in metrics.items():
            td_error = module_metrics.pop("td_error", None)
            if self._prioritized and td_error is not None:
                buffers[module_id].update_priorities(replays[module_id][BATCH_INDEXES], td_error)
        return metrics

    def _independent_replays(self, n_step: int) -> dict[str, dict[str, np.ndarray]]:
        """Each trainable module's own train batch from its own buffer (replay_mode='independent';
        a single-agent run's one buffer)."""
        replays = {}
        buffers = self.module_replay_buffers()
        for module_id in self.policy_ids:
            buf = buffers.get(module_id)
            if buf is None or not len(buf) or not self.learners.is_trainable(module_id):
                continue
            module_config = self.config.get_config_for_module(module_id)
            replays[module_id] = self._replay_hook(buf.sample(module_config.total_train_batch_size, n_step=n_step,
                                                              gamma=module_config.gamma))
        return replays

    def _lockstep_replays(self, n_step: int) -> dict[str, dict[str, np.ndarray]]:
        """The trainable policies' rows of train_batch_size env steps drawn once for all of them."""
        if not len(self.local_replay_buffer):
            return {}
        cfg = self.config
        batch = self.local_replay_buffer.sample(cfg.total_train_batch_size, n_step=n_step, gamma=cfg.gamma)
        return {module_id: self._replay_hook(rows) for module_id, rows in batch.items()
                if self.learners.is_trainable(module_id)}

    def _replay_hook(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Transform a replayed batch before the update (DQN's before_learn_on_batch); identity here."""
        return batch

    # ------------------------------------------------------------------ checkpoints

    def get_state(self) -> dict[str, Any]:
        """Algorithm state plus the replay-training counters (the buffer itself goes to its own files)."""
        state = super().get_state()
        state["update_credit"] = float(self._update_credit)
        state["n_step_rng"] = _rng_state_to_json(self._n_step_rng)
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore get_state()."""
        with state_field("update_credit"):
            credit = float(state.get("update_credit", 0.0))
            if not np.isfinite(credit):
                raise ValueError(f"{credit} is not finite")
        rng_state = None
        if "n_step_rng" in state:
            with state_field("n_step_rng"):
                rng_state = _rng_state_from_json(state["n_step_rng"])
                np.random.Generator(np.random.PCG64()).bit_generator.state = rng_state  # checks it
        super().set_state(state)
        self._update_credit = credit
        if rng_state is not None:
            self._n_step_rng.bit_generator.state = rng_state

    def write_checkpoint_extras(self, directory: Path) -> list[str]:
        """With store_buffer_in_checkpoints, write the replay buffer as safetensors + JSON."""
        if not self.config.store_buffer_in_checkpoints:
            return []
        arrays, meta = split_arrays(self.local_replay_buffer.get_state())
        _write_numpy_tensors(directory / f"{BUFFER_FILE}.safetensors", arrays)
        write_json(directory / f"{BUFFER_FILE}.json", meta)
        return [f"{BUFFER_FILE}.safetensors", f"{BUFFER_FILE}.json"]

    def load_checkpoint_extras(self, directory: Path) -> Any:
        """The replay buffer's state, when the checkpoint holds one and the config asks for it."""
        meta_path = directory / f"{BUFFER_FILE}.json"
        if not self.config.store_buffer_in_checkpoints or not meta_path.is_file():
            return None
        tensor_path = directory / f"{BUFFER_FILE}.safetensors"
        if not tensor_path.is_file():
            raise CheckpointError(f"Checkpoint {directory} has {meta_path.name} but is missing {tensor_path.name}.")
        meta, arrays = read_json(meta_path), read_tensors(tensor_path)
        try:
            return join_arrays(meta, arrays)
        except Exception as err:
            raise CheckpointError(f"{meta_path} does not describe the arrays in {tensor_path.name}: "
                                  f"{type(err).__name__}: {err}.") from err

    def apply_checkpoint_extras(self, loaded: Any) -> None:
        """Restore the replay buffer state `load_checkpoint_extras` read."""
        if loaded is None:
            return
        try:
            self.local_replay_buffer.set_state(loaded)
        except Exception as err:
            raise CheckpointError(f"The replay buffer in the checkpoint cannot be restored: "
                                  f"{type(err).__name__}: {err}") from err
        # The envs sampling from now on are not in the episodes the buffer last saw.
        self.local_replay_buffer.end_open_episodes()


# ---------------------------------------------------------------------- helpers


def _rng_state_to_json(rng: np.random.Generator) -> dict:
    state = rng.bit_generator.state
    return {"bit_generator": state["bit_generator"],
            "state": {k: str(v) for k, v in state["state"].items()},
            "has_uint32": int(state.get("has_uint32", 0)), "uinteger": int(state.get("uinteger", 0))}


def _rng_state_from_json(data: dict) -> dict:
    return {"bit_generator": data["bit_generator"],
            "state": {k: int(v) for k, v in data["state"].items()},
            "has_uint32": data["has_uint32"], "uinteger": data["uinteger"]}


def split_arrays(state: Any, prefix: str = "") -> tuple[dict[str, np.ndarray], Any]:
    """Split a nested state into {path: array} and a JSON-safe skeleton with array placeholders."""
    arrays: dict[str, np.ndarray] = {}

    def walk(value: Any, path: str) -> Any:
        if isinstance(value, np.ndarray):
            arrays[path] = np.ascontiguousarray(value)
            return {"__array__": path}
        if isinstance(value, dict):
            return {str(k): walk(v, f"{path}/{k}" if path else str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v, f"{path}/{i}") for i, v in enumerate(value)]
        if isinstance(value, np.generic):
            return value.item()
        return value

    return arrays, walk(state, prefix)


def join_arrays(skeleton: Any, arrays: dict[str, np.ndarray]) -> Any:
    """Inverse of split_arrays."""
    if isinstance(skeleton, dict):
        if set(skeleton) == {"__array__"}:
            key = skeleton["__array__"]
            if key not in arrays:
                raise CheckpointError(f"The replay buffer file lacks the array '{key}'.")
            return arrays[key]
        return {k: join_arrays(v, arrays) for k, v in skeleton.items()}
    if isinstance(skeleton, list):
        return [join_arrays(v, arrays) for v in skeleton]
    return skeleton


def _write_numpy_tensors(path: Path, arrays: dict[str, np.ndarray]) -> None:
    from safetensors.numpy import save_file

    save_file(arrays, str(path))
