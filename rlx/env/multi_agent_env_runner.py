"""MultiAgentEnvRunner: steps a vector of multi-agent envs with one module per policy.

Each step, the observations of every acting agent in every sub-env are grouped by the module
their agent is mapped to (policy_mapping_fn, once per agent per episode), and each module acts
on its group in one batched forward pass. What the agents experience is written per module:
a persistent slot (sub-env, agent) is one column of that module's time-major batch, and an
agent's transition (obs, action, the rewards it received until it next observes, its next
observation, done flags) becomes the next row of its column once it is complete. Agents that
act in turns or leave early leave their columns shorter; `valid` marks the rows that hold data.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import secrets
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch

from rlx.core.columns import Columns
from rlx.core.rl_module import MultiRLModule, RLModule, RLModuleSpec
from rlx.core.rl_module.compiled_acting import CompiledActing, acting_forward
from rlx.env.env_context import EnvContext
from rlx.env.fake_sampler import FakeSampler
from rlx.env.env_runner import (AGENT_RETURNS_KEY, DEFAULT_AGENT_ID, EPISODE_LENGTHS_KEY,
                                EPISODE_POLICY_RETURNS_KEY, EPISODE_RETURNS_KEY, MODULE_RETURNS_KEY, ActionAdapter, _worker_seed, clip_rewards, has_float_values,
                                log_episode_extras, module_chosen_actions, state_column, without_time_axis,
                                write_back_postprocessed)
from rlx.env.connector_env import (
    ConnectorContext, FilterAndConnectorState, MultiAgentConnectorEnv, build_env_to_module, build_module_to_env)
from rlx.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv
from rlx.env.multi_agent_episode import MultiAgentEpisode
from rlx.env.partial_fragment import attach_partial_fragment, cut_time_major
from rlx.env.registry import make_env_creator
from rlx.models.preprocessors import NoPreprocessor, Preprocessor, get_preprocessor
from rlx.policy.sample_batch import MultiAgentBatch
from rlx.utils.errors import EnvError
from rlx.utils.filters import make_filter
from rlx.utils.metrics.metrics_logger import MetricsLogger

logger = logging.getLogger("rlx")


#: Episodes the mapping function is asked about to find the agents of each policy.
_SPACE_PROBES = 16

_EPISODE_EVENTS = ("on_episode_created", "on_episode_start", "on_episode_step", "on_episode_end",
                   "on_postprocess_trajectory")


class SingleAgentAsMultiAgent(MultiAgentEnv):
    """A single-agent Gymnasium env seen as a multi-agent env with one agent, DEFAULT_AGENT_ID."""

    def __init__(self, env: Any):
        super().__init__()
        self.env = env
        self.possible_agents = [DEFAULT_AGENT_ID]
        self.agents = [DEFAULT_AGENT_ID]
        self.observation_spaces = {DEFAULT_AGENT_ID: env.observation_space}
        self.action_spaces = {DEFAULT_AGENT_ID: env.action_space}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        return {DEFAULT_AGENT_ID: obs}, {DEFAULT_AGENT_ID: info}

    def step(self, action_dict: dict) -> tuple[dict, ...]:
        obs, reward, terminated, truncated, info = self.env.step(action_dict[DEFAULT_AGENT_ID])
        a = DEFAULT_AGENT_ID
        return ({a: obs}, {a: reward}, {a: terminated, ALL_AGENTS: terminated},
                {a: truncated, ALL_AGENTS: truncated}, {a: info})

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


class ModuleSlot:
    """One module's side of the runner: its module, preprocessor, observation filter, action
    adapter and exploration. It offers what the Policy view reads from a runner."""

    def __init__(self, runner: "MultiAgentEnvRunner", module_id: str, config: Any,
                 observation_space: gym.Space, action_space: gym.Space):
        self.module_id = module_id
        self.config = config
        self._runner = runner
        self.observation_space = observation_space
        self.action_space = action_space
        self.preprocessor: Preprocessor = _make_preprocessor(config, observation_space)
        self.filter = make_filter(config.observation_filter, self.preprocessor.shape)
        self.actions = ActionAdapter(action_space, config.normalize_actions, config.clip_actions)
        self.module_observation_space = self.preprocessor.observation_space
        self.module: RLModule | None = None
        self.exploration: Any = None
        self._generator = runner._generator
        self.float_obs = has_float_values(observation_space)
        self.direct = type(self.preprocessor) is NoPreprocessor
        self.obs_dtype = getattr(observation_space, "dtype", None)
        self.obs_shape = self.preprocessor.shape
        self.act_dtype = self.actions.batch_dtype

    @property
    def module_action_space(self) -> gym.Space:
        """The action space the module acts in: [-1, 1] boxes when actions are normalized."""
        if self.actions.normalize:
            return gym.spaces.Box(-1.0, 1.0, shape=self.action_space.shape, dtype=np.float32)
        return self.action_space

    @property
    def num_env_steps_sampled_lifetime(self) -> int:
        """The runner's env-step count (exploration schedules follow it)."""
        return self._runner.num_env_steps_sampled_lifetime

    def attach(self, module: RLModule, seed: int | None, num_workers: int, worker_index: int) -> None:
        """Use `module` and build its exploration."""
        from rlx.utils.exploration import make_exploration

        self.module = module
        # A recurrent module's initial state; the runner carries one state per (sub-env, agent).
        initial = module.get_initial_state() if hasattr(module, "get_initial_state") else {}
        self.initial_state = {k: np.asarray(v, np.float32) for k, v in initial.items()}
        self.stateful = bool(self.initial_state)
        self.dist_cls = module.get_exploration_action_dist_cls()
        self.inference_dist_cls = module.get_inference_action_dist_cls()
        self.exploration = make_exploration(
            self.config.exploration_config, action_space=self.module_action_space, policy_config=self.config,
            model=module, num_workers=num_workers, worker_index=worker_index,
            seed=None if seed is None else seed + 7919)

    def act(self, obs: np.ndarray, explore: bool, random_actions: bool, timestep: int,
            state_in: dict[str, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(actions, log-probabilities, distribution inputs) for a batch of filtered observations;
        a recurrent module gets `state_in` (one row per observation) and leaves its new state in
        `self.state_out`."""
        batch = {Columns.OBS: torch.from_numpy(obs)}
        if state_in is not None:  # one time step: [B, 1, ...] and each agent's state
            batch = {Columns.OBS: batch[Columns.OBS][:, None],
                     Columns.STATE_IN: {k: torch.from_numpy(v) for k, v in state_in.items()}}
        out = acting_forward(self._runner._compiled_acting, self.module, explore)(batch)
        if state_in is not None:
            out = without_time_axis(out)
            self.state_out = {k: np.asarray(v.detach().numpy() if hasattr(v, "detach") else v, np.float32)
                              for k, v in out.pop(Columns.STATE_OUT).items()}
        if Columns.ACTIONS in out:
            return module_chosen_actions(out, obs.shape[0])
        dist_inputs = out[Columns.ACTION_DIST_INPUTS]
        if random_actions:
            acts = self.actions.sample_module_actions(obs.shape[0])
            return acts, np.zeros(obs.shape[0], np.float32), dist_inputs.numpy()
        dist = (self.dist_cls if explore else self.inference_dist_cls).from_logits(dist_inputs)
        actions, logp = self.exploration.get_exploration_action(action_distribution=dist, timestep=timestep,
                                                                explore=explore)
        return actions.numpy(), logp.numpy(), dist_inputs.numpy()


class _Columns:
    """One module's columns: persistent (sub-env, agent) slots and this round's transitions."""

    def __init__(self) -> None:
        self.slot_index: dict[tuple[int, Any], int] = {}
        self.rows: list[list[tuple]] = []

    def column(self, slot: tuple[int, Any]) -> int:
        index = self.slot_index.get(slot)
        if index is None:
            index = self.slot_index[slot] = len(self.slot_index)
        while len(self.rows) <= index:
            self.rows.append([])
        return index


class MultiAgentEnvRunner:
    """Samples multi-agent envs (`num_envs_per_env_runner` copies) with one RLModule per policy.

    Args mirror SingleAgentEnvRunner's: `module_spec` is the base spec every policy's module is
    built from (spaces and model config per policy), `module` a MultiRLModule to share (the
    local Learner's).
    """

    def __init__(self, config: Any, worker_index: int = 0, num_workers: int = 0,
                 module_spec: RLModuleSpec | None = None, module: MultiRLModule | None = None,
                 env_info: Any = None):
        from rlx.algorithms.multi_agent_options import AgentMapper, resolve_callable

        if config.sub_envs_in_processes:
            from rlx.utils.errors import NotSupportedYetError

            raise NotSupportedYetError("remote_worker_envs / gym_env_vectorize_mode='async' with a multi-agent env",
                                       "multi-agent sub-envs step in the EnvRunner's process",
                                       fix="Leave remote_worker_envs=False and gym_env_vectorize_mode='sync'; "
                                           "use num_env_runners to sample in several processes.")
        self.config = config
        self.worker_index = worker_index
        self.num_workers = num_workers
        self._seed = _worker_seed(config.seed, worker_index)
        self.metrics = MetricsLogger()
        self._smoothing = int(config.metrics_num_episodes_for_smoothing)
        self.weights_seq_no = 0
        self._callbacks = config.make_callback_dispatcher()
        self._resolve_callbacks()
        if config.env is None:
            # No env of its own (an external application reports the episodes: ExternalMultiAgentEnv,
            # PolicyServerInput); the policies' spaces come from their PolicySpecs or the config, and
            # creating a sub-env (sample()) explains what is missing.
            self._make_env, self.env_name = (lambda ctx: make_env_creator(None)[0](ctx)), "<external env>"
        else:
            self._make_env, self.env_name = make_env_creator(config.env)
        self._generator = torch.Generator()
        self._generator.manual_seed(self._seed if self._seed is not None else secrets.randbits(62))
        self._compiled_acting = CompiledActing.from_config(config)  # torch_compile_worker
        self._fake_sampler = FakeSampler.from_config(config)
        self.policies = dict(config.policies or {"default_policy": None})
        self._mapper = AgentMapper(config.policy_mapping_fn, list(self.policies))
        self._observation_fn = resolve_callable(config.observation_fn, "observation_fn")
        self._connectors = None  # the ConnectorContext of custom connector pipelines, if any
        self.envs = self._create_envs() if config.env is not None else []
        # Without envs it counts as one, as a single-agent runner without envs does (the config's
        # resolved num_envs_per_env_runner must stay valid).
        self.num_envs = len(self.envs) if self.envs else 1
        self.slots: dict[str, ModuleSlot] = {}
        self.module = module if module is not None else MultiRLModule()
        # policy_map_capacity: at most that many policies' modules in memory, the others swapped out.
        self.module.set_policy_map_capacity(config.policy_map_capacity, config.policy_states_are_swappable)
        self._module_spec = module_spec
        for pid in self.policies:
            self._add_slot(pid, build=module is None or pid not in module)
        if self._connectors is not None:
            self._connectors.rl_module = self.module
        self.num_env_steps_sampled_lifetime = 0
        self.num_agent_steps_sampled_lifetime = 0
        self.num_resets = 0
        self.num_sub_env_restarts = 0
        self._columns: dict[str, _Columns] = {}
        from rlx.utils.replay_buffers.multi_agent_replay_buffer import needs_env_step_columns

        #: Whether batches carry eps_id and t columns (for replay_mode='lockstep').
        self._env_step_columns = needs_env_step_columns(config)
        self._policy_views: dict[str, Any] = {}
        self._needs_reset = True
        self._needs_seed = True
        self._alloc_episode_state()
        from rlx.evaluation.rollout_worker import _register_runner

        _register_runner(self)
        self._fire_environment_created()

    # ------------------------------------------------------------------ setup

    def _alloc_episode_state(self) -> None:
        B = self.num_envs
        self._episodes: list[MultiAgentEpisode | None] = [None] * B
        self._obs: list[dict[Any, np.ndarray]] = [{} for _ in range(B)]  # preprocessed, per acting agent
        self._pending: list[dict[Any, list]] = [{} for _ in range(B)]  # agent -> open transition
        # agent -> its recurrent module's state (agents of stateful modules only), reset per episode
        self._agent_state: list[dict[Any, dict[str, np.ndarray]]] = [{} for _ in range(B)]
        self._last_row: list[dict[Any, np.ndarray]] = [{} for _ in range(B)]
        self._at_boundary = np.ones(B, dtype=bool)
        self._check_steps = [True] * B  # check what step() returns (first episode of each sub-env)

    def _resolve_callbacks(self) -> None:
        cb = self._callbacks
        self._on_episode_created = cb.get("on_episode_created")
        self._on_episode_start = cb.get("on_episode_start")
        self._on_episode_step = cb.get("on_episode_step")
        self._on_episode_end = cb.get("on_episode_end")
        self._on_sample_end = cb.get("on_sample_end")
        self._on_postprocess_trajectory = cb.get("on_postprocess_trajectory")
        self._record = any(cb.has(e) for e in _EPISODE_EVENTS)

    @property
    def callbacks(self) -> Any:
        """This runner's CallbackDispatcher."""
        return self._callbacks

    @property
    def policy_config(self) -> Any:
        """Old name of `config`."""
        return self.config

    def _env_context(self, vector_index: int) -> EnvContext:
        return EnvContext(self.config.env_config, worker_index=self.worker_index, vector_index=vector_index,
                          remote=self.worker_index > 0, num_workers=self.num_workers)

    def _create_envs(self) -> list[MultiAgentEnv]:
        cfg = self.config
        envs: list[MultiAgentEnv] = []
        count = int(cfg.num_envs_per_env_runner)
        i = 0
        while i < count:
            env = self._build_env(i)
            if i == 0:
                count = cfg.resolve_num_envs_per_env_runner(_episode_step_limit(env))
                if not cfg.disable_env_checking:
                    from rlx.env.multi_agent_env_checker import check_multi_agent_env

                    check_multi_agent_env(env, seed=self._seed)
            envs.append(env)
            i += 1
        return [self._connected(env, b) for b, env in enumerate(envs)]

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

    def _build_env(self, i: int) -> MultiAgentEnv:
        try:
            env = self._make_env(self._env_context(i))
        except EnvError:
            raise
        except Exception as err:
            raise EnvError(f"Creating env '{self.env_name}' (worker_index={self.worker_index}, vector_index={i}) "
                           f"failed: {type(err).__name__}: {err}") from err
        if not isinstance(env, MultiAgentEnv):
            if isinstance(env, gym.Env) or hasattr(env, "step"):
                return SingleAgentAsMultiAgent(env)
            raise EnvError(f"Env '{self.env_name}' created a {type(env).__name__}, which is neither a MultiAgentEnv "
                           "nor a Gymnasium env.")
        return env

    def _agent_ids(self, env: MultiAgentEnv) -> list[Any]:
        ids = list(getattr(env, "possible_agents", None) or getattr(env, "agents", None) or [])
        if not ids:
            ids = sorted(env.get_agent_ids(), key=str) if hasattr(env, "get_agent_ids") else []
        if not ids:
            obs, _ = env.reset(seed=self._seed)
            ids = list(obs)
            self._needs_reset = True
        return ids

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

    def _add_slot(self, pid: str, build: bool) -> ModuleSlot:
        obs_space, act_space = self._policy_spaces(pid)
        slot = ModuleSlot(self, pid, self.config.get_config_for_module(pid), obs_space, act_space)
        if build:
            self.module.add_module(pid, self._build_module(pid, slot), override=True)
        slot.attach(self.module[pid], None if self._seed is None else self._seed + 31 * len(self.slots),
                    self.num_workers, self.worker_index)
        self.slots[pid] = slot
        return slot

    def _build_module(self, pid: str, slot: ModuleSlot) -> RLModule:
        from rlx.core.rl_module import MultiRLModuleSpec

        base = self._module_spec
        if isinstance(base, MultiRLModuleSpec):
            base = base.spec_for(pid)
        if base is None:
            raise ValueError("MultiAgentEnvRunner needs a module_spec or a module holding every policy.")
        # replace() keeps the spec's other fields (catalog_class, load_state_path, ...).
        spec = dataclasses.replace(
            base,
            observation_space=base.observation_space or slot.module_observation_space,
            action_space=base.action_space or slot.module_action_space,
            model_config=slot.config.model if base.model_config is None else base.model_config)
        seeded = self.config.seed is not None
        ctx = torch.random.fork_rng(devices=[]) if seeded else contextlib.nullcontext()
        with ctx:
            if seeded:
                torch.manual_seed(int(self.config.seed) + sorted(self.policies).index(pid))
            return spec.build()

    def _fire_environment_created(self) -> None:
        cb = self._callbacks
        if not cb.has("on_environment_created") or not self.envs:
            return
        from rlx.evaluation.rollout_worker import acting_runner

        with acting_runner(self):
            cb.fire("on_environment_created", env_runner=self, metrics_logger=self.metrics, env=self.envs,
                    env_context=self._env_context(0))

    # ------------------------------------------------------------------ policies (self-play)

    def add_policy(self, policy_id: str, spec: Any = None, weights: dict | None = None,
                   policy_mapping_fn: Callable | None = None, module: RLModule | None = None) -> None:
        """Add a policy (and its module, built or given) to this runner."""
        from rlx.algorithms.multi_agent_options import AgentMapper
        from rlx.policy.policy import PolicySpec

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
        from rlx.algorithms.multi_agent_options import AgentMapper

        self.policies.pop(policy_id, None)
        self.slots.pop(policy_id, None)
        self._columns.pop(policy_id, None)
        self._policy_views.pop(policy_id, None)
        if policy_id in self.module:
            self.module.remove_module(policy_id)
        self._mapper = AgentMapper(policy_mapping_fn or self._mapper.fn, list(self.policies))
        # Episodes under way may map agents to the removed policy: start afresh.
        self._needs_reset = True

    def set_policy_mapping_fn(self, policy_mapping_fn: Callable) -> None:
        """Use a new policy_mapping_fn from the next episode on."""
        from rlx.algorithms.multi_agent_options import AgentMapper

        self._mapper = AgentMapper(policy_mapping_fn, list(self.policies))

    # ------------------------------------------------------------------ sampling

    def sample(self, num_timesteps: int | None = None, num_episodes: int | None = None,
               explore: bool | None = None, random_actions: bool = False,
               force_reset: bool = False) -> MultiAgentBatch:
        """Step the envs and return per-policy time-major batches (a MultiAgentBatch).

        `num_timesteps` counts env steps (or agent steps with count_steps_by='agent_steps').
        """
        from rlx.evaluation.rollout_worker import acting_runner

        if self._fake_sampler is not None and self._fake_sampler.has_batch:
            return self._fake_sampler.replay()  # fake_sampler: the first batch again
        with acting_runner(self):
            batch = self._sample(num_timesteps, num_episodes, explore, random_actions, force_reset)
            self.metrics.log_value("num_env_steps_sampled", batch.env_steps(), reduce="sum", clear_on_reduce=True)
            self.metrics.log_value("num_agent_steps_sampled", batch.agent_steps(), reduce="sum",
                                   clear_on_reduce=True)
            if self._on_sample_end is not None:
                self._on_sample_end(env_runner=self, metrics_logger=self.metrics, samples=batch, worker=self)
        if self._fake_sampler is not None:
            self._fake_sampler.remember(batch)
        return batch

    def _sample(self, num_timesteps: int | None, num_episodes: int | None, explore: bool | None,
                random_actions: bool, force_reset: bool) -> MultiAgentBatch:
        if not self.envs:
            self._make_env(self._env_context(0))  # env=None: raises the error that says what to configure
        explore = self.config.explore if explore is None else bool(explore)
        if self._connectors is not None:
            self._connectors.explore = explore
        complete = self.config.batch_mode == "complete_episodes"
        by_agent = self.config.count_steps_by == "agent_steps"
        if num_episodes is not None:
            self._reset_all()
            return self._run(None, int(num_episodes), explore, random_actions, complete=True, by_agent=by_agent)
        if num_timesteps is None:
            target = self.config.get_rollout_fragment_length(self.worker_index) * self.num_envs
        else:
            target = int(num_timesteps)
        if self._needs_reset or force_reset or (complete and not self._at_boundary.all()):
            self._reset_all()
        self._steps_done = 0
        try:
            return self._run(max(1, target), None, explore, random_actions, complete, by_agent)
        except EnvError as err:  # restart_failed_sub_environments=False: the rows before it are kept
            self._with_partial_fragment(err, complete)
            raise
        finally:
            self._steps_done = None

    def _reset_all(self) -> None:
        self.num_resets += 1
        for b in range(self.num_envs):
            seed = self._seed + b if self._seed is not None and self._needs_seed else None
            self._start_episode(b, seed)
        self._needs_seed = False
        self._needs_reset = False

    def _start_episode(self, b: int, seed: int | None = None) -> None:
        # Open transitions of the previous episode were closed when it ended.
        episode = MultiAgentEpisode(env_index=b, worker_index=self.worker_index, record=self._record)
        self._episodes[b] = episode
        self._pending[b] = {}
        self._agent_state[b] = {}
        self._last_row[b] = {}
        if self._on_episode_created is not None:
            self._on_episode_created(**self._episode_kwargs(b))
        try:
            obs, infos = self.envs[b].reset(seed=seed)
        except Exception as err:
            raise EnvError(f"{self._sub_env_label(b)}: env.reset() raised {type(err).__name__}: {err}") from err
        if not isinstance(obs, dict):
            raise EnvError(f"{self._sub_env_label(b)}: reset() returned observations {type(obs).__name__}; a "
                           "MultiAgentEnv returns (obs_dict, infos_dict) keyed by agent id.")
        obs = self._apply_observation_fn(obs, b)
        episode.add_env_reset(obs, infos if isinstance(infos, dict) else {})
        self._obs[b] = {aid: self._preprocess(b, aid, o, "from reset()") for aid, o in obs.items()}
        self._last_row[b] = dict(self._obs[b])
        self._at_boundary[b] = True
        if self._on_episode_start is not None:
            self._on_episode_start(**self._episode_kwargs(b))

    def _episode_kwargs(self, b: int) -> dict[str, Any]:
        return {"episode": self._episodes[b], "env_runner": self, "metrics_logger": self.metrics,
                "env": self.envs[b], "env_index": b, "rl_module": self.module, "worker": self,
                "base_env": self.envs, "policies": self.policy_map}

    def _module_of(self, b: int, aid: Any) -> str:
        episode = self._episodes[b]
        pid = episode.agent_to_module_map.get(aid)
        if pid is None:
            pid = episode.agent_to_module_map[aid] = self._mapper(aid, episode, worker=self)
        return pid

    def _apply_observation_fn(self, obs: dict, b: int) -> dict:
        fn = self._observation_fn
        if fn is None:
            return obs
        out = fn(agent_obs=obs, worker=self, base_env=self.envs, policies=self.policy_map,
                 episode=self._episodes[b])
        if not isinstance(out, dict):
            raise EnvError(f"observation_fn returned {type(out).__name__}; it must return the dict of agent "
                           "observations.")
        return out

    def _sub_env_label(self, b: int) -> str:
        return f"Sub-env {b} of EnvRunner {self.worker_index} (env {self.env_name!r})"

    def _preprocess(self, b: int, aid: Any, obs: Any, where: str) -> np.ndarray:
        pid = self._module_of(b, aid)
        slot = self.slots[pid]
        if slot.direct and type(obs) is np.ndarray and obs.dtype == slot.obs_dtype and \
                obs.shape == slot.obs_shape:
            # What Box envs usually return: stored as is (finiteness is checked per module batch
            # in _compute_actions).
            return obs
        try:
            row = np.asarray(slot.preprocessor.transform(obs), dtype=np.float32)
        except Exception as err:
            raise EnvError(f"{self._sub_env_label(b)} returned observation {obs!r:.80} for agent {aid!r} {where}, "
                           f"which policy {pid!r}'s observation space {slot.observation_space} does not fit "
                           f"({type(err).__name__}: {err}).") from err
        if row.shape != slot.preprocessor.shape:
            raise EnvError(f"{self._sub_env_label(b)} returned an observation of shape {row.shape} for agent "
                           f"{aid!r} {where}; policy {pid!r} expects {slot.preprocessor.shape} "
                           f"({slot.observation_space}).")
        if slot.float_obs and not math.isfinite(float(np.vdot(row, row))):
            raise EnvError(f"{self._sub_env_label(b)} returned a NaN or infinite observation for agent {aid!r} "
                           f"{where}; observations must be finite.")
        return row

    @torch.no_grad()
    def _run(self, target: int | None, num_episodes: int | None, explore: bool, random_actions: bool,
             complete: bool, by_agent: bool) -> MultiAgentBatch:
        for cols in self._columns.values():
            cols.rows = [[] for _ in cols.rows]
        active = list(range(self.num_envs if num_episodes is None else min(self.num_envs, num_episodes)))
        started = len(active) if num_episodes is not None else 0
        done_episodes = 0
        env_steps = agent_steps = 0
        check = not self.config.disable_env_checking
        while active:
            actions = self._compute_actions(active, explore, random_actions)
            finished = []
            for k, b in enumerate(active):
                agent_steps += len(actions[b])
                try:
                    ended = self._step_env(b, actions[b], check)
                except EnvError:
                    self._steps_done = env_steps + k  # the env steps an env error keeps (_with_partial_fragment)
                    raise
                if ended:
                    finished.append(b)
            env_steps += len(active)
            self._steps_done = env_steps
            self.num_env_steps_sampled_lifetime += len(active)
            for b in finished:
                done_episodes += 1
                if num_episodes is not None and started >= num_episodes:
                    active.remove(b)
                    continue
                started += num_episodes is not None
                self._start_episode(b)
            if num_episodes is not None:
                if done_episodes >= num_episodes:
                    break
                continue
            if (agent_steps if by_agent else env_steps) >= target:
                if not complete:
                    break
                active = [b for b in active if not self._at_boundary[b]]
        self.num_agent_steps_sampled_lifetime += agent_steps
        return self._build_batch(env_steps, agent_steps)

    def _with_partial_fragment(self, err: EnvError, complete: bool) -> EnvError:
        """`err` with the rows this sample() call finished before it (rlx.env.partial_fragment):
        the runner is replaced, its rows are not."""
        env_steps, self._steps_done = self._steps_done, None
        if not env_steps:
            return err
        try:
            batch = self._build_batch(env_steps, 0)
            agent_steps = 0
            kept_episodes: dict[int, Any] = {}
            for pid, module_batch in batch.policy_batches.items():
                cut_time_major(module_batch, complete)
                valid = module_batch.get(Columns.VALID)
                agent_steps += int(valid.sum()) if valid is not None else int(module_batch[Columns.REWARDS].size)
                if complete:  # the episodes kept whole: every one started in this call
                    for c, column in enumerate(self._columns[pid].rows):
                        kept = int(valid[:, c].sum()) if valid is not None else len(column)
                        kept_episodes.update((id(row[8]), row[8]) for row in column[:kept])
            if complete:
                env_steps = sum(int(episode.env_steps()) for episode in kept_episodes.values())
            if not agent_steps:
                return err
            batch = MultiAgentBatch(batch.policy_batches, env_steps, agent_steps)
            return attach_partial_fragment(err, self, batch, env_steps, agent_steps)
        except Exception as salvage_err:  # never hide the env's error behind this one
            logger.warning("The rows sampled before the env error could not be kept (%s: %s).",
                           type(salvage_err).__name__, salvage_err)
            return err

    def _compute_actions(self, active: list[int], explore: bool, random_actions: bool) -> dict[int, dict]:
        groups: dict[str, list[tuple[int, Any]]] = {}
        for b in active:
            for aid in self._obs[b]:
                groups.setdefault(self._module_of(b, aid), []).append((b, aid))
        actions: dict[int, dict] = {b: {} for b in active}
        for pid, members in groups.items():
            slot = self.slots[pid]
            self.module.use_module(pid)  # policy_map_capacity: back into memory if it was swapped out
            raw = np.stack([self._obs[b][aid] for b, aid in members])
            if slot.float_obs and not math.isfinite(float(np.vdot(raw, raw))):
                self._raise_nonfinite(raw, members)
            if slot.filter.is_identity:
                obs = raw
            else:
                slot.filter.update(raw)
                obs = slot.filter.apply_batch(raw, update=False)
            state_in = None
            if slot.stateful:
                states = [self._agent_state[b].get(aid, slot.initial_state) for b, aid in members]
                state_in = {k: np.stack([st[k] for st in states]) for k in slot.initial_state}
            acts, logp, dist_inputs = slot.act(np.ascontiguousarray(obs, dtype=np.float32), explore,
                                               random_actions, self.num_env_steps_sampled_lifetime, state_in)
            env_actions = slot.actions.to_env(acts)
            for k, (b, aid) in enumerate(members):
                actions[b][aid] = env_actions[k]
                # [pid, obs, action, logp, dist inputs, reward, state_in, env step it acted in]
                transition = [pid, obs[k], acts[k], logp[k], dist_inputs[k], 0.0, None, self._episodes[b].env_t]
                if state_in is not None:
                    # The state before this step travels with the transition (the Learner's sequences start
                    # there); the state after it is the agent's next state_in.
                    transition[6] = {key: v[k] for key, v in state_in.items()}
                    self._agent_state[b][aid] = {key: v[k] for key, v in slot.state_out.items()}
                self._pending[b][aid] = transition
        return actions

    def _raise_nonfinite(self, raw: np.ndarray, members: list[tuple[int, Any]]) -> None:
        """EnvError naming the first agent whose observation holds NaN or inf (an overflowing
        sum of squares alone is not an error)."""
        for k, (b, aid) in enumerate(members):
            if not np.isfinite(raw[k]).all():
                raise EnvError(f"{self._sub_env_label(b)} returned a NaN or infinite observation for agent {aid!r} "
                               f"(at step {self._episodes[b].env_t} of its episode): {raw[k]!r:.200}; observations "
                               "must be finite.")

    def _step_env(self, b: int, action_dict: dict, check: bool) -> bool:
        """Step sub-env b; record completed transitions; True when its episode ended."""
        try:
            out = self.envs[b].step(action_dict)
        except Exception as err:
            if not self.config.restart_failed_sub_environments:
                raise EnvError(f"env.step() of {self._sub_env_label(b)} raised {type(err).__name__}: {err}. With "
                               "config.fault_tolerance(restart_failed_sub_environments=True), a sub-env that does "
                               "this is rebuilt and its episode dropped instead.") from err
            self._restart_sub_env(b, err)
            return True
        if check and self._check_steps[b]:
            # Every step of each sub-env's first episode; later ones skip the check (it costs
            # about a tenth of a step).
            from rlx.env.multi_agent_env_checker import check_step_output

            check_step_output(self._sub_env_label(b), out, set(action_dict),
                              set(self._episodes[b].agent_to_module_map) | set(self._obs[b]))
        obs, rewards, terminateds, truncateds, infos = out
        episode = self._episodes[b]
        obs = self._apply_observation_fn(obs, b) if obs else obs
        pending = self._pending[b]
        for aid, reward in rewards.items():
            if aid in pending:
                pending[aid][5] += float(reward)
        all_t = bool(terminateds.get(ALL_AGENTS, False))
        all_tr = bool(truncateds.get(ALL_AGENTS, False))
        rows = {aid: self._preprocess(b, aid, o, f"at step {episode.env_t + 1} of its episode")
                for aid, o in obs.items()}
        episode.add_env_step(obs, action_dict, rewards, terminateds, truncateds, infos)
        for aid in list(pending):
            done_t = bool(terminateds.get(aid, False)) or all_t
            done_tr = (bool(truncateds.get(aid, False)) or all_tr) and not done_t
            if aid in rows or done_t or done_tr or all_t or all_tr:
                self._emit(b, aid, pending.pop(aid), rows.get(aid, self._last_row[b].get(aid)), done_t, done_tr)
        self._last_row[b].update(rows)
        acting = {}
        for aid, row in rows.items():
            if not (terminateds.get(aid, False) or truncateds.get(aid, False)):
                acting[aid] = row
        self._obs[b] = acting
        self._at_boundary[b] = False
        if self._on_episode_step is not None:
            self._on_episode_step(**self._episode_kwargs(b))
        if all_t or all_tr or not acting:
            self._check_steps[b] = False
            episode.finish(all_t, all_tr or not all_t)
            if self._on_episode_end is not None:
                self._on_episode_end(**self._episode_kwargs(b))
            self._log_episode(episode)
            self._at_boundary[b] = True
            return True
        return False

    def _restart_sub_env(self, b: int, err: BaseException) -> None:
        """Replace sub-env b, whose step() raised, by a new one (restart_failed_sub_environments).
        Its episode is dropped: not logged, and its agents' last rows end as truncated."""
        logger.warning("Sub-env %d of EnvRunner %d failed (%s: %s); restarting it and dropping its episode.",
                       b, self.worker_index, type(err).__name__, err)
        try:
            self.envs[b].close()
        except Exception:  # a broken env may not close cleanly; it is discarded either way
            pass
        self.envs[b] = self._connected(self._build_env(b), b)
        self.num_sub_env_restarts += 1
        self._pending[b] = {}
        for cols in self._columns.values():
            for (env_index, _), col in cols.slot_index.items():
                rows = cols.rows[col] if col < len(cols.rows) else None
                if env_index == b and rows:
                    last = rows[-1]
                    rows[-1] = last[:5] + (last[5], True) + last[7:]
        self._at_boundary[b] = True

    def _emit(self, b: int, aid: Any, transition: list, next_row: np.ndarray, terminated: bool,
              truncated: bool) -> None:
        pid = transition[0]
        cols = self._columns.get(pid)
        if cols is None:
            cols = self._columns[pid] = _Columns()
        col = cols.column((b, aid))
        cols.rows[col].append((transition[1], transition[2], transition[3], transition[4], transition[5],
                               terminated, truncated, next_row, self._episodes[b], aid,
                               transition[6], transition[7]))

    def _log_episode(self, episode: MultiAgentEpisode) -> None:
        m = self.metrics
        m.log_value(EPISODE_RETURNS_KEY, episode.get_return(), reduce=None)
        m.log_value(EPISODE_LENGTHS_KEY, episode.env_steps(), reduce=None)
        m.log_value("num_episodes", 1, reduce="sum", clear_on_reduce=True)
        per_module: dict[str, float] = {}
        agent_policy_returns = []
        for aid, ret in episode.agent_episode_returns.items():
            m.log_value(AGENT_RETURNS_KEY + (str(aid),), ret, window=self._smoothing)
            pid = episode.agent_to_module_map.get(aid)
            if pid is not None:
                per_module[pid] = per_module.get(pid, 0.0) + ret
                agent_policy_returns.append((pid, ret))
        # One entry per episode, next to its return: the Algorithm smooths the old API's
        # per-policy statistics over the same episodes as episode_return_mean.
        m.log_value(EPISODE_POLICY_RETURNS_KEY, tuple(agent_policy_returns), reduce=None)
        for pid, ret in per_module.items():
            m.log_value(MODULE_RETURNS_KEY + (pid,), ret, window=self._smoothing)
        log_episode_extras(m, episode, self._smoothing)

    def _build_batch(self, env_steps: int, agent_steps: int) -> MultiAgentBatch:
        batches = {}
        for pid, cols in self._columns.items():
            if pid not in self.slots or not any(cols.rows):
                continue
            batches[pid] = self._module_batch(self.slots[pid], cols.rows)
        return MultiAgentBatch(batches, env_steps, agent_steps)

    def _module_batch(self, slot: ModuleSlot, rows: list[list[tuple]]) -> dict[str, np.ndarray]:
        T, C = max(len(r) for r in rows), len(rows)
        shape = slot.preprocessor.shape
        obs = np.zeros((T, C) + shape, np.float32)
        next_obs = np.zeros((T, C) + shape, np.float32)
        act_shape = slot.actions.batch_shape
        actions = np.zeros((T, C) + act_shape, slot.act_dtype)
        logp = np.zeros((T, C), np.float32)
        first = next(r for r in rows if r)
        dist = np.zeros((T, C) + np.shape(first[0][3]), np.float32)
        rewards = np.zeros((T, C), np.float32)
        term = np.zeros((T, C), bool)
        trunc = np.zeros((T, C), bool)
        valid = np.zeros((T, C), bool)
        for c, column in enumerate(rows):
            n = len(column)
            if not n:
                continue
            o, a, lp, d, r, te, tr, no = list(zip(*column))[:8]
            obs[:n, c] = o
            actions[:n, c] = a
            logp[:n, c] = lp
            dist[:n, c] = d
            rewards[:n, c] = r
            term[:n, c] = te
            trunc[:n, c] = tr
            next_obs[:n, c] = no
            valid[:n, c] = True
        if not slot.filter.is_identity:
            next_obs = slot.filter.apply_batch(next_obs.reshape((T * C,) + shape), update=False).reshape(next_obs.shape)
        clip_rewards(rewards, self.config.clip_rewards)
        batch = {Columns.OBS: obs, Columns.NEXT_OBS: next_obs, Columns.ACTIONS: actions,
                 Columns.ACTION_LOGP: logp, Columns.ACTION_DIST_INPUTS: dist, Columns.REWARDS: rewards,
                 Columns.TERMINATEDS: term, Columns.TRUNCATEDS: trunc}
        if slot.stateful:  # each step's state_in, where the Learner starts its sequences
            for key, initial in slot.initial_state.items():
                column_state = np.zeros((T, C) + initial.shape, np.float32)
                for c, column in enumerate(rows):
                    if column:
                        column_state[:len(column), c] = [row[10][key] for row in column]
                batch[state_column(key)] = column_state
        if self._env_step_columns:  # which env step each row acted in (lockstep replay groups by it)
            eps_id = np.zeros((T, C), np.int64)
            env_t = np.zeros((T, C), np.int64)
            for c, column in enumerate(rows):
                eps_id[:len(column), c] = [row[8].episode_id for row in column]
                env_t[:len(column), c] = [row[11] for row in column]
            batch[Columns.EPS_ID], batch[Columns.T] = eps_id, env_t
        if not valid.all():
            batch[Columns.VALID] = valid
        if self._on_postprocess_trajectory is not None:
            self._postprocess_trajectories(slot.module_id, batch, rows)
        return batch

    def _postprocess_trajectories(self, policy_id: str, batch: dict[str, np.ndarray], rows: list[list[tuple]]) -> None:
        """Call on_postprocess_trajectory once per (agent, episode) stretch of a module's batch,
        writing back what the callback changed (see SingleAgentEnvRunner._postprocess_trajectories)."""
        from rlx.policy.sample_batch import SampleBatch

        policies = self.policy_map
        for c, column in enumerate(rows):
            t = 0
            while t < len(column):
                episode, aid = column[t][8], column[t][9]
                end = t + 1
                while end < len(column) and column[end][8] is episode:
                    end += 1
                span = slice(t, end)
                segment = SampleBatch({k: v[span, c] for k, v in batch.items() if k != Columns.VALID})
                segment["dones"] = segment[Columns.TERMINATEDS] | segment[Columns.TRUNCATEDS]
                segment["eps_id"] = np.full(end - t, episode.episode_id, np.int64)
                segment["agent_index"] = np.full(end - t, c, np.int64)
                views = dict(segment)
                original = {policy_id: (policies[policy_id], segment.copy())}
                self._on_postprocess_trajectory(
                    worker=self, episode=episode, agent_id=aid, policy_id=policy_id, policies=policies,
                    postprocessed_batch=segment, original_batches=original, env_runner=self,
                    metrics_logger=self.metrics)
                write_back_postprocessed(batch, segment, views, (span, c))
                t = end

    # ------------------------------------------------------------------ metrics, weights, state

    def get_metrics(self) -> dict[str, Any]:
        """Everything logged since the last call (see SingleAgentEnvRunner.get_metrics), plus
        per-agent and per-module episode returns."""
        out = self.metrics.reduce(return_stats_objects=True)
        self.metrics.reset()
        return out

    def get_weights(self, policies: list[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
        """{policy_id: weights} of all (or the given) policies."""
        return self.module.get_state(policies)

    def set_weights(self, weights: dict[str, Any], global_vars: dict | None = None,
                    weights_seq_no: int | None = None) -> None:
        """Load {policy_id: weights} (policies not given keep theirs)."""
        self.module.set_state({pid: w for pid, w in weights.items() if pid in self.module})
        if weights_seq_no is not None:
            self.weights_seq_no = int(weights_seq_no)
        if global_vars and "timestep" in global_vars:
            self.num_env_steps_sampled_lifetime = int(global_vars["timestep"])

    def get_state(self) -> dict[str, Any]:
        """Observation filters and exploration state per policy, and the sampling counters."""
        return {
            "filter": self.filter.get_state(),
            "exploration": self.exploration.get_state(),
            "num_env_steps_sampled_lifetime": int(self.num_env_steps_sampled_lifetime),
            "num_agent_steps_sampled_lifetime": int(self.num_agent_steps_sampled_lifetime),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore get_state()."""
        self.filter.set_state(state["filter"])
        if "exploration" in state:
            self.exploration.set_state(state["exploration"])
        self.num_env_steps_sampled_lifetime = int(state.get("num_env_steps_sampled_lifetime", 0))
        self.num_agent_steps_sampled_lifetime = int(state.get("num_agent_steps_sampled_lifetime", 0))

    @property
    def filter(self) -> "PerPolicy":
        """The observation filters of all policies, as one object (state is {policy_id: state}),
        with the env-to-module connectors' state when they keep any."""
        filters = PerPolicy({pid: s.filter for pid, s in self.slots.items()})
        if self._connectors is not None and self._connectors.env_to_module is not None:
            return FilterAndConnectorState(filters, self._connectors.env_to_module)
        return filters

    @property
    def exploration(self) -> "PerPolicy":
        """The explorations of all policies, as one object (state is {policy_id: state})."""
        return PerPolicy({pid: s.exploration for pid, s in self.slots.items()})

    # ------------------------------------------------------------------ envs

    @property
    def env(self) -> list[MultiAgentEnv]:
        """The sub-environments."""
        return self.envs

    @property
    def has_envs(self) -> bool:
        """Whether this runner has built its sub-environments (always, for this runner)."""
        return True

    def foreach_env(self, func: Callable[[Any], Any]) -> list[Any]:
        """Apply `func` to every sub-environment."""
        return [func(env) for env in self.envs]

    def foreach_env_with_context(self, func: Callable[[Any, EnvContext], Any]) -> list[Any]:
        """Apply `func(env, env_context)` to every sub-environment."""
        return [func(env, self._env_context(i)) for i, env in enumerate(self.envs)]

    # ------------------------------------------------------------------ old API

    def get_policy(self, policy_id: str = "default_policy") -> Any:
        """The Policy view of policy `policy_id`'s module."""
        if policy_id not in self.slots:
            raise KeyError(f"Unknown policy {policy_id!r}; this runner has {sorted(self.slots)}.")
        view = self._policy_views.get(policy_id)
        if view is None or view.module is not self.module[policy_id]:
            from rlx.policy.policy import Policy

            view = self._policy_views[policy_id] = Policy.from_env_runner(self.slots[policy_id])
        return view

    @property
    def policy_map(self) -> dict[str, Any]:
        """{policy_id: Policy} (old API)."""
        return {pid: self.get_policy(pid) for pid in self.slots}

    def is_policy_to_train(self, policy_id: str, batch: Any = None) -> bool:
        """Whether `policy_id` is trained (the config's policies_to_train)."""
        from rlx.algorithms.multi_agent_options import is_trainable

        return is_trainable(self.config.policies_to_train, policy_id, batch)

    def foreach_policy(self, func: Callable[..., Any]) -> list[Any]:
        """[func(policy, policy_id) for every policy] (old API)."""
        return [func(policy, pid) for pid, policy in self.policy_map.items()]

    def foreach_policy_to_train(self, func: Callable[..., Any]) -> list[Any]:
        """[func(policy, policy_id) for every trained policy] (old API)."""
        return [func(policy, pid) for pid, policy in self.policy_map.items() if self.is_policy_to_train(pid)]

    @property
    def preprocessors(self) -> dict[str, Preprocessor]:
        """{policy_id: preprocessor} (old API)."""
        return {pid: s.preprocessor for pid, s in self.slots.items()}

    @property
    def filters(self) -> dict[str, Any]:
        """{policy_id: observation filter} (old API)."""
        return {pid: s.filter for pid, s in self.slots.items()}

    def stop(self) -> None:
        """Close the envs."""
        from rlx.evaluation.rollout_worker import _unregister_runner

        _unregister_runner(self)
        for env in self.envs:
            try:
                env.close()
            except Exception:  # closing must reach every sub-env
                logger.warning("Closing a sub-env of EnvRunner %d failed.", self.worker_index, exc_info=True)


class PerPolicy:
    """Several policies' filters (or explorations) behind the one-object interface a runner
    offers: get_state/set_state and filter deltas as {policy_id: ...}."""

    def __init__(self, items: dict[str, Any]):
        self.items = items

    @property
    def is_identity(self) -> bool:
        """Whether every filter passes observations through unchanged."""
        return all(getattr(f, "is_identity", False) for f in self.items.values())

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


def _episode_step_limit(env: Any) -> int | None:
    """The time limit of a multi-agent env's episodes, when it is made of limited single-agent
    envs (make_multi_agent, SingleAgentAsMultiAgent); None otherwise."""
    from rlx.env.env_runner import episode_step_limit

    inner = [env.env] if isinstance(env, SingleAgentAsMultiAgent) else list(getattr(env, "envs", None) or [])
    limits = [episode_step_limit(e) for e in inner if isinstance(e, gym.Env)]
    limits = [x for x in limits if x]
    return max(limits) if limits else None


def _make_preprocessor(config: Any, space: gym.Space) -> Preprocessor:
    if config.preprocessor_pref is None or config._disable_preprocessor_api:
        if not isinstance(space, gym.spaces.Box):
            raise EnvError(f"Observation space {space} needs a preprocessor (one-hot or flattening), but "
                           "preprocessing is disabled (preprocessor_pref=None or _disable_preprocessor_api=True).")
        return NoPreprocessor(space, config.model)
    return get_preprocessor(space)(space, config.model)
