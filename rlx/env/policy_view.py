"""Policy: the old API's view of an EnvRunner's module, preprocessor and observation filter.

`algo.get_policy()` and `worker.policy_map["default_policy"]` return this view. It does
not own weights: it reads and writes the module the EnvRunner (and the local Learner)
use, so `policy.set_weights(w)` changes what is trained and sampled.

It lives with the runner (layer L4) that hands it out; RLlib's path `rlx.policy.policy` is an
alias of this module's names. Two methods reach above: `Policy.from_checkpoint` rebuilds an
Algorithm (a documented late binding) and `Policy.learn_on_batch` trains through the
Algorithm's Learner (rlx.env.policy_learning).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlx.core.columns import Columns
from rlx.env.config_view import EnvConfig
from rlx.env.runner.module_slot import ModuleSlot, slot_attribute
from rlx.env.policy_export import export_policy_files
from rlx.env.policy_learning import learn_on_batch
from rlx.core.rl_module.agent_mapping import PolicySpec
from rlx.core.rl_module.model_view import ModelView
from rlx.utils.atomic_directory import METADATA_FILE
from rlx.utils.checkpoint_trust import checkpoint_off_sys_path
from rlx.utils.checkpoints import checkpoint_dir, decode_value, read_json, read_metadata
from rlx.utils.errors import CheckpointError


def check_observation(obs: Any, space: Any) -> None:
    """Raise a ValueError naming the expected shape when `obs` does not fit `space`'s layout
    (its shape, or an integer for Discrete); values outside the bounds pass."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        value = np.asarray(obs)
        if value.shape != () or not np.issubdtype(value.dtype, np.integer):
            raise ValueError(f"The observation {_short(obs)} does not fit the observation space {space}: "
                             "expected one integer.")
        return
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        shape = np.shape(obs)
        if shape != space.shape:
            raise ValueError(
                f"The observation has shape {shape}, but the observation space ({type(space).__name__}, "
                f"{space.dtype}) expects shape {space.shape}. Pass one observation as the env returns it "
                "(for a batch, use compute_actions)."
            )
        return
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(obs, dict) or set(obs) != set(space.spaces):
            keys = sorted(obs) if isinstance(obs, dict) else type(obs).__name__
            raise ValueError(f"The observation {keys} does not fit the Dict observation space: expected the keys "
                             f"{sorted(space.spaces)}.")
        for key, sub in space.spaces.items():
            check_observation(obs[key], sub)
    elif isinstance(space, gym.spaces.Tuple):
        if not isinstance(obs, (tuple, list)) or len(obs) != len(space.spaces):
            raise ValueError(f"The observation {_short(obs)} does not fit the Tuple observation space: expected "
                             f"{len(space.spaces)} components.")
        for item, sub in zip(obs, space.spaces):
            check_observation(item, sub)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _policy_only_overrides(root: Any, policy_ids: list[str] | None) -> dict[str, Any]:
    """Config overrides that build only `policy_ids` of a checkpoint, with no remote or
    evaluation EnvRunners and nothing to train. The policies' env spaces come from the
    checkpoint's metadata, so the stored mapping function (perhaps a lambda, which a
    checkpoint cannot hold) is not needed."""
    overrides: dict[str, Any] = {"num_env_runners": 0, "evaluation_interval": None, "num_learners": 0,
                                 "policies_to_train": None, "num_envs_per_env_runner": 1}
    config = read_json(root / "config.json")
    if not isinstance(config, dict):
        raise CheckpointError(f"{root / 'config.json'} holds {type(config).__name__}, not the config's settings.")
    if config.get("policies") is None:
        return overrides
    source = root / "config.json"
    stored = decode_value(config["policies"], "policies", source)
    ids = list(stored) if policy_ids is None else list(policy_ids)
    missing = [pid for pid in ids if pid not in stored]
    if missing:
        raise CheckpointError(f"Checkpoint {root} has no policies {missing}; it has {sorted(stored)}.")
    spaces = read_json(root / METADATA_FILE).get("policy_spaces") or {}
    policies = {}
    for pid in ids:
        spec = stored[pid] if isinstance(stored[pid], PolicySpec) else PolicySpec()
        known = spaces.get(pid) or {}
        policies[pid] = PolicySpec(
            spec.policy_class,
            spec.observation_space or decode_value(known.get("observation_space"), "policy_spaces", root / METADATA_FILE),
            spec.action_space or decode_value(known.get("action_space"), "policy_spaces", root / METADATA_FILE),
            spec.config)
    overrides["policies"] = policies
    per_module = decode_value(config.get("algorithm_config_overrides_per_module") or {},
                              "algorithm_config_overrides_per_module", source)
    overrides["algorithm_config_overrides_per_module"] = {k: v for k, v in per_module.items() if k in ids}
    if all(p.observation_space is not None and p.action_space is not None for p in policies.values()):
        first = ids[0]
        overrides["policy_mapping_fn"] = lambda agent_id, episode, **kwargs: first  # never samples
    return overrides


class Policy:
    """Acting and weight access for one module, as the old Policy API offered."""

    def __init__(self, module: Any, preprocessor: Any, obs_filter: Any, action_adapter_factory: Any,
                 config: EnvConfig, observation_space: Any, action_space: Any, generator: torch.Generator | None = None,
                 exploration: Any = None, timestep_fn: Any = None):
        # Actions are adapted to `action_space` by the slot (the unsquash/clip settings of each call).
        del action_adapter_factory
        slot = ModuleSlot("default_policy", config, observation_space, action_space, generator=generator,
                          timestep_fn=timestep_fn, preprocessor=preprocessor, obs_filter=obs_filter)
        slot.use(module, exploration)
        self._view(slot)

    def _view(self, slot: Any) -> None:
        #: The module's acting path (rlx.env.runner.module_slot.ModuleSlot) this view acts through.
        self.slot = slot
        self._state_out: list[np.ndarray] = []
        self._model: Any = None

    @classmethod
    def from_slot(cls, slot: Any) -> "Policy":
        """The view of one module's acting path (a ModuleSlot of an EnvRunner)."""
        policy = cls.__new__(cls)
        policy._view(slot)
        return policy

    @classmethod
    def from_env_runner(cls, runner: Any) -> "Policy":
        """The view of an EnvRunner's module: a single-agent runner, or one module's slot of a
        multi-agent runner (`runner.slots[policy_id]`)."""
        return cls.from_slot(getattr(runner, "slot", runner))

    module = slot_attribute("module", "The RLModule (shared with the EnvRunner and the local Learner).")
    preprocessor = slot_attribute("preprocessor", "The observation preprocessor.")
    filter = slot_attribute("filter", "The observation filter.")
    config = slot_attribute("config", "The (per-policy) AlgorithmConfig.")
    observation_space = slot_attribute("observation_space", "The env's observation space.")
    action_space = slot_attribute("action_space", "The env's action space.")
    exploration = slot_attribute("exploration", "The Exploration that turns the module's outputs into actions.")

    @classmethod
    def from_checkpoint(cls, checkpoint: Any, policy_ids: list[str] | None = None) -> Any:
        """Load policies from a checkpoint without training state.

        `checkpoint` is an Algorithm checkpoint (returns {policy_id: Policy} for `policy_ids`,
        default all) or one policy's folder inside it, `<checkpoint>/policies/<policy_id>`
        (returns that Policy). Only the named policies are built; the env is created once to
        build their preprocessors and is closed again.
        """
        from pathlib import Path

        from rlx.algorithms.algorithm import Algorithm

        path = Path(checkpoint_dir(checkpoint))
        single = None
        if not (path / METADATA_FILE).is_file() and path.parent.name == "policies" and \
                (path.parent.parent / METADATA_FILE).is_file():
            single, path = path.name, path.parent.parent
        if not (path / METADATA_FILE).is_file():
            raise CheckpointError(f"{path} is neither an rlx checkpoint nor a policies/<policy_id> folder of one "
                                  f"(no {METADATA_FILE}).")
        wanted = [single] if single is not None else policy_ids
        read_metadata(path)  # refuses links out of the checkpoint before any of its files is read
        with checkpoint_off_sys_path(path):
            overrides = _policy_only_overrides(path, wanted)
        algo = Algorithm.from_checkpoint(path, config_overrides=overrides)
        try:
            ids = wanted if wanted is not None else algo.policy_ids
            policies = {pid: algo.get_policy(pid) for pid in ids}
        finally:
            algo.stop()
        return policies[single] if single is not None else policies

    @property
    def model(self) -> Any:
        """The old API's model: the user's own ModelV2 object for a `custom_model`, the module's
        old-API view where it defines one (`old_api_model()`, e.g. DQN's Q-model), else a
        ModelView of the module. Built once, so `value_function()` follows the last forward pass."""
        if self._model is None:
            view = getattr(self.module, "old_api_model", None)
            self._model = view() if callable(view) else ModelView(self.module)
        return self._model

    @property
    def dist_class(self) -> Any:
        """Distribution class: `policy.dist_class(logits, policy.model)`."""
        return self.module.get_train_action_dist_cls()

    # ------------------------------------------------------------------ acting

    def _prepare(self, observations: list[Any]) -> np.ndarray:
        """Env observations as module input rows: checked, preprocessed and filtered (the
        filter's statistics are not updated)."""
        for obs in observations:
            check_observation(obs, self.observation_space)
        rows = [np.asarray(self.preprocessor.transform(o), dtype=np.float32) for o in observations]
        batch = np.stack(rows) if rows else np.zeros((0,) + self.preprocessor.shape, np.float32)
        return self.filter.apply_batch(batch, update=False)

    def filter_observation(self, observation: Any) -> np.ndarray:
        """An env observation as this Policy takes it: preprocessed and passed through the
        observation filter without updating its statistics. `Algorithm.compute_single_action`
        does this before it calls the Policy, as the seeds' `compute_action` recipe does with
        `worker.preprocessors[pid].transform(obs)` and `worker.filters[pid](obs, update=False)`."""
        return self._prepare([observation])[0]

    def filter_observations(self, observations: Any) -> np.ndarray:
        """`filter_observation` for a batch (a list or an array of env observations), as one array."""
        return self._prepare(list(observations))

    def _model_rows(self, observations: list[Any]) -> np.ndarray:
        """Observations the Policy was given as module input rows. A row of the preprocessed
        shape is taken as it is (preprocessed and filtered, as RLlib's Policy takes it); any other
        value must be an env observation, which is preprocessed (but not filtered)."""
        shape = tuple(self.preprocessor.shape)
        rows = []
        for obs in observations:
            if not isinstance(obs, (dict, tuple, list)) and np.shape(obs) == shape:
                rows.append(np.asarray(obs, dtype=np.float32))
                continue
            try:
                check_observation(obs, self.observation_space)
            except ValueError as err:
                raise ValueError(f"{err} The Policy takes preprocessed, filtered observations of shape {shape} "
                                 "(policy.filter_observation(obs) makes one from an env observation), or env "
                                 "observations, which it preprocesses but does not filter.") from None
            rows.append(np.asarray(self.preprocessor.transform(obs), dtype=np.float32))
        return np.stack(rows) if rows else np.zeros((0,) + shape, np.float32)

    def _adapter(self, unsquash: bool | None, clip: bool | None) -> Any:
        return self.slot.adapter(self.config.normalize_actions if unsquash is None else bool(unsquash),
                                 self.config.clip_actions if clip is None else bool(clip))

    def _state_names(self) -> list[str]:
        return list(self.module.get_initial_state()) if hasattr(self.module, "get_initial_state") else []

    def _state_in(self, n: int, state: list | None) -> dict[str, np.ndarray] | None:
        """A recurrent module's state for `n` rows: the given list of per-sample arrays (in
        get_initial_state() order), else the initial state; None for a feed-forward module."""
        names = self._state_names()
        if not names:
            return None
        initial = self.module.get_initial_state()
        if not state:
            state = [np.repeat(np.asarray(v, np.float32)[None], n, axis=0) for v in initial.values()]
        if len(state) != len(names):
            raise ValueError(f"state holds {len(state)} arrays; this policy's recurrent state has {len(names)} "
                             f"({', '.join(names)}): start from policy.get_initial_state().")
        return {k: np.asarray(v, np.float32).reshape((n,) + np.shape(init))
                for (k, init), v in zip(initial.items(), state)}

    @torch.no_grad()
    def _act(self, obs: np.ndarray, explore: bool | None, timestep: int | None = None,
             state: list | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Module actions and extra fetches for a batch of module input rows, chosen by the
        slot's acting path (ModuleSlot.act) with the eager forward pass."""
        explore = self.config.explore if explore is None else bool(explore)
        state_in = self._state_in(obs.shape[0], state)
        actions, logp, dist_inputs = self.slot.act(obs, explore, timestep=timestep, state_in=state_in,
                                                   compiled=False)
        self._state_out = [self.slot.state_out[k] for k in state_in] if state_in is not None else []
        extra = {Columns.ACTION_DIST_INPUTS: dist_inputs, Columns.ACTION_LOGP: logp, "action_prob": np.exp(logp)}
        if state_in is None and not self.slot.module_chose and getattr(self.module, "has_value_function", False) \
                and getattr(self.module, "vf", None) is not None:
            extra[Columns.VF_PREDS] = self.module.compute_values({Columns.OBS: torch.from_numpy(obs)}).numpy()
        return actions, extra

    def _to_env(self, actions: np.ndarray, unsquash: bool | None, clip: bool | None) -> np.ndarray:
        adapter = self._adapter(unsquash, clip)
        if adapter.is_discrete:
            return actions + adapter.discrete_start
        if getattr(adapter, "structured", False):  # Tuple/Dict actions: one tuple or dict per row
            return adapter.to_env(actions)
        return np.asarray(adapter.to_env(actions))

    def compute_single_action(
        self,
        obs: Any = None,
        state: list | None = None,
        prev_action: Any = None,
        prev_reward: Any = None,
        info: Any = None,
        input_dict: dict | None = None,
        explore: bool | None = None,
        timestep: int | None = None,
        unsquash_action: bool | None = None,
        clip_action: bool | None = None,
        **kwargs: Any,
    ) -> tuple[Any, list, dict[str, Any]]:
        """(action, state_out, extra_fetches) for one observation, given as the module takes it:
        preprocessed and filtered (see `filter_observation`; `Algorithm.compute_single_action`
        takes env observations). An env observation that is not of the preprocessed shape
        (a Dict, a Discrete index, ...) is preprocessed here, never filtered."""
        if obs is None and input_dict is not None:
            obs = input_dict["obs"]
        batched_state = [np.asarray(v)[None] for v in state] if state else None
        actions, extra = self._act(self._model_rows([obs]), explore, timestep, batched_state)
        env_actions = self._to_env(actions, unsquash_action, clip_action)
        return env_actions[0], [v[0] for v in self._state_out], {k: v[0] for k, v in extra.items()}

    def compute_actions(
        self,
        obs_batch: Any,
        state_batches: list | None = None,
        prev_action_batch: Any = None,
        prev_reward_batch: Any = None,
        info_batch: Any = None,
        explore: bool | None = None,
        timestep: int | None = None,
        unsquash_actions: bool | None = None,
        clip_actions: bool | None = None,
        **kwargs: Any,
    ) -> tuple[np.ndarray, list, dict[str, np.ndarray]]:
        """(actions, state_outs, extra_fetches) for a batch of observations, each given as in
        `compute_single_action` (preprocessed and filtered)."""
        observations = list(obs_batch) if not isinstance(obs_batch, dict) else [obs_batch]
        actions, extra = self._act(self._model_rows(observations), explore, timestep, state_batches)
        return self._to_env(actions, unsquash_actions, clip_actions), list(self._state_out), extra

    @torch.no_grad()
    def compute_log_likelihoods(self, actions: Any, obs_batch: Any, **kwargs: Any) -> np.ndarray:
        """log pi(a|s) for module-space actions and raw observations."""
        obs_t = torch.from_numpy(self._prepare(list(obs_batch)))
        out = self.module.forward_inference({Columns.OBS: obs_t})
        dist = self.dist_class.from_logits(out[Columns.ACTION_DIST_INPUTS])
        return dist.logp(np.asarray(actions)).numpy()

    # ------------------------------------------------------------------ learning

    def learn_on_batch(self, samples: Any) -> dict[str, Any]:
        """One update of this Policy's weights on `samples` by the Algorithm's Learner (the weights
        the Algorithm trains and samples with); returns {"learner_stats": metrics, ...}.

        `samples` is `worker.sample()` output (off-policy algorithms train on its one-step
        transitions) or, for DQN, SAC and the other off-policy algorithms, a replayed batch.
        See `rlx.env.policy_learning.learn_on_batch`.
        """
        return learn_on_batch(self, samples)

    # ------------------------------------------------------------------ export

    def export_model(self, export_dir: str, onnx: int | None = None) -> None:
        """Export this policy's greedy acting path for serving without rlx: `model.pt`, a
        TorchScript file for `torch.jit.load`, or with `onnx=<opset>` `model.onnx` (needs the
        `onnx` package, the `export` extra); plus `export_info.json` naming its inputs
        and outputs. The model maps a batch of env observations (and a recurrent policy's state)
        to the greedy actions, the action distribution inputs (and the next state), with the
        observation preprocessing and filter included; see rlx.env.policy_export."""
        export_policy_files(self, export_dir, onnx)

    # ------------------------------------------------------------------ weights and state

    def get_weights(self) -> dict[str, np.ndarray]:
        """Module weights as NumPy arrays."""
        return self.module.get_state()

    def set_weights(self, weights: dict[str, Any]) -> None:
        """Load module weights (used for training and sampling from now on)."""
        self.module.set_state(weights)

    def get_state(self) -> dict[str, Any]:
        """Weights plus the observation filter state."""
        return {"weights": self.get_weights(), "filter": self.filter.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore get_state()."""
        self.set_weights(state["weights"])
        if "filter" in state:
            self.filter.set_state(state["filter"])

    def get_initial_state(self) -> list:
        """A recurrent model's state at an episode start, as a list of arrays (empty for
        feed-forward models); pass it as compute_single_action(obs, state=...)."""
        init = self.module.get_initial_state() if hasattr(self.module, "get_initial_state") else {}
        return [np.asarray(v, np.float32).copy() for v in init.values()]

    def is_recurrent(self) -> bool:
        """Whether the model keeps state between steps."""
        return bool(self._state_names())

    def num_state_tensors(self) -> int:
        """Number of recurrent state tensors."""
        return len(self._state_names())

    def __repr__(self) -> str:
        return f"<rlx.policy.Policy module={type(self.module).__name__} action_space={self.action_space}>"
