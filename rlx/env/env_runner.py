"""SingleAgentEnvRunner: steps a vector of envs with one module and returns time-major batches.

`sample()` returns a dict of NumPy arrays shaped [T, B, ...] (T steps of B sub-envs)
with the columns of `rlx.core.columns.Columns`. Completed-episode statistics are kept
until `get_metrics()` collects them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import numbers
import secrets
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch

from rlx.core import DEFAULT_AGENT_ID, Columns
from rlx.core.rl_module import RLModule, RLModuleSpec
from rlx.core.rl_module.compiled_acting import CompiledActing, acting_forward
from rlx.env.env_checker import OldGymEnvCompatibility, check_env, describe_value, looks_like_old_gym_api
from rlx.env.env_context import EnvContext
from rlx.env.fake_sampler import FakeSampler
from rlx.env.registry import make_env_creator
from rlx.env.connector_env import (
    ConnectorContext, ConnectorEnv, FilterAndConnectorState, build_env_to_module, build_module_to_env,
    has_env_to_module_pieces)
from rlx.env.partial_fragment import attach_partial_fragment, cut_time_major
from rlx.env.partial_steps import PartialSteps, compact_columns
from rlx.env.vector_env import VectorEnv
from rlx.models.preprocessors import NoPreprocessor, Preprocessor, get_preprocessor
from rlx.utils.errors import EnvError, EnvOutputError
from rlx.utils.filters import make_filter
from rlx.utils.metrics.metrics_logger import MetricsLogger

logger = logging.getLogger("rlx")

#: Where runners log each finished episode's return and length (lists, reduce=None).
EPISODE_RETURNS_KEY = ("hist_stats", "episode_reward")
EPISODE_LENGTHS_KEY = ("hist_stats", "episode_lengths")
#: Where multi-agent runners log each finished episode's ((policy_id, agent return), ...).
EPISODE_POLICY_RETURNS_KEY = ("hist_stats", "episode_policy_returns")

#: Where runners log windowed mean returns per agent and per module (policy).
AGENT_RETURNS_KEY = ("agent_episode_returns_mean",)
MODULE_RETURNS_KEY = ("module_episode_returns_mean",)

#: Reward types envs usually return: the sampling loop stores them without the full check.
_REWARD_TYPES = frozenset({float, int, np.float64, np.float32, np.int64, np.int32})
_RESTART_HINT = (" With config.fault_tolerance(restart_failed_sub_environments=True), a sub-env that does this is "
                 "rebuilt and its episode dropped instead.")

#: Events whose handlers need per-episode objects in the sampling loop.
_EPISODE_EVENTS = ("on_episode_created", "on_episode_start", "on_episode_step", "on_episode_end",
                   "on_postprocess_trajectory")


def _worker_seed(seed: int | None, worker_index: int) -> int | None:
    return None if seed is None else int(seed) + 1000 * int(worker_index)


def is_atari_env(env: Any) -> bool:
    """Whether `env` is an Atari (ALE) game, judged by its Gymnasium id or its class's module."""
    spec = getattr(env, "spec", None)
    env_id = getattr(spec, "id", "") or ""
    if env_id.startswith("ALE/") or "NoFrameskip" in env_id or "Deterministic-v" in env_id:
        return True
    module = type(getattr(env, "unwrapped", env)).__module__
    return module.startswith(("ale_py", "gym.envs.atari", "gymnasium.envs.atari"))


class ActionAdapter:
    """Maps module actions to env actions: unsquash from [-1, 1] (normalize_actions) and clip."""

    def __init__(self, action_space: gym.Space, normalize: bool, clip: bool):
        self.space = action_space
        self.is_box = isinstance(action_space, gym.spaces.Box)
        self.is_discrete = isinstance(action_space, gym.spaces.Discrete)
        self.is_multi_binary = isinstance(action_space, gym.spaces.MultiBinary)
        self.discrete_start = int(action_space.start) if self.is_discrete else 0
        # Box actions of 2+ dimensions and MultiBinary actions travel flat through module and batch.
        self.reshape = (self.is_multi_binary or isinstance(action_space, gym.spaces.Box)) \
            and len(action_space.shape) > 1
        self.normalize = False
        self.clip = False
        if self.is_box:
            finite = bool(np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high)))
            self.normalize = normalize and finite
            self.clip = clip or self.normalize
            self.low = action_space.low.astype(np.float64).reshape(-1)
            self.high = action_space.high.astype(np.float64).reshape(-1)
        # Shape (after [T, B]) and dtype of the batch's ACTIONS column.
        self.batch_shape: tuple = (int(np.prod(action_space.shape)),) if self.reshape else tuple(action_space.shape or ())
        self.batch_dtype = np.int64 if isinstance(
            action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)) else np.float32
        #: Tuple/Dict spaces: module actions are flat float32 rows, the parts' components
        #: concatenated (see rlx.core.distributions.MultiDistribution); each part has its adapter.
        self.structured = isinstance(action_space, (gym.spaces.Tuple, gym.spaces.Dict))
        if self.structured:
            from rlx.core.distributions import action_space_leaves, flat_action_size

            leaves = action_space_leaves(action_space)
            self._parts = [ActionAdapter(leaf, normalize, clip) for leaf in leaves]
            sizes = [flat_action_size(leaf) for leaf in leaves]
            self._splits = np.cumsum(sizes)[:-1].tolist()
            self.batch_shape = (int(sum(sizes)),)

    def to_env(self, actions: np.ndarray) -> Any:
        """Env actions for a batch of module actions; a list for Discrete spaces (and a list of
        tuples/dicts for Tuple/Dict spaces)."""
        if self.structured:
            return self._structured_to_env(np.asarray(actions, dtype=np.float32))
        if self.is_discrete:
            if self.discrete_start:
                return (actions + self.discrete_start).tolist()
            return actions.tolist()
        if self.is_multi_binary:
            return np.asarray(actions).reshape((-1,) + self.space.shape).astype(self.space.dtype, copy=False)
        if not self.is_box:
            return actions
        out = actions
        if self.normalize:
            out = self.low + (out + 1.0) * 0.5 * (self.high - self.low)
        if self.clip:
            out = np.clip(out, self.low, self.high)
        if self.reshape:
            out = out.reshape((-1,) + self.space.shape)
        return out.astype(self.space.dtype, copy=False)

    def _structured_to_env(self, flat: np.ndarray) -> list[Any]:
        from rlx.core.distributions import unflatten_action_parts

        n = flat.shape[0]
        columns = []
        for part, col in zip(self._parts, np.split(flat.reshape(n, -1), self._splits, axis=1)):
            leaf = part.space
            if part.is_discrete:
                columns.append((np.rint(col[:, 0]).astype(np.int64) + part.discrete_start).tolist())
            elif isinstance(leaf, gym.spaces.MultiDiscrete):
                ints = np.rint(col).astype(np.int64).reshape((n,) + leaf.shape) + np.asarray(getattr(leaf, "start", 0))
                columns.append(ints.astype(leaf.dtype, copy=False))
            else:  # Box: unsquash/clip as for a Box action space
                columns.append(part.to_env(col.reshape((n,) + leaf.shape)))
        return [unflatten_action_parts(self.space, [c[i] for c in columns]) for i in range(n)]

    def from_env(self, env_actions: list[Any]) -> np.ndarray:
        """Flat module actions [n, D] of a list of a Tuple/Dict space's env actions: the inverse
        of `to_env` (normalized Box parts squashed back into [-1, 1])."""
        from rlx.core.distributions import flatten_action_parts

        rows = np.zeros((len(env_actions),) + self.batch_shape, np.float32)
        for i, action in enumerate(env_actions):
            leaves = flatten_action_parts(self.space, action)
            rows[i] = np.concatenate([_part_from_env(part, leaf) for part, leaf in zip(self._parts, leaves)])
        return rows

    def sample_module_actions(self, n: int) -> np.ndarray:
        """`n` random actions (random_actions=True sampling) in the batch's form."""
        if self.structured:
            return self.from_env([self.space.sample() for _ in range(n)])
        actions = np.stack([self.space.sample() for _ in range(n)])
        if self.reshape:
            actions = actions.reshape((n,) + self.batch_shape)
        if self.normalize:  # module actions of normalized Box spaces live in [-1, 1]
            actions = 2.0 * (actions.reshape(n, -1) - self.low) / (self.high - self.low) - 1.0
            actions = actions.reshape((n,) + self.batch_shape)
        return actions.astype(self.batch_dtype, copy=False)


def _part_from_env(part: ActionAdapter, value: Any) -> np.ndarray:
    """One part's env action as its flat module-action components."""
    flat = np.asarray(value, dtype=np.float64).reshape(-1)
    if part.is_discrete:
        return flat - part.discrete_start
    if isinstance(part.space, gym.spaces.MultiDiscrete):
        return flat - np.asarray(getattr(part.space, "start", 0), dtype=np.float64).reshape(-1)
    if part.normalize:
        low, high = part.low.reshape(-1), part.high.reshape(-1)
        return 2.0 * (flat - low) / (high - low) - 1.0
    return flat


class SingleAgentEnvRunner:
    """Samples experience from `num_envs_per_env_runner` copies of the env with one RLModule.

    Args:
        config: the (frozen) AlgorithmConfig.
        worker_index: 0 for the local runner in the driver, 1..N for remote runners.
        num_workers: total number of remote runners.
        module_spec: the RLModuleSpec to build the module from (spaces filled from the env).
        module: an existing module to use instead (shared with the local Learner).
    """

    def __init__(
        self,
        config: Any,
        worker_index: int = 0,
        num_workers: int = 0,
        module_spec: RLModuleSpec | None = None,
        module: RLModule | None = None,
        env_info: "EnvInfo | None" = None,
    ):
        self.config = config
        self.worker_index = worker_index
        self.num_workers = num_workers
        self._seed = _worker_seed(config.seed, worker_index)
        self.metrics = MetricsLogger()
        self._smoothing = int(config.metrics_num_episodes_for_smoothing)
        self.weights_seq_no = 0
        self._callbacks = config.make_callback_dispatcher()
        self._resolve_callbacks()
        if config.env is None and env_info is not None:
            # Spaces only (observation_space/action_space, env=None: an external application's
            # steps arrive through a PolicyServerInput); creating a sub-env explains what is missing.
            self._make_env, self.env_name = (lambda ctx: make_env_creator(None)[0](ctx)), "<external env>"
        else:
            self._make_env, self.env_name = make_env_creator(config.env)
        if config.preprocessor_pref == "deepmind" and not config._disable_preprocessor_api:
            self._make_env = DeepMindAtariCreator(self._make_env, config.model)
        self._env: VectorEnv | None = None
        self._connectors = None  # the ConnectorContext of custom connector pipelines, if any
        if env_info is None:
            # Sub-envs now; without them (the driver's runner beside remote runners, when
            # create_env_on_local_worker=False) they are built on first use.
            self._build_envs()
            env_info = self.env_info()
        else:
            self.num_envs = env_info.num_envs
            if env_info.env_spaces is not None:
                self._connector_context(None, *env_info.env_spaces)
        self.observation_space = config.observation_space if config.observation_space is not None \
            else env_info.observation_space
        self.action_space = config.action_space if config.action_space is not None else env_info.action_space
        if self._seed is not None:
            self.action_space.seed(self._seed)  # random_actions sampling is reproducible too
        self.is_atari = config.is_atari if config.is_atari is not None else env_info.is_atari
        self.preprocessor = self._make_preprocessor(self.observation_space)
        self.filter = make_filter(config.observation_filter, self.preprocessor.shape)
        if self._connectors is not None and self._connectors.env_to_module is not None:
            self.filter = FilterAndConnectorState(self.filter, self._connectors.env_to_module)
        self.module_observation_space = self.preprocessor.observation_space
        self.actions = ActionAdapter(self.action_space, config.normalize_actions, config.clip_actions)
        self.module = module if module is not None else self._build_module(module_spec)
        if self._connectors is not None:
            self._connectors.rl_module = self.module
            self._connectors.metrics = self.metrics
        # Recurrent modules: one state row per sub-env, reset at each episode's start.
        self._initial_state = {k: np.asarray(v, np.float32) for k, v in self.module.get_initial_state().items()} \
            if hasattr(self.module, "get_initial_state") else {}
        self._stateful = bool(self._initial_state)
        self._numpy_actor_cache: tuple | None = None  # see _numpy_actor
        self._compiled_acting = CompiledActing.from_config(config)  # torch_compile_worker
        self._fake_sampler = FakeSampler.from_config(config)
        self._dist_cls = self.module.get_exploration_action_dist_cls()
        self._inference_dist_cls = self.module.get_inference_action_dist_cls()
        self._generator = torch.Generator()
        # Unseeded runs draw fresh entropy without touching torch's global RNG.
        self._generator.manual_seed(self._seed if self._seed is not None else secrets.randbits(62))
        self.exploration = self._make_exploration()
        self._needs_reset = True
        self._needs_seed = True
        self._obs_shape = self.preprocessor.shape
        self._float_obs = has_float_values(self.observation_space)
        self.num_env_steps_sampled_lifetime = 0
        self.num_resets = 0  # times every sub-env was reset at once (episodes in progress abandoned)
        self.num_sub_env_restarts = 0  # failed sub-envs rebuilt (restart_failed_sub_environments)
        self._policy_view = None
        self._alloc_episode_state()
        from rlx.evaluation.rollout_worker import _register_runner

        _register_runner(self)
        if self._env is not None:
            self._fire_environment_created()

    def _alloc_episode_state(self) -> None:
        """Per-sub-env bookkeeping arrays, sized to num_envs."""
        self._raw_obs = np.zeros((self.num_envs,) + self._obs_shape, dtype=np.float32)
        self._ep_return = np.zeros(self.num_envs, dtype=np.float64)
        self._ep_len = np.zeros(self.num_envs, dtype=np.int64)
        self._at_boundary = np.ones(self.num_envs, dtype=bool)
        self._episodes: list[Any] = [None] * self.num_envs
        if getattr(self, "_stateful", False):
            self._state = {k: np.repeat(v[None], self.num_envs, axis=0) for k, v in self._initial_state.items()}
            self._next_state = None

    def _reset_state(self, rows: Any) -> None:
        """Give these sub-envs' rows the recurrent module's initial state (new episodes)."""
        for k, v in self._initial_state.items():
            self._state[k][rows] = v

    def _build_envs(self) -> None:
        self._env = VectorEnv(self._create_envs())
        self.num_envs = self._env.num_envs

    @property
    def env(self) -> VectorEnv:
        """The sub-environments (a VectorEnv), built on first use when the runner started without them."""
        if self._env is None:
            self._build_envs()
            self._alloc_episode_state()
            self._fire_environment_created()
        return self._env

    @property
    def has_envs(self) -> bool:
        """Whether this runner has built its sub-environments."""
        return self._env is not None

    def env_info(self) -> "EnvInfo":
        """What a runner without envs of its own needs to know about this runner's envs."""
        env = self.env
        env_spaces = None
        if isinstance(env.envs[0], ConnectorEnv):
            env_spaces = (env.envs[0].env.observation_space, env.envs[0].env.action_space)
        return EnvInfo(env.observation_space, env.action_space, self.num_envs,
                       getattr(self, "is_atari", None) if hasattr(self, "is_atari") else is_atari_env(env.envs[0]),
                       env_spaces)

    # ------------------------------------------------------------------ setup

    @property
    def policy_config(self) -> Any:
        """Old name of `config` (`worker.policy_config["in_evaluation"]`)."""
        return self.config

    @property
    def callbacks(self) -> Any:
        """This runner's CallbackDispatcher (its `.instances` are the RLlibCallback objects)."""
        return self._callbacks

    def _resolve_callbacks(self) -> None:
        # Handlers are looked up once; an event nobody handles is None and never dispatched.
        cb = self._callbacks
        self._on_episode_created = cb.get("on_episode_created")
        self._on_episode_start = cb.get("on_episode_start")
        self._on_episode_step = cb.get("on_episode_step")
        self._on_episode_end = cb.get("on_episode_end")
        self._on_sample_end = cb.get("on_sample_end")
        self._on_postprocess_trajectory = cb.get("on_postprocess_trajectory")
        self._track_episodes = any(cb.has(e) for e in _EPISODE_EVENTS)

    def _fire_environment_created(self) -> None:
        cb = self._callbacks
        if not cb.has_any(("on_environment_created", "on_sub_environment_created")):
            return
        from rlx.evaluation.rollout_worker import acting_runner

        with acting_runner(self):  # get_global_worker() in these events is this runner
            self._fire_env_events(cb)

    def _fire_env_events(self, cb: Any) -> None:
        if cb.has("on_environment_created"):
            cb.fire("on_environment_created", env_runner=self, metrics_logger=self.metrics, env=self.env,
                    env_context=self._env_context(0))
        if cb.has("on_sub_environment_created"):
            for i, sub_env in enumerate(self.env.envs):
                cb.fire("on_sub_environment_created", worker=self, sub_environment=sub_env,
                        env_context=self._env_context(i), env_index=i)

    def _env_context(self, vector_index: int) -> EnvContext:
        return EnvContext(self.config.env_config, worker_index=self.worker_index, vector_index=vector_index,
                          remote=self.worker_index > 0, num_workers=self.num_workers)

    def _create_envs(self) -> list[Any]:
        cfg = self.config
        envs = []
        wrap_old = False
        count = cfg.num_envs_per_env_runner
        i = 0
        while i < count:
            env = self._build_env(i)
            if i == 0 and _is_multi_agent_env(env):
                env.close()
                raise MultiAgentEnvFoundError(
                    f"Env {self.env_name!r} is a MultiAgentEnv ({type(env).__name__}), which {type(self).__name__} "
                    "cannot step. Leave env_runner_cls unset: Algorithms sample MultiAgentEnvs with "
                    "MultiAgentEnvRunner.")
            if i == 0:
                count = cfg.resolve_num_envs_per_env_runner(episode_step_limit(env))
            if i == 0 and not cfg.disable_env_checking:
                checked = check_env(env, cfg.auto_wrap_old_gym_envs, seed=self._seed)
                wrap_old = isinstance(checked, OldGymEnvCompatibility)
                env = checked
            elif i == 0:
                wrap_old = cfg.auto_wrap_old_gym_envs and looks_like_old_gym_api(env)
                if wrap_old:
                    env = OldGymEnvCompatibility(env)
            elif wrap_old:
                env = OldGymEnvCompatibility(env)
            envs.append(env)
            i += 1
        return [self._connected(env, i) for i, env in enumerate(envs)]

    def _connector_context(self, env: Any, obs_space: gym.Space, act_space: gym.Space) -> Any:
        """The ConnectorContext of the config's custom connectors (built once, from the env's
        spaces); None without custom connectors."""
        cfg = self.config
        if self._connectors is None and has_env_to_module_pieces(cfg):
            self._connectors = ConnectorContext(
                env_to_module=build_env_to_module(cfg, env, obs_space, act_space),
                module_to_env=build_module_to_env(cfg, env, obs_space, act_space),
                rl_module=getattr(self, "module", None), metrics=self.metrics)
        return self._connectors

    def _connected(self, env: Any, i: int) -> Any:
        """Sub-env `env`, wrapped to run the custom connectors when the config has any."""
        context = self._connector_context(env, env.observation_space, env.action_space)
        if context is None:
            return env
        return ConnectorEnv(env, context, env_index=i, worker_index=self.worker_index)

    def _build_env(self, i: int) -> Any:
        """Sub-env `i`: built here, or with remote_worker_envs in a process of its own."""
        ctx = self._env_context(i)
        if self.config.sub_envs_in_processes:
            from rlx.env.remote_sub_env import RemoteSubEnv

            return RemoteSubEnv(_SubEnvFactory(self._make_env, ctx, self.config.auto_wrap_old_gym_envs),
                                name=f"{self.worker_index}/{i}")
        try:
            return self._make_env(ctx)
        except EnvError:
            raise
        except Exception as err:
            raise EnvError(
                f"Creating env '{self.env_name}' (worker_index={self.worker_index}, vector_index={i}) "
                f"failed: {type(err).__name__}: {err}"
            ) from err

    @property
    def module_action_space(self) -> gym.Space:
        """The action space the module acts in: [-1, 1] boxes when actions are normalized."""
        if self.actions.normalize:
            space = self.action_space
            return gym.spaces.Box(-1.0, 1.0, shape=space.shape, dtype=np.float32)
        return self.action_space

    def _make_exploration(self) -> Any:
        from rlx.utils.exploration import make_exploration

        seed = None if self._seed is None else self._seed + 7919
        return make_exploration(
            self.config.exploration_config,
            action_space=self.module_action_space,
            policy_config=self.config,
            model=self.module,
            num_workers=self.num_workers,
            worker_index=self.worker_index,
            seed=seed,
        )

    def _make_preprocessor(self, space: gym.Space) -> Preprocessor:
        cfg = self.config
        if cfg.preprocessor_pref is None or cfg._disable_preprocessor_api:
            if not isinstance(space, gym.spaces.Box):
                raise EnvError(
                    f"Observation space {space} needs a preprocessor (one-hot or flattening), but preprocessing "
                    "is disabled (preprocessor_pref=None or _disable_preprocessor_api=True)."
                )
            return NoPreprocessor(space, cfg.model)
        return get_preprocessor(space)(space, cfg.model)

    def _build_module(self, spec: RLModuleSpec | None) -> RLModule:
        if spec is None:
            raise ValueError("SingleAgentEnvRunner needs a module_spec or a module.")
        # replace() keeps the spec's other fields (catalog_class, load_state_path, ...).
        spec = dataclasses.replace(
            spec,
            observation_space=spec.observation_space if spec.observation_space is not None
            else self.module_observation_space,
            action_space=spec.action_space if spec.action_space is not None else self.action_space,
            model_config=spec.model_config if spec.model_config is not None else self.config.model,
        )
        ctx = torch.random.fork_rng(devices=[]) if self.config.seed is not None else contextlib.nullcontext()
        with ctx:
            if self.config.seed is not None:
                torch.manual_seed(int(self.config.seed))
            return spec.build()

    # ------------------------------------------------------------------ sampling

    def _reset_all(self) -> None:
        self.num_resets += 1
        for i, env in enumerate(self.env.envs):
            seed = None
            if self._seed is not None and self._needs_seed:
                seed = self._seed + i
            if self._track_episodes:
                self._new_episode(i)
            obs, info = self._reset_sub_env(i, seed=seed)
            self._write_obs(obs, self._raw_obs, i)
            if self._track_episodes:
                self._start_episode(i, obs, info)
        self._needs_seed = False
        if self._stateful:
            self._reset_state(slice(None))
        self._ep_return[:] = 0.0
        self._ep_len[:] = 0
        self._at_boundary[:] = True
        self._needs_reset = False

    def _reset_sub_env(self, i: int, **reset_kwargs: Any) -> tuple[Any, Any]:
        """`reset()` sub-env i. When it raises: an EnvError naming the sub-env or, with
        restart_failed_sub_environments, the sub-env rebuilt and reset once more."""
        try:
            return self.env.envs[i].reset(**reset_kwargs)
        except Exception as err:
            if not self.config.restart_failed_sub_environments:
                raise EnvError(f"{self._sub_env_label(i)}: env.reset() raised {type(err).__name__}: {err}. Fix the "
                               f"env's reset(), or see the traceback above.{_RESTART_HINT}") from err
            self._restart_sub_env(i, err)
        try:
            return self.env.envs[i].reset(**reset_kwargs)
        except Exception as err:
            raise EnvError(f"{self._sub_env_label(i)}: env.reset() raised {type(err).__name__}: {err}, also on a "
                           "freshly built sub-env (restart_failed_sub_environments); fix the env's reset().") from err

    # ------------------------------------------------------------------ episodes (callbacks)

    def _episode_kwargs(self, i: int) -> dict[str, Any]:
        return {
            "episode": self._episodes[i], "env_runner": self, "metrics_logger": self.metrics, "env": self.env,
            "env_index": i, "rl_module": self.module, "worker": self, "base_env": self.env,
            "policies": self.policy_map,
        }

    def _new_episode(self, i: int) -> None:
        from rlx.env.single_agent_episode import SingleAgentEpisode

        self._episodes[i] = SingleAgentEpisode(
            env_index=i, worker_index=self.worker_index,
            observation_space=self.observation_space, action_space=self.action_space,
        )
        if self._on_episode_created is not None:
            self._on_episode_created(**self._episode_kwargs(i))

    def _start_episode(self, i: int, obs: Any, info: Any) -> None:
        self._episodes[i].add_env_reset(obs, info)
        if self._on_episode_start is not None:
            self._on_episode_start(**self._episode_kwargs(i))

    def _step_episode(self, i: int, obs: Any, action: Any, reward: float, info: Any,
                      terminated: bool, truncated: bool) -> None:
        episode = self._episodes[i]
        episode.add_env_step(obs, action, reward, info, terminated=terminated, truncated=truncated)
        if self._on_episode_step is not None:
            self._on_episode_step(**self._episode_kwargs(i))
        if terminated or truncated:
            if self._on_episode_end is not None:
                self._on_episode_end(**self._episode_kwargs(i))
            self._log_episode_extras(episode)

    def _log_episode_extras(self, episode: Any) -> None:
        log_episode_extras(self.metrics, episode, self._smoothing)

    def _log_episode(self, episode_return: float, length: int) -> None:
        # Raw per-episode values since the last get_metrics(); the Algorithm smooths them over
        # metrics_num_episodes_for_smoothing episodes (never cutting an iteration's excess ones).
        m = self.metrics
        m.log_value(EPISODE_RETURNS_KEY, episode_return, reduce=None)
        m.log_value(EPISODE_LENGTHS_KEY, length, reduce=None)
        m.log_value("num_episodes", 1, reduce="sum", clear_on_reduce=True)
        # The one-agent, one-module case of the multi-agent runner's per-agent and per-module returns.
        m.log_value(AGENT_RETURNS_KEY + (DEFAULT_AGENT_ID,), episode_return, window=self._smoothing)
        m.log_value(MODULE_RETURNS_KEY + ("default_policy",), episode_return, window=self._smoothing)

    def _restart_sub_env(self, i: int, err: BaseException) -> None:
        """Replace sub-env `i`, whose step() raised or returned what rlx cannot use, by a new one
        (restart_failed_sub_environments)."""
        logger.warning("Sub-env %d of EnvRunner %d failed (%s: %s); restarting it and dropping its episode.",
                       i, self.worker_index, type(err).__name__, err)
        try:
            self.env.envs[i].close()
        except Exception:  # a broken env may not close cleanly; it is discarded either way
            pass
        env = self._build_env(i)
        if self.config.auto_wrap_old_gym_envs and looks_like_old_gym_api(env):
            env = OldGymEnvCompatibility(env)
        self.env.envs[i] = self._connected(env, i)
        self.num_sub_env_restarts += 1

    # ------------------------------------------------------------------ checks of what envs return
    # The sampling loop stores what envs usually return (a reward of a common number type, an
    # array of the space's shape and dtype, a dict info) after an inline type check, and tests
    # each step's rewards and new observations for NaN/inf with one vectorized test per column;
    # these helpers do the rest. What is checked, and why not bounds: docs/environments.md.

    def _write_obs(self, obs: Any, out: np.ndarray, i: int) -> None:
        """Store sub-env i's reset() observation in out[i]; EnvOutputError if rlx cannot use it."""
        where = "from reset()"
        if type(self.preprocessor) is not NoPreprocessor:
            out[i] = self._transformed_obs(obs, i, where)
        elif type(obs) is np.ndarray and obs.dtype is self.observation_space.dtype and obs.shape == self._obs_shape:
            out[i] = obs
        else:
            out[i] = self._checked_obs(obs, i, where)
        if self._float_obs and not all_finite(out[i]):
            raise self._nonfinite_error(i, where, obs_row=out[i])

    def _check_reset_obs(self, indices: list[int]) -> None:
        """EnvOutputError for the first of these sub-envs whose reset() observation holds NaN or inf."""
        for i in indices:
            if not all_finite(self._raw_obs[i]):
                raise self._nonfinite_error(i, "from reset()", obs_row=self._raw_obs[i])

    def _sub_env_label(self, i: int) -> str:
        return f"Sub-env {i} of EnvRunner {self.worker_index} (env {self.env_name!r})"

    def _at_step(self, i: int) -> str:
        return f"at step {int(self._ep_len[i]) + 1} of its episode"

    def _checked_step(self, i: int, reward: Any, obs: Any, info: Any) -> tuple[float, np.ndarray]:
        """The full check of a step's output that the inline check did not pass: the reward as a
        float and the observation as rlx stores it; EnvOutputError naming what is wrong."""
        if not self.config.disable_env_checking and not isinstance(info, dict):
            raise EnvOutputError(
                f"{self._sub_env_label(i)} returned info {describe_value(info)} {self._at_step(i)}; the Gymnasium "
                "API's info is a dict (return {} for no info). Turn this check off with "
                f"config.environment(disable_env_checking=True).{_RESTART_HINT}")
        value = reward[()] if isinstance(reward, np.ndarray) and reward.shape == () else reward
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise EnvOutputError(
                f"{self._sub_env_label(i)} returned reward {describe_value(reward)} {self._at_step(i)}; a reward "
                f"must be a single number (int, float or a NumPy scalar).{_RESTART_HINT}")
        try:
            number = float(value)
        except OverflowError:  # an int beyond float range: reported as inf by the finiteness check
            number = math.inf
        if type(self.preprocessor) is NoPreprocessor:
            return number, self._checked_obs(obs, i)
        return number, self._transformed_obs(obs, i)

    def _checked_obs(self, obs: Any, i: int, where: str | None = None) -> np.ndarray:
        """A Box observation as an array; EnvOutputError unless it is numeric with the space's shape.

        Bounds and the exact dtype are left to the env checker at build: many envs step
        slightly outside their declared bounds, and any numeric dtype stores as float32.
        `where` says what returned it for the error (default: sub-env i's current step).
        """
        try:
            arr = np.asarray(obs)
        except Exception:  # e.g. a ragged list
            arr = None
        space = self.observation_space
        where = where or self._at_step(i)
        if arr is None or arr.dtype.kind not in "biuf":
            raise EnvOutputError(
                f"{self._sub_env_label(i)} returned observation {describe_value(obs)} {where}; it must be a "
                f"numeric array of shape {self._obs_shape} (observation_space {space}).{_restart_hint(where)}")
        if arr.shape != self._obs_shape:
            raise EnvOutputError(
                f"{self._sub_env_label(i)} returned an observation of shape {arr.shape} {where}; observation_space "
                f"{space} has shape {self._obs_shape}.{_restart_hint(where)}")
        return arr

    def _transformed_obs(self, obs: Any, i: int, where: str | None = None) -> np.ndarray:
        """The preprocessed observation; EnvOutputError naming the sub-env when preprocessing fails."""
        try:
            return self.preprocessor.transform(obs)
        except Exception as err:
            where = where or self._at_step(i)
            raise EnvOutputError(
                f"{self._sub_env_label(i)} returned observation {describe_value(obs)} {where}, which the "
                f"{type(self.preprocessor).__name__} of observation_space {self.observation_space} cannot "
                f"handle ({type(err).__name__}: {err}).{_restart_hint(where)}") from err

    def _nonfinite_error(self, i: int, where: str, reward: Any = None,
                         obs_row: np.ndarray | None = None) -> EnvOutputError:
        parts = []
        if reward is not None:
            parts.append(f"reward {reward} (as stored in the float32 reward column)")
        if obs_row is not None:
            values = np.array2string(obs_row.ravel(), threshold=12, precision=4)
            parts.append(f"an observation with {int(np.isnan(obs_row).sum())} NaN and {int(np.isinf(obs_row).sum())} "
                         f"infinite values (as rlx stores it: {values})")
        return EnvOutputError(
            f"{self._sub_env_label(i)} returned {' and '.join(parts)} {where}; rewards and observations must be "
            "finite. Check the env's reward computation and state update (a division by zero, log(0), a diverging "
            f"simulation).{_restart_hint(where)}")

    def _fail_sub_env(self, i: int, err: BaseException) -> None:
        """Sub-env i's step() raised or returned what rlx cannot use: raise an EnvError, or with
        restart_failed_sub_environments rebuild the sub-env (the caller then drops its episode)."""
        if not self.config.restart_failed_sub_environments:
            self._failed_sub_env = i  # the sub-envs before it in this row stepped (_with_partial_fragment)
            if isinstance(err, EnvOutputError):
                raise err
            raise EnvError(
                f"env.step() of sub-env {i} on EnvRunner {self.worker_index} raised {type(err).__name__}: {err}"
            ) from err
        self._restart_sub_env(i, err)

    def _drop_row(self, buf: dict[str, np.ndarray], t: int, i: int, finished: list[int], dropped: list[int]) -> None:
        """End row t of a failed sub-env i as a truncation at its last good observation; its episode
        is dropped: neither logged nor passed to episode callbacks."""
        buf[Columns.REWARDS][t, i] = 0.0
        buf[Columns.NEXT_OBS][t, i] = self._raw_obs[i]
        buf[Columns.TERMINATEDS][t, i] = False
        buf[Columns.TRUNCATEDS][t, i] = True
        if i not in finished:
            finished.append(i)
        dropped.append(i)

    def _drop_nonfinite_rows(self, buf: dict[str, np.ndarray], t: int, finished: list[int],
                             dropped: list[int]) -> None:
        """Handle the sub-envs whose reward or new observation in row t is NaN or inf as failed ones
        (there are none when only a sum of squares overflowed)."""
        rew_t, next_t = buf[Columns.REWARDS][t], buf[Columns.NEXT_OBS][t]
        bad_reward = ~np.isfinite(rew_t)
        bad_obs = ~np.isfinite(next_t.reshape(len(next_t), -1)).all(axis=1)
        for i in np.flatnonzero(bad_reward | bad_obs).tolist():
            err = self._nonfinite_error(i, self._at_step(i), reward=rew_t[i] if bad_reward[i] else None,
                                        obs_row=next_t[i] if bad_obs[i] else None)
            self._fail_sub_env(i, err)
            self._drop_row(buf, t, i, finished, dropped)

    def _policy_obs(self) -> np.ndarray:
        if self.filter.is_identity:
            return self._raw_obs
        return self.filter.apply_batch(self._raw_obs, update=False)

    def sample(
        self,
        num_timesteps: int | None = None,
        num_episodes: int | None = None,
        explore: bool | None = None,
        random_actions: bool = False,
        force_reset: bool = False,
    ) -> dict[str, np.ndarray]:
        """Step the envs and return a time-major batch.

        With `num_timesteps` (default: rollout_fragment_length per sub-env) each sub-env
        takes ceil(num_timesteps / num_envs) steps; with batch_mode='complete_episodes'
        the envs then run on until their episodes end. With `num_episodes`, sampling
        starts fresh episodes and stops once that many have completed. Rows that belong
        to no collected step are marked False in the `valid` column (present only then).
        """
        from rlx.evaluation.rollout_worker import acting_runner

        if self._fake_sampler is not None and self._fake_sampler.has_batch:
            return self._fake_sampler.replay()  # fake_sampler: the first batch again
        with acting_runner(self):
            batch = self._sample(num_timesteps, num_episodes, explore, random_actions, force_reset)
            steps = int(batch[Columns.VALID].sum()) if Columns.VALID in batch else int(batch[Columns.REWARDS].size)
            self.metrics.log_value("num_env_steps_sampled", steps, reduce="sum", clear_on_reduce=True)
            if self._on_sample_end is not None:
                self._on_sample_end(env_runner=self, metrics_logger=self.metrics, samples=batch, worker=self)
        if self._fake_sampler is not None:
            self._fake_sampler.remember(batch)
        return batch

    def _sample(self, num_timesteps: int | None, num_episodes: int | None, explore: bool | None,
                random_actions: bool, force_reset: bool) -> dict[str, np.ndarray]:
        explore = self.config.explore if explore is None else bool(explore)
        if self._connectors is not None:
            self._connectors.explore = explore
        partial = getattr(self, "_partial_steps", None)
        if partial is not None and partial.drop_in_flight(self.env.envs):
            self._needs_reset = True  # a sample() that raised left steps in flight: start fresh episodes
        B = self.env.num_envs
        complete = self.config.batch_mode == "complete_episodes"
        if num_episodes is not None:
            self._reset_all()
            return self._run(steps_per_env=None, num_episodes=int(num_episodes), explore=explore,
                             random_actions=random_actions, complete=True)
        if num_timesteps is None:
            steps_per_env = self.config.get_rollout_fragment_length(self.worker_index)
        else:
            steps_per_env = max(1, math.ceil(num_timesteps / B))
        if self._needs_reset or force_reset or (complete and not self._at_boundary.all()):
            self._reset_all()
        self._rows_done = self._failed_sub_env = None
        try:
            return self._run(steps_per_env, None, explore, random_actions, complete)
        except EnvError as err:  # restart_failed_sub_environments=False: the rows before it are kept
            self._with_partial_fragment(err, complete)
            raise
        finally:
            self._rows_done = None

    def _alloc(self, T: int) -> dict[str, np.ndarray]:
        B = self.num_envs
        act_shape, act_dtype = self.actions.batch_shape, self.actions.batch_dtype
        return {
            Columns.OBS: np.zeros((T, B) + self._obs_shape, dtype=np.float32),
            Columns.NEXT_OBS: np.zeros((T, B) + self._obs_shape, dtype=np.float32),
            Columns.ACTIONS: np.zeros((T, B) + tuple(act_shape), dtype=act_dtype),
            Columns.REWARDS: np.zeros((T, B), dtype=np.float32),
            Columns.TERMINATEDS: np.zeros((T, B), dtype=bool),
            Columns.TRUNCATEDS: np.zeros((T, B), dtype=bool),
            Columns.ACTION_LOGP: np.zeros((T, B), dtype=np.float32),
            Columns.VALID: np.zeros((T, B), dtype=bool),
            # A recurrent module's state before each step (the Learner starts its sequences there).
            **{state_column(k): np.zeros((T, B) + v.shape, np.float32) for k, v in self._initial_state.items()},
        }

    @staticmethod
    def _grow(buf: dict[str, np.ndarray], T_new: int) -> dict[str, np.ndarray]:
        out = {}
        for k, v in buf.items():
            grown = np.zeros((T_new,) + v.shape[1:], dtype=v.dtype)
            grown[: v.shape[0]] = v
            out[k] = grown
        return out

    def _numpy_actor(self, explore: bool, random_actions: bool) -> Callable[[np.ndarray], Any] | None:
        """`_act` computed in NumPy, for this sample() call: the module's NumPy forward pass
        (RLModule.numpy_inference_fn) and the exploration's NumPy form of its action choice. None
        when either has none; the returned function returns None for a step it cannot take (e.g.
        in a random-action phase), which then acts through torch."""
        if random_actions or self._stateful or self._compiled_acting is not None:
            return None  # (a compiling runner acts through its compiled torch module)
        module, exploration = self.module, self.exploration
        # Rebuilt when the module's parameters move or are replaced: its NumPy views would be stale.
        # (The views keep the old storage alive, so a new tensor cannot reuse one of these addresses.)
        storage = tuple(p.data_ptr() for p in module.parameters())
        cached = self._numpy_actor_cache
        if cached is not None and cached[0] is module and cached[1] is exploration and cached[2] == explore \
                and cached[3] == storage:
            return cached[4]
        act = self._build_numpy_actor(module, exploration, explore)
        self._numpy_actor_cache = (module, exploration, explore, storage, act)
        return act

    def _build_numpy_actor(self, module: Any, exploration: Any, explore: bool) -> Callable[[np.ndarray], Any] | None:
        forward = module.numpy_inference_fn()
        if forward is None:
            return None
        choose = exploration.numpy_action_fn(self._dist_cls if explore else self._inference_dist_cls, explore)
        if choose is None:
            return None

        def act(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
            inputs = forward(obs)
            out = choose(inputs, self.num_env_steps_sampled_lifetime)
            return None if out is None else (out[0], out[1], inputs)

        return act

    def _act(self, obs: np.ndarray, explore: bool, random_actions: bool,
             numpy_actor: Callable[[np.ndarray], Any] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Actions, their log-probabilities and the distribution inputs for a batch of observations.

        The module's output goes through the Exploration object, which decides (from
        `explore` and the global sampled timestep) how to turn it into actions. With a
        `numpy_actor` (see _numpy_actor) that can take this step, no torch op runs.
        """
        if numpy_actor is not None:
            out = numpy_actor(obs)
            if out is not None:
                return out
        batch = {Columns.OBS: torch.from_numpy(obs)}
        if self._stateful:  # one time step: [B, 1, ...] and the state of each sub-env
            batch = {Columns.OBS: batch[Columns.OBS][:, None],
                     Columns.STATE_IN: {k: torch.from_numpy(v) for k, v in self._state.items()}}
        out = acting_forward(self._compiled_acting, self.module, explore)(batch)
        if self._stateful:
            out = without_time_axis(out)
            self._next_state = {k: np.asarray(v.detach().numpy() if hasattr(v, "detach") else v, np.float32)
                                for k, v in out.pop(Columns.STATE_OUT).items()}
        if Columns.ACTIONS in out:
            return module_chosen_actions(out, obs.shape[0])
        dist_inputs = out[Columns.ACTION_DIST_INPUTS]
        if random_actions:
            acts = self.actions.sample_module_actions(obs.shape[0])
            return acts, np.zeros(obs.shape[0], np.float32), dist_inputs.numpy()
        dist = (self._dist_cls if explore else self._inference_dist_cls).from_logits(dist_inputs)
        actions, logp = self.exploration.get_exploration_action(
            action_distribution=dist, timestep=self.num_env_steps_sampled_lifetime, explore=explore
        )
        return actions.numpy(), logp.numpy(), dist_inputs.numpy()

    @torch.no_grad()
    def _run(
        self,
        steps_per_env: int | None,
        num_episodes: int | None,
        explore: bool,
        random_actions: bool,
        complete: bool,
    ) -> dict[str, np.ndarray]:
        B = self.num_envs
        envs = self.env.envs
        T_cap = steps_per_env if steps_per_env is not None else 256
        buf = self._alloc(T_cap)
        dist_buf: np.ndarray | None = None
        direct = type(self.preprocessor) is NoPreprocessor
        obs_shape = self._obs_shape
        obs_dtype = getattr(self.observation_space, "dtype", None)
        check_info = not self.config.disable_env_checking
        check_finite = self._float_obs
        reward_types, ndarray, isfinite = _REWARD_TYPES, np.ndarray, math.isfinite
        identity_filter = self.filter.is_identity
        raw = self._raw_obs
        active = list(range(B if num_episodes is None else min(B, num_episodes)))
        episodes_started = len(active) if num_episodes is not None else 0
        episodes_done = 0
        track = self._track_episodes
        remote_envs = self.config.sub_envs_in_processes
        row_episodes: list[list[Any]] | None = [] if self._on_postprocess_trajectory is not None else None
        numpy_actor = self._numpy_actor(explore, random_actions)
        # remote_env_batch_wait_ms > 0: each row acts only for the sub-envs whose steps arrived
        # (rlx.env.partial_steps); `target` is the steps to collect, `collected` those collected.
        partial = self._partial_stepper() if remote_envs else None
        target = None if steps_per_env is None else steps_per_env * B
        collected = 0
        t = 0
        while True:
            if t >= T_cap:
                T_cap *= 2
                buf = self._grow(buf, T_cap)
                if dist_buf is not None:
                    grown = np.zeros((T_cap,) + dist_buf.shape[1:], dtype=np.float32)
                    grown[: dist_buf.shape[0]] = dist_buf
                    dist_buf = grown
            obs_t = buf[Columns.OBS][t]
            sending = active if partial is None else \
                self._partial_to_send(partial, active, num_episodes, target, collected, complete)
            if identity_filter:
                obs_t[:] = raw
            else:
                if len(sending):
                    self.filter.update(raw[sending])
                obs_t[:] = self.filter.apply_batch(raw, update=False)
            if self._stateful:
                for k, v in self._state.items():
                    buf[state_column(k)][t] = v
            actions, logp, dist_inputs = self._act(obs_t, explore, random_actions, numpy_actor)
            if dist_buf is None:
                dist_buf = np.zeros((T_cap, B) + dist_inputs.shape[1:], dtype=np.float32)
            dist_buf[t] = dist_inputs
            self._rows_done = (buf, dist_buf, t, row_episodes)  # rows an env error keeps (_with_partial_fragment)
            buf[Columns.ACTIONS][t] = actions
            buf[Columns.ACTION_LOGP][t] = logp
            env_actions = self.actions.to_env(actions)
            rew_t = buf[Columns.REWARDS][t]
            term_t = buf[Columns.TERMINATEDS][t]
            trunc_t = buf[Columns.TRUNCATEDS][t]
            next_t = buf[Columns.NEXT_OBS][t]
            valid_t = buf[Columns.VALID][t]
            finished = []
            if row_episodes is not None:
                row_episodes.append(list(self._episodes))
            dropped = []
            stepped = []  # (i, obs, reward, info, terminated, truncated) for the episode callbacks
            if partial is not None:
                partial.send(envs, sending, env_actions, t, self._next_state if self._stateful else None)
                sending = partial.poll(envs)  # the sub-envs whose steps arrived, written in this row
                partial.land(sending, t, buf, dist_buf, [state_column(k) for k in self._initial_state], env_actions)
            elif remote_envs:
                for i in active:  # every sub-env process steps at once
                    envs[i].step_async(env_actions[i])
            for i in sending:
                try:
                    obs, r, te, tr, info = envs[i].step_wait() if remote_envs else envs[i].step(env_actions[i])
                except Exception as err:
                    self._fail_sub_env(i, err)
                    self._drop_row(buf, t, i, finished, dropped)
                    continue
                if (direct and type(r) in reward_types and type(obs) is ndarray and obs.dtype is obs_dtype
                        and obs.shape == obs_shape and (type(info) is dict or not check_info)):
                    rew_t[i] = r
                    next_t[i] = obs
                else:
                    try:
                        r, next_t[i] = self._checked_step(i, r, obs, info)
                    except EnvOutputError as err:
                        self._fail_sub_env(i, err)
                        self._drop_row(buf, t, i, finished, dropped)
                        continue
                    rew_t[i] = r
                if te or tr:
                    term_t[i] = te
                    trunc_t[i] = tr
                    finished.append(i)
                if track:
                    stepped.append((i, obs, float(r), info, bool(te), bool(tr)))
            # NaN/inf rewards and observations of all sub-envs at once, by sums of squares as in
            # all_finite(); the exact test runs only when one is not finite.
            if not isfinite(rew_t.dot(rew_t)) or (check_finite and not isfinite(np.vdot(next_t, next_t))):
                self._drop_nonfinite_rows(buf, t, finished, dropped)
            if track:
                for i, obs, r, info, te, tr in stepped:
                    if i not in dropped:
                        self._step_episode(i, obs, env_actions[i], r, info, te, tr)
            # Bookkeeping on whole rows (slices when every env stepped, as in truncate mode).
            rows = slice(None) if len(sending) == B else sending
            raw[rows] = next_t[rows]
            valid_t[rows] = True
            self._ep_return[rows] += rew_t[rows]
            self._ep_len[rows] += 1
            self._at_boundary[rows] = False
            for i in finished:
                if track:
                    self._new_episode(i)
                obs, info = self._reset_sub_env(i)
                if direct and type(obs) is ndarray and obs.dtype is obs_dtype and obs.shape == obs_shape:
                    raw[i] = obs
                else:
                    self._write_obs(obs, raw, i)
                if track:
                    self._start_episode(i, obs, info)
            if self._stateful:
                next_state = self._next_state if partial is None else partial.sent_state
                for k in self._state:
                    self._state[k][sending] = next_state[k][sending]
                if finished:
                    self._reset_state(finished)
            if finished and check_finite and not isfinite(np.vdot(raw, raw)):
                self._check_reset_obs(finished)
            if not identity_filter:
                next_t[:] = self.filter.apply_batch(next_t, update=False)
            n_active = len(sending)
            self.num_env_steps_sampled_lifetime += n_active
            collected += n_active
            t += 1
            if finished:
                for i in finished:
                    if i not in dropped:
                        self._log_episode(float(self._ep_return[i]), int(self._ep_len[i]))
                self._ep_return[finished] = 0.0
                self._ep_len[finished] = 0
                self._at_boundary[finished] = True
                episodes_done += len(finished)
            # Decide which envs keep stepping.
            if num_episodes is not None:
                if finished:
                    keep = []
                    for i in active:
                        if i in finished:
                            if episodes_started < num_episodes:
                                episodes_started += 1
                                keep.append(i)
                        else:
                            keep.append(i)
                    active = keep
                if episodes_done >= num_episodes or not active:
                    break
            elif partial is not None:
                if not partial.num_in_flight and \
                        not self._partial_to_send(partial, active, num_episodes, target, collected, complete):
                    break
            elif t >= steps_per_env:
                if not complete:
                    break
                active = [i for i in active if not self._at_boundary[i]]
                if not active:
                    break
        batch = {k: v[:t] for k, v in buf.items()}
        batch[Columns.ACTION_DIST_INPUTS] = dist_buf[:t]
        if partial is not None:
            if partial.drop_in_flight(envs):  # num_episodes reached: the other episodes are cut
                self._needs_reset = True
            batch, row_episodes = compact_columns(batch, row_episodes)
        if num_episodes is None and not complete and (partial is None or batch[Columns.VALID].all()):
            del batch[Columns.VALID]
        self._clip_rewards(batch[Columns.REWARDS])
        if row_episodes is not None:
            self._postprocess_trajectories(batch, row_episodes)
        return batch

    def _with_partial_fragment(self, err: EnvError, complete: bool) -> EnvError:
        """`err` with the rows this sample() call finished before it (rlx.env.partial_fragment):
        the runner is replaced, its rows are not. (Not with remote_env_batch_wait_ms, whose rows
        may still wait for steps in flight.)"""
        rows, self._rows_done = self._rows_done, None
        if rows is None or self.config.remote_env_batch_wait_ms:
            return err
        buf, dist_buf, t, row_episodes = rows
        try:
            if t < len(buf[Columns.REWARDS]) and self._keep_failed_row(buf, t, complete):
                t += 1
            if t == 0:
                return err
            batch = {k: v[:t] for k, v in buf.items()}
            batch[Columns.ACTION_DIST_INPUTS] = dist_buf[:t]
            if not complete and batch[Columns.VALID].all():
                del batch[Columns.VALID]
            self._clip_rewards(batch[Columns.REWARDS])
            if row_episodes is not None:
                self._postprocess_trajectories(batch, row_episodes[:t])
            cut_time_major(batch, complete)
            steps = int(batch[Columns.VALID].sum()) if Columns.VALID in batch else int(batch[Columns.REWARDS].size)
            return attach_partial_fragment(err, self, batch, steps)
        except Exception as salvage_err:  # never hide the env's error behind this one
            logger.warning("The rows sampled before the env error could not be kept (%s: %s).",
                           type(salvage_err).__name__, salvage_err)
            return err

    def _keep_failed_row(self, buf: dict[str, np.ndarray], t: int, complete: bool) -> bool:
        """Mark valid the steps of row t (the one an env error interrupted) that the sub-envs took
        before the error, with finite values, and filter their new observations as the row's end
        would have; whether any is kept. The row's `valid` entries are already set when every
        sub-env had stepped (a reset failed); else the sub-envs before the failed one stepped
        (all sub-envs step in order in truncate mode)."""
        valid = buf[Columns.VALID][t]
        failed = self._failed_sub_env
        if not valid.any() and failed is not None and not complete:
            valid[:failed] = True
        rewards, next_obs = buf[Columns.REWARDS][t], buf[Columns.NEXT_OBS][t]
        valid &= np.isfinite(rewards) & np.isfinite(next_obs.reshape(len(next_obs), -1)).all(axis=1)
        if valid.any() and not self.filter.is_identity:
            next_obs[valid] = self.filter.apply_batch(next_obs[valid], update=False)
        return bool(valid.any())

    def _partial_stepper(self) -> PartialSteps | None:
        """The runner's PartialSteps when remote_env_batch_wait_ms > 0 (None: every row waits for
        every sub-env)."""
        wait_ms = self.config.remote_env_batch_wait_ms
        if not wait_ms:
            return None
        partial = getattr(self, "_partial_steps", None)
        if partial is None or len(partial.sent_row) != self.num_envs:
            partial = self._partial_steps = PartialSteps(self.num_envs, wait_ms, self._initial_state)
        return partial

    def _partial_to_send(self, partial: PartialSteps, active: list[int], num_episodes: int | None,
                         target: int | None, collected: int, complete: bool) -> list[int]:
        """The sub-envs to send an action this row when stepping partially: the free ones among
        `active`, as many as the steps still to collect; past that, in complete_episodes mode,
        those whose episodes have not ended."""
        free = partial.free(active)
        if num_episodes is not None:
            return free
        budget = target - collected - partial.num_in_flight
        if budget > 0:
            return free[:budget]
        if complete:
            return [i for i in free if not self._at_boundary[i]]
        return []

    def _postprocess_trajectories(self, batch: dict[str, np.ndarray], row_episodes: list[list[Any]]) -> None:
        """Call on_postprocess_trajectory once per (sub-env, episode) stretch of the batch.

        The callback gets each stretch as a SampleBatch (the batch's columns plus dones, eps_id,
        env_id, and the steps' infos and t), and a copy of it as sampled in `original_batches`;
        whatever it changes (in place or by assigning a column) is written back into the
        time-major batch the Learner sees.
        """
        from rlx.policy.sample_batch import SampleBatch

        valid = batch.get(Columns.VALID)
        T = batch[Columns.REWARDS].shape[0]
        policies = self.policy_map
        for b in range(self.num_envs):
            t = 0
            while t < T:
                episode = row_episodes[t][b]
                end = t + 1
                while end < T and row_episodes[end][b] is episode:
                    end += 1
                rows = slice(t, end)
                if valid is not None and not valid[rows, b].any():
                    t = end
                    continue
                segment = SampleBatch({k: v[rows, b] for k, v in batch.items()})
                segment["dones"] = segment[Columns.TERMINATEDS] | segment[Columns.TRUNCATEDS]
                segment["eps_id"] = np.full(end - t, hash(episode.id_) if episode is not None else -1, np.int64)
                segment["env_id"] = np.full(end - t, b, np.int64)
                if episode is not None and episode.t >= end - t:
                    # The stretch is the episode's latest steps: their infos and step indices.
                    n = end - t
                    infos = np.empty(n, dtype=object)
                    infos[:] = episode.get_infos()[-n:]
                    segment["infos"] = infos
                    segment["t"] = np.arange(episode.t - n, episode.t, dtype=np.int64)
                views = dict(segment)
                # The pre-batch keeps the data as sampled, whatever the callback changes in place.
                original = {"default_policy": (policies["default_policy"], segment.copy())}
                self._on_postprocess_trajectory(
                    worker=self, episode=episode, agent_id=0, policy_id="default_policy", policies=policies,
                    postprocessed_batch=segment, original_batches=original, env_runner=self,
                    metrics_logger=self.metrics,
                )
                write_back_postprocessed(batch, segment, views, (rows, b))
                t = end

    def _clip_rewards(self, rewards: np.ndarray) -> None:
        clip = self.config.clip_rewards
        clip_rewards(rewards, self.is_atari if clip is None else clip)

    # ------------------------------------------------------------------ metrics and state

    def get_metrics(self) -> dict[str, Any]:
        """Everything logged since the last call, as a nested dict of Stats; resets the logger.

        Holds the episode statistics (episode_return_mean/min/max, episode_len_*, num_episodes,
        hist_stats), num_env_steps_sampled, episode custom_metrics and whatever callbacks logged
        into `metrics_logger`. Merge several runners' dicts with
        `MetricsLogger.merge_and_log_n_dicts`.
        """
        out = self.metrics.reduce(return_stats_objects=True)
        self.metrics.reset()
        return out

    def get_weights(self, policies: list[str] | None = None) -> dict[str, np.ndarray]:
        """Module weights as NumPy arrays."""
        return self.module.get_state()

    def set_weights(self, weights: dict[str, Any], global_vars: dict | None = None,
                    weights_seq_no: int | None = None) -> None:
        """Load module weights (and remember their version, `weights_seq_no`, when given).

        `global_vars={"timestep": T}` sets the env-step count exploration schedules follow to
        the whole group's, so a remote runner decays epsilon as the driver counts.
        """
        self.module.set_state(weights)
        if weights_seq_no is not None:
            self.weights_seq_no = int(weights_seq_no)
        if global_vars and "timestep" in global_vars:
            self.num_env_steps_sampled_lifetime = int(global_vars["timestep"])

    def get_state(self) -> dict[str, Any]:
        """Serializable runner state: observation filter, sampling counters and exploration state."""
        return {
            "filter": self.filter.get_state(),
            "num_env_steps_sampled_lifetime": int(self.num_env_steps_sampled_lifetime),
            "exploration": self.exploration.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore from get_state()."""
        self.filter.set_state(state["filter"])
        self.num_env_steps_sampled_lifetime = int(state.get("num_env_steps_sampled_lifetime", 0))
        if "exploration" in state:
            self.exploration.set_state(state["exploration"])

    def foreach_env(self, func: Callable[[Any], Any]) -> list[Any]:
        """Apply `func` to every sub-environment (none on a runner that has not built its envs)."""
        return self._env.foreach_env(func) if self._env is not None else []

    def foreach_env_with_context(self, func: Callable[[Any, EnvContext], Any]) -> list[Any]:
        """Apply `func(env, env_context)` to every sub-environment."""
        if self._env is None:
            return []
        return [func(env, self._env_context(i)) for i, env in enumerate(self._env.envs)]

    def start_video_recording(self, video_dir: str) -> None:
        """Record episode videos of sub-env 0 into `video_dir` (render_env=True, old `monitor`).

        Sub-env 0 gets gymnasium's RecordVideo wrapper with its capped-cubic schedule
        (episodes 0, 1, 8, 27, ..., 1000, 2000, ...). A Gymnasium id is re-created with
        render_mode='rgb_array'; any other env must already have that render mode.
        """
        from rlx.env.video import RGB_ARRAY, check_rgb_array_env, gymnasium_id, make_gymnasium_env, \
            record_videos, require_moviepy

        require_moviepy("render_env=True")
        env = self.env.envs[0]
        env_id = gymnasium_id(self.config.env)
        if env_id is not None and getattr(env, "render_mode", None) != RGB_ARRAY:
            new_env = make_gymnasium_env(env_id, self._env_context(0), RGB_ARRAY)
            env.close()
            env = new_env
        else:
            check_rgb_array_env(env, "render_env=True", "Create your env with render_mode='rgb_array', e.g. from "
                                "a 'render_mode' key of env_config: config.environment(env_config="
                                "{'render_mode': 'rgb_array'}), or turn render_env off.")
        self.env.envs[0] = record_videos(env, video_dir)
        # Sampling starts with a (seeded) reset of every sub-env, which also starts the first video.
        self._needs_reset = True

    # ------------------------------------------------------------------ old API

    def get_policy(self, policy_id: str = "default_policy") -> Any:
        """The Policy view of this runner's module (old API)."""
        if policy_id != "default_policy":
            raise KeyError(f"Unknown policy '{policy_id}'; this single-agent runner has only 'default_policy'.")
        if self._policy_view is None:
            from rlx.policy.policy import Policy

            self._policy_view = Policy.from_env_runner(self)
        return self._policy_view

    @property
    def policy_map(self) -> dict[str, Any]:
        """{'default_policy': Policy} (old API)."""
        return {"default_policy": self.get_policy()}

    @property
    def preprocessors(self) -> dict[str, Preprocessor]:
        """{'default_policy': preprocessor} (old API)."""
        return {"default_policy": self.preprocessor}

    @property
    def filters(self) -> dict[str, Any]:
        """{'default_policy': observation filter} (old API)."""
        return {"default_policy": self.filter}

    def stop(self) -> None:
        """Close the envs."""
        from rlx.evaluation.rollout_worker import _unregister_runner

        _unregister_runner(self)
        if self._env is not None:
            self._env.close()


EnvRunner = SingleAgentEnvRunner


@dataclasses.dataclass(frozen=True)
class EnvInfo:
    """The spaces and layout of a runner's envs, for a runner that has none of its own."""

    observation_space: gym.Space
    action_space: gym.Space
    num_envs: int
    is_atari: bool
    #: The env's own spaces when custom connectors change what the module sees.
    env_spaces: tuple | None = None


def state_column(name: str) -> str:
    """The batch column holding a recurrent module's state component `name` before each step."""
    return f"{Columns.STATE_IN}/{name}"


def without_time_axis(out: dict[str, Any]) -> dict[str, Any]:
    """A recurrent module's one-step outputs with the time axis ([B, 1, ...] -> [B, ...]) removed."""
    return {k: (v[:, 0] if k != Columns.STATE_OUT and hasattr(v, "shape") and len(v.shape) >= 2 and v.shape[1] == 1
                else v) for k, v in out.items()}


#: Columns an on_postprocess_trajectory callback may add to a trajectory for the Learner to use.
_POSTPROCESSED_COLUMNS = (Columns.ADVANTAGES, Columns.VALUE_TARGETS)


def write_back_postprocessed(batch: dict[str, np.ndarray], segment: Any, views: dict[str, Any], index: tuple) -> None:
    """Write what an on_postprocess_trajectory callback changed in `segment` (columns it
    reassigned, or changed in place through `views`) into `batch[key][index]`. Columns it added
    for the Learner (advantages, value targets) are kept too, NaN in the rows of stretches that
    got none."""
    for key, column in segment.items():
        if key in batch and column is not views.get(key):
            batch[key][index] = column
        elif key in _POSTPROCESSED_COLUMNS and key not in views:
            if key not in batch:
                batch[key] = np.full(batch[Columns.REWARDS].shape + np.shape(column)[1:], np.nan, np.float32)
            batch[key][index] = column


def module_chosen_actions(out: dict[str, Any], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def log_episode_extras(metrics: MetricsLogger, episode: Any, window: int) -> None:
    """Queue a finished episode's custom_metrics and hist_data for the results."""
    for key, value in episode.custom_metrics.items():
        metrics.log_value(("custom_metrics", str(key)), value, reduce=None, window=window)
    for key, values in episode.hist_data.items():
        for value in values if isinstance(values, (list, tuple, np.ndarray)) else [values]:
            metrics.log_value(("hist_stats", str(key)), value, reduce=None, window=window)


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


class MultiAgentEnvFoundError(EnvError):
    """A SingleAgentEnvRunner was given a MultiAgentEnv (the Algorithm then builds MultiAgentEnvRunners)."""


def _is_multi_agent_env(env: Any) -> bool:
    from rlx.env.multi_agent_env import MultiAgentEnv

    return isinstance(env, MultiAgentEnv)


def all_finite(array: np.ndarray) -> bool:
    """Whether every entry of a contiguous float array is finite (no NaN, no inf)."""
    # The sum of squares (one BLAS dot) is NaN or inf whenever an entry is, at about a third of
    # the cost of np.isfinite(array).all(); only when it overflows (entries beyond ~1e19) does
    # the exact test decide.
    return math.isfinite(np.vdot(array, array)) or bool(np.isfinite(array).all())


def _restart_hint(where: str) -> str:
    # A failed step can restart its sub-env; a failed reset() cannot.
    return "" if where.startswith("from reset") else _RESTART_HINT


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


def episode_step_limit(env: Any) -> int | None:
    """The env's episode time limit (Gymnasium's max_episode_steps or a TimeLimit wrapper), if any."""
    limit = getattr(getattr(env, "spec", None), "max_episode_steps", None)
    node = env
    while limit is None and node is not None:
        if isinstance(node, gym.wrappers.TimeLimit):
            limit = node._max_episode_steps
        node = node.env if isinstance(node, gym.Wrapper) else None
    return int(limit) if limit else None


class DeepMindAtariCreator:
    """An env creator whose raw-frame Atari envs come wrapped in DeepMind's preprocessing
    (`preprocessor_pref="deepmind"`, RLlib's default): 84x84 grayscale (the model's `dim`), 4 frames
    stacked (`framestack`), frame skip, no-op and fire resets, one life per episode. Other envs, and
    Atari envs whose frames the user's creator already wraps, come as they are. Picklable, so
    sub-env processes and remote runners wrap their envs too."""

    def __init__(self, make_env: Callable[[EnvContext], Any], model_config: dict[str, Any]):
        self.make_env = make_env
        self.dim = int(model_config.get("dim", 84))
        self.framestack = bool(model_config.get("framestack", True))

    def __call__(self, ctx: EnvContext) -> Any:
        from rlx.env.wrappers.atari_wrappers import is_atari, wrap_deepmind

        env = self.make_env(ctx)
        raw_space = getattr(getattr(env, "unwrapped", env), "observation_space", None)
        if is_atari(env) and env.observation_space.shape == getattr(raw_space, "shape", None):
            env = wrap_deepmind(env, dim=self.dim, framestack=self.framestack)
        return env


class _SubEnvFactory:
    """Builds one sub-env inside its own process (remote_worker_envs), old-API envs wrapped."""

    def __init__(self, make_env: Callable[[EnvContext], Any], ctx: EnvContext, wrap_old: bool):
        self.make_env, self.ctx, self.wrap_old = make_env, ctx, wrap_old

    def __call__(self) -> Any:
        env = self.make_env(self.ctx)
        if self.wrap_old and looks_like_old_gym_api(env):
            env = OldGymEnvCompatibility(env)
        return env
