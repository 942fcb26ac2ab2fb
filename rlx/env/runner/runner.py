"""EnvRunner: the one runner that steps sub-environments with RLModules and returns batches.

Everything an EnvRunner does around its sampling loop is written here once: setting up
(seed, metrics, callbacks, env creator, compiled acting), a module's acting path per module
(`ModuleSlot`, with the module built from its spec), `sample()` (fake sampler, the acting
runner for `get_global_worker()`, step counts, on_sample_end, the rows kept when an env fails),
metrics, weights and state, the old API's policy views, and stopping. The sub-envs are
`SubEnvs`' and the callbacks `EpisodeEvents`'.

A single-agent env is the one-agent, one-module case: `SingleAgentEnvRunner` steps a vector
of Gymnasium envs with one module in lockstep (rlx.env.runner.lockstep) and returns its
time-major dict; `MultiAgentEnvRunner` steps MultiAgentEnvs with one module per policy
(rlx.env.runner.agent_steps) and returns a MultiAgentBatch. A runner whose `returns_episodes`
is set (one built from a config alone, as RLlib's users build it) samples the same way and
also records the episodes (as its callbacks' episodes are recorded), which `sample()` returns.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import secrets
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch

from rlx.core.columns import Columns
from rlx.core.rl_module.rl_module import RLModule, RLModuleSpec
from rlx.core.rl_module.agent_mapping import is_trainable
from rlx.core.rl_module.compiled_acting import CompiledActing
from rlx.env.config_view import EnvConfig
from rlx.env.fake_sampler import FakeSampler
from rlx.env.policy_view import Policy
from rlx.env.runner.current import acting_runner, register_runner, unregister_runner
from rlx.env.runner.episode_events import EpisodeEvents
from rlx.env.runner.module_slot import ModuleSlot
from rlx.env.runner.sub_envs import SubEnvs, worker_seed
from rlx.core.preprocessors import Preprocessor
from rlx.utils.errors import EnvError, NotSupportedYetError
from rlx.utils.reward_scaling import reward_scaler_of
from rlx.utils.metrics import (NUM_AGENT_STEPS_SAMPLED_LIFETIME, NUM_ENV_STEPS_SAMPLED_LIFETIME,
                               NUM_MODULE_STEPS_SAMPLED_LIFETIME)
from rlx.utils.metrics.metrics_logger import MetricsLogger

logger = logging.getLogger("rlx")


class EnvRunner(SubEnvs, EpisodeEvents):
    """Samples experience from `num_envs_per_env_runner` copies of the env with RLModules.

    The concrete runners (SingleAgentEnvRunner, MultiAgentEnvRunner) build their envs and
    modules in `__init__` after `_setup()`, and provide the sampling loop (`_reset_all`,
    `_target`, `_run`, `_with_partial_fragment`) and the step counts of a batch (`_step_counts`).
    """

    #: The sampling counters get_state() carries.
    _state_counters: tuple[str, ...] = ("num_env_steps_sampled_lifetime",)

    def _setup(self, config: EnvConfig, worker_index: int, num_workers: int, external_env: bool) -> None:
        """What every runner sets up before its envs and modules."""
        self.config = config
        self.worker_index = worker_index
        self.num_workers = num_workers
        self._seed = worker_seed(config.seed, worker_index)
        self.metrics = MetricsLogger()
        self._smoothing = int(config.metrics_num_episodes_for_smoothing)
        self.weights_seq_no = 0
        self._callbacks = config.make_callback_dispatcher()
        self._resolve_callbacks()
        self._make_env, self.env_name = self._env_creator(external_env)
        self._generator = torch.Generator()
        # Unseeded runs draw fresh entropy without touching torch's global RNG.
        self._generator.manual_seed(self._seed if self._seed is not None else secrets.randbits(62))
        self._compiled_acting = CompiledActing.from_config(config)  # torch_compile_worker
        self._fake_sampler = FakeSampler.from_config(config)
        self._connectors = None  # the ConnectorContext of custom connector pipelines, if any
        #: {module_id: ModuleSlot}: each module's acting path.
        self._slots: dict[str, ModuleSlot] = {}
        self._policy_views: dict[str, Any] = {}
        self.num_env_steps_sampled_lifetime = 0
        self.num_agent_steps_sampled_lifetime = 0
        self.num_resets = 0  # times every sub-env was reset at once (episodes in progress abandoned)
        self.num_sub_env_restarts = 0  # failed sub-envs rebuilt (restart_failed_sub_environments)
        self._needs_reset = True
        self._needs_seed = True
        self._progress: Any = None  # what an env error keeps of the sample() call (_with_partial_fragment)
        self._returns_episodes = False
        self._done_episodes: list[Any] = []  # episodes finished in this sample() call (episode output)
        self._prev_chunks: dict[str, list[Any]] = {}  # {episode id: chunks returned} (prev_episode_chunks)

    def _registered(self) -> None:
        """Make this runner what get_global_worker() finds (a training runner)."""
        register_runner(self)

    # ------------------------------------------------------------------ modules

    def _timestep(self) -> int:
        return self.num_env_steps_sampled_lifetime

    def _new_slot(self, module_id: str, config: EnvConfig, observation_space: gym.Space,
                  action_space: gym.Space) -> ModuleSlot:
        """The acting path of a module acting in these spaces (its module attached later)."""
        return ModuleSlot(module_id, config, observation_space, action_space, generator=self._generator,
                          compiled=self._compiled_acting, timestep_fn=self._timestep)

    def _build_module(self, spec: RLModuleSpec | None, slot: ModuleSlot, action_space: gym.Space,
                      seed_offset: int = 0) -> RLModule:
        """The module of `slot` built from `spec`, its spaces and model config filled from the slot
        where the spec leaves them open, torch seeded from the config's seed (+ `seed_offset`)."""
        if spec is None:
            raise ValueError(f"{type(self).__name__} needs a module_spec or a module.")
        # replace() keeps the spec's other fields (catalog_class, load_state_path, ...).
        spec = dataclasses.replace(
            spec,
            observation_space=spec.observation_space if spec.observation_space is not None
            else slot.module_observation_space,
            action_space=spec.action_space if spec.action_space is not None else action_space,
            model_config=spec.model_config if spec.model_config is not None else slot.config.model,
        )
        return self._seeded_build(spec, seed_offset)

    def _seeded_build(self, spec: RLModuleSpec, seed_offset: int = 0) -> RLModule:
        """`spec.build()` with torch seeded from the config's seed (+ `seed_offset`) when it has one."""
        seeded = self.config.seed is not None
        ctx = torch.random.fork_rng(devices=[]) if seeded else contextlib.nullcontext()
        with ctx:
            if seeded:
                torch.manual_seed(int(self.config.seed) + seed_offset)
            return spec.build()

    def _spec_or_config_spec(self, spec: Any) -> Any:
        """`spec`, or (None) the RLModuleSpec the config builds (`config.get_rl_module_spec()`):
        what a runner built from a config alone, as RLlib's users build one, acts with."""
        if spec is not None:
            return spec
        getter = getattr(self.config, "get_rl_module_spec", None)
        return getter() if callable(getter) else None

    @property
    def module_slots(self) -> dict[str, ModuleSlot]:
        """{module_id: ModuleSlot}: the acting path of every module."""
        return self._slots

    # ------------------------------------------------------------------ sampling

    def sample(
        self,
        num_timesteps: int | None = None,
        num_episodes: int | None = None,
        explore: bool | None = None,
        random_actions: bool = False,
        force_reset: bool = False,
    ) -> Any:
        """Step the envs and return what they experienced: rlx's array batch (see the concrete
        runner's `_run`), or with `returns_episodes` a list of episodes (RLlib's new API stack:
        the finished ones, then a chunk of each one still running, which the next call continues).

        With `num_timesteps` (default: rollout_fragment_length per sub-env) sampling stops once
        that many steps are collected; with batch_mode='complete_episodes' the envs then run on
        until their episodes end. With `num_episodes`, sampling starts fresh episodes and stops
        once that many have completed (only those are returned as episodes). `force_reset`
        starts fresh episodes first; `random_actions` samples the action space instead of the module.
        """
        return self._sample_call(num_timesteps, num_episodes, explore, random_actions, force_reset,
                                 self._returns_episodes)

    def _sample_call(self, num_timesteps: int | None, num_episodes: int | None, explore: bool | None,
                     random_actions: bool, force_reset: bool, episodes: bool) -> Any:
        """One sample() call, returning the episodes (`episodes`) or the array batch. The old-API
        worker view (rlx.env.runner.worker_view) asks for the array batch of any runner."""
        if num_timesteps is not None and num_episodes is not None:
            raise ValueError(f"sample(num_timesteps={num_timesteps}, num_episodes={num_episodes}): give at most one "
                             "of them (none: rollout_fragment_length steps per sub-env).")
        if episodes and self.config.normalize_rewards:
            raise NotSupportedYetError(
                "environment(normalize_rewards=True) with a runner that returns episodes",
                "the rewards are scaled in the sample batches of rlx's built-in training steps; episodes (a custom "
                "training_step, or a runner built from a config alone) keep the env's rewards",
                fix="Remove normalize_rewards, or scale rewards in a learner connector of your own.")
        if self._fake_sampler is not None and self._fake_sampler.has_batch and not episodes:
            return self._fake_sampler.replay()  # fake_sampler: the first batch again
        with acting_runner(self):
            self._done_episodes = []
            batch = self._sample(num_timesteps, num_episodes, explore, random_actions, force_reset)
            counts = self._step_counts(batch)
            for key, steps in counts.items():
                self.metrics.log_value(key, steps, reduce="sum", clear_on_reduce=True)
            self._log_lifetime_counts(batch, counts["num_env_steps_sampled"])
            samples = self._take_episodes(ongoing=num_episodes is None) if episodes else batch
            if self._returns_episodes and not episodes:  # (the worker view's batch: cut the recorded chunks)
                self._take_episodes(ongoing=num_episodes is None)
            if self._on_sample_end is not None:
                self._on_sample_end(env_runner=self, metrics_logger=self.metrics, samples=samples, worker=self)
        if self._fake_sampler is not None and not episodes:
            self._fake_sampler.remember(batch)
        return samples

    def _log_lifetime_counts(self, batch: Any, env_steps: int) -> None:
        """RLlib's lifetime counters of one sample() call, under RLlib's keys with
        reduce="lifetime_sum": this runner's `get_metrics()` holds what it sampled since its last
        call, and a root logger (the Algorithm's, `MetricsLogger(root=True)`) that aggregates the
        runners' metrics adds them up to the lifetime totals. Episodes count when they end
        (NUM_EPISODES_LIFETIME, rlx.env.runner.episode_events)."""
        log = self.metrics.log_value
        log(NUM_ENV_STEPS_SAMPLED_LIFETIME, env_steps, reduce="lifetime_sum")
        for agent_id, steps in self._agent_step_counts(batch, env_steps).items():
            log((NUM_AGENT_STEPS_SAMPLED_LIFETIME, str(agent_id)), steps, reduce="lifetime_sum")
        for module_id, steps in self._module_step_counts(batch, env_steps).items():
            log((NUM_MODULE_STEPS_SAMPLED_LIFETIME, module_id), steps, reduce="lifetime_sum")

    # ------------------------------------------------------------------ episode output

    @property
    def returns_episodes(self) -> bool:
        """Whether `sample()` returns a list of episodes (SingleAgentEpisode / MultiAgentEpisode, as
        RLlib's new API stack does) rather than rlx's array batch (a time-major dict / a
        MultiAgentBatch). True for a runner built from a config alone
        (`SingleAgentEnvRunner(config=config)`) and for the runners of an Algorithm whose
        `training_step` is the user's; settable. See docs/environments.md."""
        return self._returns_episodes

    @returns_episodes.setter
    def returns_episodes(self, value: bool) -> None:
        value = bool(value)
        if value and not self._returns_episodes:
            self._track_episodes = True
            self._needs_reset = True  # the episodes under way have no step records: start afresh
        elif not value and self._returns_episodes:
            self._resolve_callbacks()  # back to keeping episodes only for the callbacks that read them
        self._returns_episodes = value

    def _episodes_by_default(self, built_from_config_alone: bool) -> bool:
        """Whether sample() returns episodes unless told otherwise (`episodes_by_default`)."""
        return episodes_by_default(self.config, built_from_config_alone)

    def _take_episodes(self, ongoing: bool) -> list[Any]:
        """The episodes of this sample() call: those that finished, then (with `ongoing`) the chunks
        of those still going on, which are cut so the next call continues them as new chunks of the
        same episodes (keeping episode_lookback_horizon steps to look back on)."""
        out, self._done_episodes = self._done_episodes, []
        if not ongoing:
            return out
        horizon = int(getattr(self.config, "episode_lookback_horizon", 1) or 0)
        chunks = {e.id_: self._prev_chunks.get(e.id_, []) for e in self._episodes if e is not None}
        for i, episode in enumerate(self._episodes):
            if episode is not None and not episode.is_done and len(episode) > 0:
                out.append(episode)
                chunks[episode.id_].append(episode)
                self._episodes[i] = episode.cut(horizon)
        # (Only episodes under way keep theirs: those abandoned by a reset never end.)
        self._prev_chunks = {k: v for k, v in chunks.items() if v}
        return out

    def _sample(self, num_timesteps: int | None, num_episodes: int | None, explore: bool | None,
                random_actions: bool, force_reset: bool) -> Any:
        explore = self.config.explore if explore is None else bool(explore)
        self._before_sample()
        if self._connectors is not None:
            self._connectors.explore = explore
        complete = self.config.batch_mode == "complete_episodes"
        if num_episodes is not None:
            self._reset_all()
            return self._run(None, int(num_episodes), explore, random_actions, complete=True)
        target = self._target(num_timesteps)
        if self._needs_reset or force_reset or (complete and not self._at_boundary.all()):
            self._reset_all()
        self._progress = None
        try:
            return self._run(target, None, explore, random_actions, complete)
        except EnvError as err:  # restart_failed_sub_environments=False: the rows before it are kept
            self._with_partial_fragment(err, complete)
            raise
        finally:
            self._progress = None

    def _before_sample(self) -> None:
        """What a sample() call checks or settles first (hook)."""

    # ------------------------------------------------------------------ metrics, weights, state

    def get_metrics(self) -> dict[str, Any]:
        """Everything logged since the last call, as a nested dict of Stats; resets the logger.

        Holds the episode statistics (episode_return_mean/min/max, episode_len_*, num_episodes,
        hist_stats), num_env_steps_sampled (and num_agent_steps_sampled of multi-agent runners),
        per-agent and per-module episode returns, episode custom_metrics and whatever callbacks
        logged into `metrics_logger`. Merge several runners' dicts with
        `MetricsLogger.merge_and_log_n_dicts`.
        """
        out = self.metrics.reduce(return_stats_objects=True)
        self.metrics.reset()
        return out

    def set_weights(self, weights: dict[str, Any], global_vars: dict | None = None,
                    weights_seq_no: int | None = None) -> None:
        """Load module weights (and remember their version, `weights_seq_no`, when given).

        `global_vars={"timestep": T}` sets the env-step count exploration schedules follow to
        the whole group's, so a remote runner decays epsilon as the driver counts.
        """
        self._load_weights(weights)
        if weights_seq_no is not None:
            self.weights_seq_no = int(weights_seq_no)
        if global_vars and "timestep" in global_vars:
            self.num_env_steps_sampled_lifetime = int(global_vars["timestep"])

    def get_state(self) -> dict[str, Any]:
        """Serializable runner state: observation filter, sampling counters and exploration state."""
        state = {"filter": self.filter.get_state(), "exploration": self.exploration.get_state()}
        for name in self._state_counters:
            state[name] = int(getattr(self, name))
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore from get_state()."""
        self.filter.set_state(state["filter"])
        if "exploration" in state:
            self.exploration.set_state(state["exploration"])
        for name in self._state_counters:
            setattr(self, name, int(state.get(name, 0)))

    # ------------------------------------------------------------------ old API

    def get_policy(self, policy_id: str = "default_policy") -> Any:
        """The Policy view of policy `policy_id`'s module (old API)."""
        slot = self._slots.get(policy_id)
        if slot is None:
            raise KeyError(f"Unknown policy {policy_id!r}; this runner has {sorted(self._slots)}.")
        modules = self.module
        if hasattr(modules, "use_module"):  # (policy_map_capacity: a module swapped back in may be a new object)
            current = modules[policy_id]
            if slot.module is not current:
                slot.use(current, slot.exploration)
        view = self._policy_views.get(policy_id)
        if view is None or view.slot is not slot or view.module is not slot.module:
            view = self._policy_views[policy_id] = Policy.from_slot(slot)
        return view

    @property
    def policy_map(self) -> dict[str, Any]:
        """{policy_id: Policy} (old API)."""
        return {pid: self.get_policy(pid) for pid in self._slots}

    @property
    def preprocessors(self) -> dict[str, Preprocessor]:
        """{policy_id: preprocessor} (old API)."""
        return {pid: s.preprocessor for pid, s in self._slots.items()}

    @property
    def filters(self) -> dict[str, Any]:
        """{policy_id: observation filter} (old API)."""
        return {pid: s.filter for pid, s in self._slots.items()}

    def is_policy_to_train(self, policy_id: str, batch: Any = None) -> bool:
        """Whether `policy_id` is trained (the config's policies_to_train)."""
        return is_trainable(self.config.policies_to_train, policy_id, batch)

    def foreach_policy(self, func: Callable[..., Any]) -> list[Any]:
        """[func(policy, policy_id) for every policy] (old API)."""
        return [func(policy, pid) for pid, policy in self.policy_map.items()]

    def foreach_policy_to_train(self, func: Callable[..., Any]) -> list[Any]:
        """[func(policy, policy_id) for every trained policy] (old API)."""
        return [func(policy, pid) for pid, policy in self.policy_map.items() if self.is_policy_to_train(pid)]

    def stop(self) -> None:
        """Close the envs."""
        unregister_runner(self)
        for env in self.sub_envs if self.has_envs else ():
            try:
                env.close()
            except Exception:  # closing must reach every sub-env
                logger.warning("Closing a sub-env of EnvRunner %d failed.", self.worker_index, exc_info=True)


def episodes_by_default(config: Any, built_from_config_alone: bool) -> bool:
    """Whether an EnvRunner's sample() returns episodes unless told otherwise: for a runner built
    from a config alone (RLlib's constructor), or one whose config's Algorithm class has a training loop of
    its own (a `training_step` written outside rlx that does not call super(): it samples
    episodes, as in RLlib). rlx's algorithms, and user subclasses whose `training_step` extends
    an rlx algorithm's through super(), read the array batch."""
    if built_from_config_alone:
        return True
    algo_cls = getattr(config, "algo_class", None)
    if not isinstance(algo_cls, type):
        return False
    owners = [cls for cls in algo_cls.__mro__ if "training_step" in vars(cls)]
    # RLlib's example algorithms (rlx.examples) are user code: their loops read episodes too.
    def is_rlx(cls: type) -> bool:
        return str(cls.__module__).startswith("rlx.") and not str(cls.__module__).startswith("rlx.examples.")

    if not owners or is_rlx(owners[0]):
        return False
    rlx_owner = next((cls for cls in owners if is_rlx(cls)), None)
    if rlx_owner is None or rlx_owner.__module__ == "rlx.algorithms.algorithm":
        return True  # on the base Algorithm, whose training_step is abstract: the user's is the loop
    code = getattr(vars(owners[0])["training_step"], "__code__", None)
    return code is None or "super" not in code.co_names


def scale_rewards(module_filter: Any, batch: dict[str, np.ndarray], column_ids: np.ndarray | None = None) -> None:
    """Scale a module's time-major batch rewards in place by its ReturnScaler (normalize_rewards;
    nothing without one). `column_ids`: the batch columns' lasting ids (ReturnScaler.scale_rewards)."""
    scaler = reward_scaler_of(module_filter)
    if scaler is None:
        return
    ends = batch[Columns.TERMINATEDS] | batch[Columns.TRUNCATEDS]
    scaler.scale_rewards(batch[Columns.REWARDS], ends, batch.get(Columns.VALID), column_ids)


def clip_rewards(rewards: np.ndarray, clip: Any) -> None:
    """Clip rewards in place as `clip_rewards` says: True (sign), False, a bound or a (low, high) pair."""
    if clip is True:
        np.sign(rewards, out=rewards)
    elif clip is False or clip is None:
        return
    elif isinstance(clip, tuple):
        np.clip(rewards, clip[0], clip[1], out=rewards)
    else:
        np.clip(rewards, -clip, clip, out=rewards)
