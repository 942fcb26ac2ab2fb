"""MultiAgentEnvRunner: the EnvRunner of multi-agent envs, with one module per policy.

Agents are mapped to policies by policy_mapping_fn (once per agent per episode); each policy's
module acts through its own `ModuleSlot` (rlx.env.runner.module_slot); a MultiRLModule
subclass whose forward couples its modules (e.g. a shared encoder that is no policy) computes
the acting policies' outputs in one forward on {module_id: batch} first. How the agents'
experience becomes per-module time-major batches: rlx.env.runner.agent_steps. A single-agent
Gymnasium env given to this runner is its one-agent case (SingleAgentAsMultiAgent).
"""
from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np

from rlx.core.rl_module.multi_rl_module import MultiRLModule, MultiRLModuleSpec
from rlx.core.rl_module.rl_module import RLModule, RLModuleSpec
from rlx.core.rl_module.agent_mapping import AgentMapper, PolicySpec, resolve_callable
from rlx.core.columns import Columns
from rlx.core.sample_batch import MultiAgentBatch
from rlx.env.config_view import EnvConfig
from rlx.env.connector_env import (
    ConnectorContext, MultiAgentConnectorEnv, build_env_to_module, build_module_to_env)
from rlx.env.multi_agent_env import MultiAgentEnv
from rlx.env.multi_agent_episode import MultiAgentEpisode
from rlx.env.runner.agent_steps import AgentSampling
from rlx.env.runner.module_slot import ModuleSlot
from rlx.env.runner.sub_envs import SingleAgentAsMultiAgent
from rlx.utils.errors import EnvError, NotSupportedYetError
from rlx.utils.filters import FilterWithParts

#: Episodes the mapping function is asked about to find the agents of each policy.
_SPACE_PROBES = 16


class MultiAgentEnvRunner(AgentSampling):
    """Samples multi-agent envs (`num_envs_per_env_runner` copies) with one RLModule per policy.

    Args mirror SingleAgentEnvRunner's: `module_spec` is the base spec every policy's module is
    built from (spaces and model config per policy), `module` a MultiRLModule to share (the
    local Learner's).
    """

    _state_counters = ("num_env_steps_sampled_lifetime", "num_agent_steps_sampled_lifetime")

    def __init__(self, config: EnvConfig, worker_index: int = 0, num_workers: int = 0,
                 module_spec: RLModuleSpec | None = None, module: MultiRLModule | None = None,
                 env_info: Any = None):
        if config.sub_envs_in_processes:
            raise NotSupportedYetError("remote_worker_envs / gym_env_vectorize_mode='async' with a multi-agent env",
                                       "multi-agent sub-envs step in the EnvRunner's process",
                                       fix="Leave remote_worker_envs=False and gym_env_vectorize_mode='sync'; "
                                           "use num_env_runners to sample in several processes.")
        # Without an env (an external application reports the episodes: ExternalMultiAgentEnv,
        # PolicyServerInput) the policies' spaces come from their PolicySpecs or the config, and
        # creating a sub-env (sample()) explains what is missing.
        self._setup(config, worker_index, num_workers, external_env=True)
        self.policies = dict(config.policies or {"default_policy": None})
        self._mapper = AgentMapper(config.policy_mapping_fn, list(self.policies))
        self._observation_fn = resolve_callable(config.observation_fn, "observation_fn")
        self.envs: list[MultiAgentEnv] = self._create_envs() if config.env is not None else []
        # Without envs it counts as one, as a single-agent runner without envs does (the config's
        # resolved num_envs_per_env_runner must stay valid).
        self.num_envs = len(self.envs) if self.envs else 1
        self._module_spec = module_spec if module_spec is not None or module is not None \
            else self._spec_or_config_spec(None)
        slots = {pid: self._policy_slot(pid) for pid in self.policies}
        self._module = module if module is not None else self._build_multi_rl_module(slots)
        # policy_map_capacity: at most that many policies' modules in memory, the others swapped out.
        self.module.set_policy_map_capacity(config.policy_map_capacity, config.policy_states_are_swappable)
        for pid, slot in slots.items():
            if pid not in self.module:
                self._add_policy_module(pid, slot)
            self._attach_slot(pid, slot)
        if self._connectors is not None:
            self._connectors.rl_module = self.module
        self._setup_sampling()
        self._alloc_episode_state()
        self.returns_episodes = self._episodes_by_default(module_spec is None and module is None and env_info is None)
        self._registered()
        if self.envs:
            self._fire_environment_created()

    @property
    def module(self) -> MultiRLModule:
        """The MultiRLModule of every policy's module (shared with the local Learner)."""
        return self._module

    # ------------------------------------------------------------------ envs

    @property
    def env(self) -> list[MultiAgentEnv]:
        """The sub-environments."""
        return self.envs

    @property
    def sub_envs(self) -> list[MultiAgentEnv]:
        """The sub-environments."""
        return self.envs

    @property
    def has_envs(self) -> bool:
        """Whether this runner has built its sub-environments (always, for this runner)."""
        return True

    def _as_runner_env(self, env: Any) -> MultiAgentEnv:
        """A MultiAgentEnv as it is; a single-agent env as its one-agent case."""
        if not isinstance(env, MultiAgentEnv):
            if isinstance(env, gym.Env) or hasattr(env, "step"):
                return SingleAgentAsMultiAgent(env)
            raise EnvError(f"Env '{self.env_name}' created a {type(env).__name__}, which is neither a MultiAgentEnv "
                           "nor a Gymnasium env.")
        return env

    def _check_first_env(self, env: MultiAgentEnv) -> MultiAgentEnv:
        if not self.config.disable_env_checking:
            from rlx.env.multi_agent_env_checker import check_multi_agent_env

            check_multi_agent_env(env, seed=self._seed)
        return env

    def _connected(self, env: MultiAgentEnv, b: int) -> MultiAgentEnv:
        """Sub-env `env`, wrapped to run the custom connectors when the config has any."""
        cfg = self.config
        if cfg.env_to_module_connector is None and cfg.module_to_env_connector is None:
            return env
        if self._connectors is None:
            agents = self._agent_ids(env)
            obs_space = gym.spaces.Dict({aid: env.get_observation_space(aid) for aid in agents})
            act_space = gym.spaces.Dict({aid: env.get_action_space(aid) for aid in agents})
            self._connectors = ConnectorContext(
                env_to_module=build_env_to_module(cfg, env, obs_space, act_space),
                module_to_env=build_module_to_env(cfg, env, obs_space, act_space), metrics=self.metrics)
        return MultiAgentConnectorEnv(env, self._connectors, env_index=b, worker_index=self.worker_index)

    def _agent_ids(self, env: MultiAgentEnv) -> list[Any]:
        ids = list(getattr(env, "possible_agents", None) or getattr(env, "agents", None) or [])
        if not ids:
            ids = sorted(env.get_agent_ids(), key=str) if hasattr(env, "get_agent_ids") else []
        if not ids:
            obs, _ = env.reset(seed=self._seed)
            ids = list(obs)
            self._needs_reset = True
        return ids

    # ------------------------------------------------------------------ policies and their modules

    @property
    def slots(self) -> dict[str, ModuleSlot]:
        """{policy_id: ModuleSlot}: each policy's acting path."""
        return self._slots

    def _policy_spaces(self, pid: str) -> tuple[gym.Space, gym.Space]:
        """The spaces of policy `pid`: its PolicySpec's, else those of the first agent mapped to it."""
        spec = self.policies.get(pid)
        obs_space = getattr(spec, "observation_space", None)
        act_space = getattr(spec, "action_space", None)
        if obs_space is not None and act_space is not None:
            return obs_space, act_space
        if not self.envs:  # env=None: the config's spaces are every policy's default
            obs_space = obs_space or self.config.observation_space
            act_space = act_space or self.config.action_space
            if obs_space is None or act_space is None:
                raise EnvError(
                    f"Policy {pid!r} has no spaces and there is no env to take them from (env=None): give them "
                    f"in the config: policies={{{pid!r}: PolicySpec(observation_space=..., action_space=...)}}, or "
                    "config.environment(observation_space=..., action_space=...) for every policy.")
            return obs_space, act_space
        env = self.envs[0]
        agents = self._agent_ids(env)
        # Mappings may depend on the episode (e.g. who moves first): ask for a few episodes.
        for _ in range(_SPACE_PROBES):
            probe = MultiAgentEpisode(env_index=0, worker_index=self.worker_index)
            probe.is_space_probe = True
            for aid in agents:
                if self._mapper.raw(aid, probe, worker=self) == pid:
                    return (obs_space or env.get_observation_space(aid), act_space or env.get_action_space(aid))
        raise EnvError(
            f"Cannot infer the spaces of policy {pid!r}: policy_mapping_fn maps none of the env's agents "
            f"({', '.join(map(repr, agents))}) to it. Give them in the config: policies={{{pid!r}: "
            "PolicySpec(observation_space=..., action_space=...)}, or to add_policy(..., observation_space=..., "
            "action_space=...).")

    def _policy_slot(self, pid: str) -> ModuleSlot:
        """A new acting path for policy `pid` (its module attached later, by _attach_slot)."""
        obs_space, act_space = self._policy_spaces(pid)
        return self._new_slot(pid, self.config.get_config_for_module(pid), obs_space, act_space)

    def _policy_module(self, pid: str, slot: ModuleSlot) -> RLModule:
        """Policy `pid`'s module built from its spec, with the slot's spaces where the spec has none."""
        spec = self._module_spec
        if isinstance(spec, MultiRLModuleSpec):
            spec = spec.spec_for(pid)
        return self._build_module(spec, slot, slot.module_action_space, sorted(self.policies).index(pid))

    def _build_multi_rl_module(self, slots: dict[str, ModuleSlot]) -> MultiRLModule:
        """rlx's MultiRLModule of the policies' modules or, when the spec names a subclass of it,
        that class holding every policy's module and every other module the spec names (e.g. a
        shared encoder that no agent maps to), all built before the class's `setup()` runs."""
        spec = self._module_spec
        modules: dict[str, RLModule] = {pid: self._policy_module(pid, slot) for pid, slot in slots.items()}
        if not isinstance(spec, MultiRLModuleSpec) or spec.multi_rl_module_class is MultiRLModule:
            return MultiRLModule(modules)
        named = spec.rl_module_specs if isinstance(spec.rl_module_specs, dict) else {}  # (else one spec for all)
        for offset, (mid, module_spec) in enumerate(sorted(named.items())):
            if mid not in modules:
                modules[mid] = self._non_policy_module(mid, module_spec, len(self.policies) + offset)
        return spec.multi_rl_module_class(modules)

    def _non_policy_module(self, mid: str, spec: RLModuleSpec, seed_offset: int) -> RLModule:
        """Module `mid` of the MultiRLModuleSpec that is no policy: built from its own spec, which
        must give its spaces (no agent maps to it to take them from)."""
        if spec.observation_space is None or spec.action_space is None:
            raise EnvError(
                f"Module {mid!r} of the MultiRLModuleSpec is not a policy (policies: {sorted(self.policies)}), so no "
                f"agent's spaces are its own: give RLModuleSpec(observation_space=..., action_space=...) for {mid!r}, "
                "or name it in config.multi_agent(policies=...).")
        return self._seeded_build(spec, seed_offset)

    def _add_policy_module(self, pid: str, slot: ModuleSlot) -> None:
        """Build policy `pid`'s module into the MultiRLModule (replacing one of that id)."""
        self.module.add_module(pid, self._policy_module(pid, slot), override=True)

    def _attach_slot(self, pid: str, slot: ModuleSlot) -> ModuleSlot:
        """Let `slot` act with the MultiRLModule's module `pid` (through the MultiRLModule's forward
        when it runs its modules jointly) and register it as policy `pid`'s acting path."""
        slot.attach(self.module[pid], None if self._seed is None else self._seed + 31 * len(self._slots),
                    self.num_workers, self.worker_index)
        slot.joint = self.module if self.module.runs_modules_jointly() else None
        self._slots[pid] = slot
        return slot

    def _add_slot(self, pid: str, build: bool) -> ModuleSlot:
        slot = self._policy_slot(pid)
        if build:
            self._add_policy_module(pid, slot)
        return self._attach_slot(pid, slot)

    def add_policy(self, policy_id: str, spec: Any = None, weights: dict | None = None,
                   policy_mapping_fn: Callable | None = None, module: RLModule | None = None) -> None:
        """Add a policy (and its module, built or given) to this runner."""
        self.policies[policy_id] = spec if spec is not None else PolicySpec()
        if policy_mapping_fn is not None:
            self._mapper = AgentMapper(policy_mapping_fn, list(self.policies))
        else:
            self._mapper.policy_ids.add(policy_id)
        if module is not None:
            self.module.add_module(policy_id, module, override=True)
        self._add_slot(policy_id, build=module is None and policy_id not in self.module)
        if weights is not None:
            self.module[policy_id].set_state(weights)

    def remove_policy(self, policy_id: str, policy_mapping_fn: Callable | None = None) -> None:
        """Remove a policy: its module, and its agents' open transitions."""
        self.policies.pop(policy_id, None)
        self._slots.pop(policy_id, None)
        self._forget_module(policy_id)
        self._policy_views.pop(policy_id, None)
        if policy_id in self.module:
            self.module.remove_module(policy_id)
        self._mapper = AgentMapper(policy_mapping_fn or self._mapper.fn, list(self.policies))
        # Episodes under way may map agents to the removed policy: start afresh.
        self._needs_reset = True

    def set_policy_mapping_fn(self, policy_mapping_fn: Callable) -> None:
        """Use a new policy_mapping_fn from the next episode on."""
        self._mapper = AgentMapper(policy_mapping_fn, list(self.policies))

    # ------------------------------------------------------------------ weights and state

    def get_weights(self, policies: list[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """{policy_id: weights} of all (or the given) policies."""
        return self.module.get_state(policies)

    def _load_weights(self, weights: dict[str, Any]) -> None:
        # Policies not given keep theirs.
        self.module.set_state({pid: w for pid, w in weights.items() if pid in self.module})

    def _step_counts(self, batch: MultiAgentBatch) -> dict[str, int]:
        return {"num_env_steps_sampled": batch.env_steps(), "num_agent_steps_sampled": batch.agent_steps()}

    def _agent_step_counts(self, batch: MultiAgentBatch, env_steps: int) -> dict[Any, int]:
        """{agent id: its completed transitions in `batch`}, from the columns taken into it (each
        column is one (sub-env, agent) slot)."""
        counts: dict[Any, int] = {}
        for pid, taken in getattr(self, "_taken", {}).items():
            if pid not in batch.policy_batches:
                continue
            agents = self._column_agents[pid]
            for column, n in zip(taken.columns.tolist(), taken.count.tolist()):
                aid = agents[column][1]
                counts[aid] = counts.get(aid, 0) + int(n)
        return counts

    def _module_step_counts(self, batch: MultiAgentBatch, env_steps: int) -> dict[str, int]:
        """{module id: its agents' completed transitions in `batch`}."""
        return {pid: int(b[Columns.VALID].sum()) if Columns.VALID in b else int(b[Columns.REWARDS].size)
                for pid, b in batch.policy_batches.items()}

    @property
    def filter(self) -> Any:
        """The observation filters of all policies, as one object (state is {policy_id: state}),
        with the env-to-module connectors' state when they keep any."""
        filters = PerPolicy({pid: s.filter for pid, s in self._slots.items()})
        if self._connectors is not None and self._connectors.env_to_module is not None:
            return FilterWithParts(filters, env_to_module=self._connectors.env_to_module)
        return filters

    @property
    def exploration(self) -> "PerPolicy":
        """The explorations of all policies, as one object (state is {policy_id: state})."""
        return PerPolicy({pid: s.exploration for pid, s in self._slots.items()})


class PerPolicy:
    """Several policies' filters (or explorations) behind the one-object interface a runner
    offers: get_state/set_state and filter deltas as {policy_id: ...}."""

    def __init__(self, items: dict[str, Any]):
        self.items = items

    @property
    def is_identity(self) -> bool:
        """Whether every filter passes observations through unchanged."""
        return all(getattr(f, "is_identity", False) for f in self.items.values())

    @property
    def has_state(self) -> bool:
        """Whether any policy's filter has statistics to sync (observations or rewards)."""
        return any(getattr(f, "has_state", not getattr(f, "is_identity", False)) for f in self.items.values())

    def get_state(self) -> dict[str, Any]:
        """{policy_id: state}."""
        return {pid: f.get_state() for pid, f in self.items.items()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore {policy_id: state} (policies not given keep theirs)."""
        for pid, value in state.items():
            if pid in self.items:
                self.items[pid].set_state(value)

    def pop_delta(self) -> dict[str, Any]:
        """{policy_id: filter delta since the last pop}."""
        return {pid: f.pop_delta() for pid, f in self.items.items()}

    def merge_delta(self, delta: dict[str, Any]) -> None:
        """Add {policy_id: delta} into the filters."""
        for pid, value in delta.items():
            if pid in self.items:
                self.items[pid].merge_delta(value)
