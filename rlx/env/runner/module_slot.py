"""One module's acting path: env observation -> module input -> module output -> env action.

A `ModuleSlot` holds what acting with one RLModule takes: the observation preprocessor and
filter, the action adapter (unsquash/clip, structured spaces), the exploration, the
recurrent initial state, and the fast forms of the forward pass (rlx's NumPy forward and
the torch.compile'd one of `torch_compile_worker`). Single-agent sampling (one slot),
multi-agent sampling (one slot per policy), the old API's Policy view and server-side
inference for external envs all act through `ModuleSlot.act`, so they choose the same
actions from the same observations.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch

from rlx.core.columns import Columns
from rlx.core.numpy_forward import numpy_forward_entry, numpy_forward_of
from rlx.core.preprocessors import NoPreprocessor, Preprocessor, get_preprocessor
from rlx.core.rl_module.compiled_acting import CompiledActing, acting_forward
from rlx.env.config_view import EnvConfig
from rlx.env.runner.actions import ActionAdapter
from rlx.utils.errors import EnvError
from rlx.utils.filters import make_filter
from rlx.utils.reward_scaling import with_reward_scaling

#: (actions, log-probabilities, distribution inputs) of a batch of observations.
Acted = tuple[np.ndarray, np.ndarray, np.ndarray]


def make_preprocessor(config: EnvConfig, space: gym.Space) -> Preprocessor:
    """The observation preprocessor the config asks for (`preprocessor_pref`,
    `_disable_preprocessor_api`); EnvError when a non-Box space would need one but it is off."""
    if config.preprocessor_pref is None or config._disable_preprocessor_api:
        if not isinstance(space, gym.spaces.Box):
            raise EnvError(f"Observation space {space} needs a preprocessor (one-hot or flattening), but "
                           "preprocessing is disabled (preprocessor_pref=None or _disable_preprocessor_api=True).")
        return NoPreprocessor(space, config.model)
    return get_preprocessor(space)(space, config.model)


def has_float_values(space: gym.Space) -> bool:
    """Whether observations of `space` can hold NaN or inf: a float Box anywhere in it (integer
    and discrete spaces cannot, so their observations skip the finiteness check)."""
    if isinstance(space, gym.spaces.Box):
        return space.dtype.kind in "fc"
    if isinstance(space, gym.spaces.Dict):
        return any(has_float_values(s) for s in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return any(has_float_values(s) for s in space.spaces)
    return not isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary))


def without_time_axis(out: dict[str, Any]) -> dict[str, Any]:
    """A recurrent module's one-step outputs with the time axis ([B, 1, ...] -> [B, ...]) removed."""
    return {k: (v[:, 0] if k != Columns.STATE_OUT and hasattr(v, "shape") and len(v.shape) >= 2 and v.shape[1] == 1
                else v) for k, v in out.items()}


def module_chosen_actions(out: dict[str, Any], n: int) -> Acted:
    """(actions, log-probabilities, distribution inputs) of a module that returned `actions`
    itself (e.g. a random or heuristic policy): log-probabilities 0 and no distribution inputs
    unless it returned them too."""
    def as_array(value: Any) -> np.ndarray:
        return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)

    actions = as_array(out[Columns.ACTIONS])
    logp = as_array(out[Columns.ACTION_LOGP]).astype(np.float32) if Columns.ACTION_LOGP in out \
        else np.zeros(n, np.float32)
    dist_inputs = as_array(out[Columns.ACTION_DIST_INPUTS]).astype(np.float32) \
        if Columns.ACTION_DIST_INPUTS in out else np.zeros((n, 0), np.float32)
    return actions, logp, dist_inputs


def joint_forward(multi_module: Any, batches: dict[str, dict[str, Any]], explore: bool) -> dict[str, Any]:
    """{module_id: acting output} of a MultiRLModule that runs its modules jointly, on
    {module_id: batch}: its forward_exploration (explore) or forward_inference, without gradients."""
    with torch.no_grad():
        forward = multi_module.forward_exploration if explore else multi_module.forward_inference
        return forward(batches)


def slot_attribute(name: str, doc: str) -> Any:
    """A property, for a class whose instances have a `slot`, that reads and writes the slot's
    attribute `name` (a runner or Policy view shows its module's acting path this way; code that
    swaps e.g. `runner.exploration` for a while, as ES does, swaps the slot's)."""
    def read(self: Any) -> Any:
        return getattr(self.slot, name)

    def write(self: Any, value: Any) -> None:
        setattr(self.slot, name, value)

    return property(read, write, doc=doc)


class ModuleSlot:
    """Acting with one RLModule: preprocess and filter observations, run the module, let the
    exploration choose actions, and adapt them to the env's action space.

    Args:
        module_id: the module's (policy's) id.
        config: the (per-module) AlgorithmConfig.
        observation_space: the env's observation space of the agents this module acts for.
        action_space: their action space.
        generator: the torch generator of the runner the slot belongs to.
        compiled: the runner's compiled forward passes (torch_compile_worker), or None.
        timestep_fn: the env-step count exploration schedules follow.
    """

    def __init__(self, module_id: str, config: EnvConfig, observation_space: gym.Space, action_space: gym.Space, *,
                 generator: torch.Generator | None = None, compiled: CompiledActing | None = None,
                 timestep_fn: Callable[[], int] | None = None, preprocessor: Preprocessor | None = None,
                 obs_filter: Any = None):
        self.module_id = module_id
        self.config = config
        self.observation_space = observation_space
        self.action_space = action_space
        self.preprocessor: Preprocessor = preprocessor if preprocessor is not None \
            else make_preprocessor(config, observation_space)
        self.filter: Any = obs_filter if obs_filter is not None \
            else make_filter(config.observation_filter, self.preprocessor.shape)
        if obs_filter is None and config.normalize_rewards:
            self.filter = with_reward_scaling(self.filter, config.gamma)
        self.actions = ActionAdapter(action_space, config.normalize_actions, config.clip_actions)
        self.module_observation_space = self.preprocessor.observation_space
        self.module: Any = None
        #: The MultiRLModule whose forward computes this module's output together with its other
        #: modules' (MultiRLModule.runs_modules_jointly), or None: the module acts alone.
        self.joint: Any = None
        self.exploration: Any = None
        self.initial_state: dict[str, np.ndarray] = {}
        self.stateful = False
        #: A recurrent module's state after the latest act() ({name: [n, ...]}).
        self.state_out: dict[str, np.ndarray] = {}
        #: Whether the module returned the actions of the latest act() itself (no distribution sampled).
        self.module_chose = False
        self._generator = generator
        self._compiled = compiled
        self._timestep_fn = timestep_fn or (lambda: 0)
        self._adapters: dict[tuple[bool, bool], ActionAdapter] = {}
        self._numpy_actor_cache: tuple | None = None
        #: Batches of observations acted on in NumPy (the fast path) rather than through torch.
        self.num_numpy_batches = 0
        self.float_obs = has_float_values(observation_space)
        self.direct = type(self.preprocessor) is NoPreprocessor
        self.obs_dtype = getattr(observation_space, "dtype", None)
        self.obs_shape: tuple = self.preprocessor.shape
        self.act_dtype = self.actions.batch_dtype

    @property
    def module_action_space(self) -> gym.Space:
        """The action space the module acts in: [-1, 1] boxes when actions are normalized."""
        if self.actions.normalize:
            return gym.spaces.Box(-1.0, 1.0, shape=self.action_space.shape, dtype=np.float32)
        return self.action_space

    @property
    def num_env_steps_sampled_lifetime(self) -> int:
        """The env-step count exploration schedules follow (the runner's)."""
        return self._timestep_fn()

    def attach(self, module: Any, seed: int | None, num_workers: int, worker_index: int) -> None:
        """Act with `module` from now on, with a new exploration (seeded from `seed`)."""
        from rlx.utils.exploration import make_exploration

        self.use(module, make_exploration(
            self.config.exploration_config, action_space=self.module_action_space, policy_config=self.config,
            model=module, num_workers=num_workers, worker_index=worker_index,
            seed=None if seed is None else seed + 7919))

    def use(self, module: Any, exploration: Any) -> None:
        """Act with `module` and `exploration` (None: sample the module's distribution with the
        slot's generator when exploring, else take its deterministic action)."""
        self.module = module
        initial = module.get_initial_state() if hasattr(module, "get_initial_state") else {}
        self.initial_state = {k: np.asarray(v, np.float32) for k, v in initial.items()}
        self.stateful = bool(self.initial_state)
        self.dist_cls = module.get_exploration_action_dist_cls()
        self.inference_dist_cls = module.get_inference_action_dist_cls()
        self._numpy_actor_cache = None
        self.exploration = exploration

    def adapter(self, normalize: bool, clip: bool) -> ActionAdapter:
        """The action adapter with other unsquash/clip settings (the Policy view's overrides)."""
        key = (bool(normalize), bool(clip))
        if key not in self._adapters:
            self._adapters[key] = ActionAdapter(self.action_space, *key)
        return self._adapters[key]

    def acting_copy(self, module: Any, timestep_fn: Callable[[], int], generator: torch.Generator) -> "ModuleSlot":
        """A slot that acts like this one (same preprocessor, filter, exploration and spaces) with
        another module, e.g. a private copy that a server acts with while the original trains."""
        twin = copy.copy(self)
        twin.module = module
        twin._timestep_fn = timestep_fn
        twin._generator = generator
        twin._compiled = None
        twin._numpy_actor_cache = None
        twin.state_out = {}
        return twin

    def numpy_actor(self, explore: bool, random_actions: bool) -> Callable[[np.ndarray], Acted | None] | None:
        """`act` computed in NumPy, for one sample() call: the module's NumPy forward pass
        (RLModule.numpy_inference_fn, kept by rlx.core.numpy_forward) and the exploration's NumPy
        form of its action choice. None when either has none; the returned function returns None
        for a step it cannot take (e.g. in a random-action phase), which then acts through torch.

        The module must be in memory (policy_map_capacity: `MultiRLModule.use_module`) when this
        is called and whenever the returned function runs. The function reads the module's NumPy
        forward through the entry rlx.core.numpy_forward keeps for it, which the module cache
        empties when it swaps the module out (so no view keeps the freed storage alive); the
        next call then builds it anew, over the storage the module has then."""
        if random_actions or self.stateful or self._compiled is not None or self.exploration is None \
                or self.joint is not None:  # (a joint MultiRLModule's forward is its own, in torch)
            return None  # (a compiling runner acts through its compiled torch module)
        module, exploration = self.module, self.exploration
        # (check_storage: rebuilt when a parameter got new storage, e.g. `param.data = ...`.)
        if numpy_forward_of(module, check_storage=True) is None:
            return None
        cached = self._numpy_actor_cache
        if cached is not None and cached[0] is module and cached[1] is exploration and cached[2] == explore:
            return cached[3]
        act = self._build_numpy_actor(module, exploration, explore)
        self._numpy_actor_cache = (module, exploration, explore, act)
        return act

    def _build_numpy_actor(self, module: Any, exploration: Any, explore: bool) -> Callable | None:
        choose = exploration.numpy_action_fn(self.dist_cls if explore else self.inference_dist_cls, explore)
        if choose is None:
            return None
        timestep_fn = self._timestep_fn
        entry = numpy_forward_entry(module)

        def act(obs: np.ndarray) -> Acted | None:
            nonlocal entry
            forward = entry[1]
            if forward is None:  # released (the module was swapped out since): views of its storage now
                entry = numpy_forward_entry(module)
                forward = entry[1]
                if forward is None:
                    return None
            inputs = forward(obs)
            out = choose(inputs, timestep_fn())
            if out is None:
                return None
            self.num_numpy_batches += 1
            return out[0], out[1], inputs

        return act

    @staticmethod
    def module_batch(obs: np.ndarray, state_in: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        """The module's input batch for filtered observations `obs` ([B, ...]); a recurrent
        module's (`state_in`: one state row per observation) is one time step [B, 1, ...]."""
        batch: dict[str, Any] = {Columns.OBS: torch.from_numpy(obs)}
        if state_in is not None:
            batch = {Columns.OBS: batch[Columns.OBS][:, None],
                     Columns.STATE_IN: {k: torch.from_numpy(v) for k, v in state_in.items()}}
        return batch

    def forward(self, batch: dict[str, Any], explore: bool, compiled: bool = True) -> dict[str, Any]:
        """The module's acting output on `batch`: its own forward_exploration/forward_inference
        (compiled where the runner compiles), or, when the module belongs to a MultiRLModule that
        runs its modules jointly (`joint`), that MultiRLModule's forward on {module_id: batch}."""
        if self.joint is not None:
            return joint_forward(self.joint, {self.module_id: batch}, explore)[self.module_id]
        return acting_forward(self._compiled if compiled else None, self.module, explore)(batch)

    def act(self, obs: np.ndarray, explore: bool, random_actions: bool = False, timestep: int | None = None,
            state_in: dict[str, np.ndarray] | None = None,
            numpy_actor: Callable[[np.ndarray], Acted | None] | None = None, compiled: bool = True,
            out: dict[str, Any] | None = None) -> Acted:
        """(actions, log-probabilities, distribution inputs) for a batch of filtered observations.

        The module's output goes through the exploration, which decides (from `explore` and the
        timestep, default the runner's env-step count) how to turn it into actions. With a
        `numpy_actor` (see numpy_actor) that can take this step, no torch op runs. A recurrent
        module gets `state_in` (one row per observation) and leaves its new state in `state_out`.
        `compiled=False` runs the eager forward pass even where the runner compiles. `out`: the
        module's output on `module_batch(obs, state_in)` when it was computed already (a runner
        acting through a MultiRLModule's joint forward, see `joint_forward`).
        """
        if out is None:
            if numpy_actor is not None:
                acted = numpy_actor(obs)
                if acted is not None:
                    return acted
            out = self.forward(self.module_batch(obs, state_in), explore, compiled)
        if state_in is not None:
            out = without_time_axis(out)
            self.state_out = {k: np.asarray(v.detach().numpy() if hasattr(v, "detach") else v, np.float32)
                              for k, v in out.pop(Columns.STATE_OUT).items()}
        self.module_chose = Columns.ACTIONS in out
        if self.module_chose:
            return module_chosen_actions(out, obs.shape[0])
        dist_inputs = out[Columns.ACTION_DIST_INPUTS]
        if random_actions:
            acts = self.actions.sample_module_actions(obs.shape[0])
            return acts, np.zeros(obs.shape[0], np.float32), dist_inputs.numpy()
        dist = (self.dist_cls if explore else self.inference_dist_cls).from_logits(dist_inputs)
        if self.exploration is None:
            actions = dist.sample(self._generator) if explore else dist.deterministic_sample()
            logp = dist.logp(actions)
        else:
            actions, logp = self.exploration.get_exploration_action(
                action_distribution=dist, timestep=self._timestep_fn() if timestep is None else int(timestep),
                explore=explore)
        return actions.numpy(), logp.numpy(), dist_inputs.numpy()
