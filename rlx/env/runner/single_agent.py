"""SingleAgentEnvRunner: the EnvRunner of single-agent Gymnasium envs, the one-agent, one-module case.

`sample()` returns a dict of NumPy arrays shaped [T, B, ...] (T steps of B sub-envs) with the
columns of `rlx.core.columns.Columns`: the one module's [T, C] column block, whose columns are
the sub-envs (rlx.env.runner.lockstep). Completed-episode statistics are kept until
`get_metrics()` collects them.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlx.core import DEFAULT_AGENT_ID, DEFAULT_POLICY_ID
from rlx.core.columns import Columns
from rlx.core.rl_module.rl_module import RLModule, RLModuleSpec
from rlx.env.config_view import EnvConfig
from rlx.env.connector_env import (
    ConnectorContext, ConnectorEnv, build_env_to_module, build_module_to_env,
    has_env_to_module_pieces)
from rlx.env.env_checker import OldGymEnvCompatibility, check_env, looks_like_old_gym_api
from rlx.env.multi_agent_env import MultiAgentEnv
from rlx.env.runner.lockstep import LockstepSampling
from rlx.env.runner.module_slot import slot_attribute
from rlx.env.runner.sub_envs import EnvInfo, MultiAgentEnvFoundError, is_atari_env
from rlx.utils.filters import FilterWithParts
from rlx.env.vector_env import VectorEnv


class SingleAgentEnvRunner(LockstepSampling):
    """Samples experience from `num_envs_per_env_runner` copies of the env with one RLModule.

    Args:
        config: the (frozen) AlgorithmConfig.
        worker_index: 0 for the local runner in the driver, 1..N for remote runners.
        num_workers: total number of remote runners.
        module_spec: the RLModuleSpec to build the module from (spaces filled from the env).
        module: an existing module to use instead (shared with the local Learner).
        env_info: the spaces and layout of the envs, for a runner that builds its envs on first
            use (or has none: env=None with the config's spaces).
    """

    def __init__(
        self,
        config: EnvConfig,
        worker_index: int = 0,
        num_workers: int = 0,
        module_spec: RLModuleSpec | None = None,
        module: RLModule | None = None,
        env_info: EnvInfo | None = None,
    ):
        built_from_config_alone = module_spec is None and module is None and env_info is None  # (RLlib's form)
        # Spaces only (env=None with observation_space/action_space: an external application's
        # steps arrive through a PolicyServerInput): creating a sub-env explains what is missing.
        self._setup(config, worker_index, num_workers, external_env=env_info is not None)
        self._env: VectorEnv | None = None
        self._wrap_old = False  # whether the sub-envs speak the old gym API (wrapped for gymnasium's)
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
        #: The module's acting path (preprocessor, filter, action adapter, exploration).
        self.slot = self._new_slot("default_policy", config, self.observation_space, self.action_space)
        if self._connectors is not None and self._connectors.env_to_module is not None:
            self.slot.filter = FilterWithParts(self.slot.filter, env_to_module=self._connectors.env_to_module)
        self._slots["default_policy"] = self.slot
        if module is None:
            module = self._build_module(self._spec_or_config_spec(module_spec), self.slot, self.action_space)
        self.slot.attach(module, self._seed, num_workers, worker_index)
        if self._connectors is not None:
            self._connectors.rl_module = self.module
            self._connectors.metrics = self.metrics
        # Recurrent modules: one state row per sub-env, reset at each episode's start.
        self._initial_state = self.slot.initial_state
        self._stateful = self.slot.stateful
        self._obs_shape = self.preprocessor.shape
        self._float_obs = self.slot.float_obs
        self._alloc_episode_state()
        self.returns_episodes = self._episodes_by_default(built_from_config_alone)
        self._registered()
        if self._env is not None:
            self._fire_environment_created()

    # ------------------------------------------------------------------ envs

    def _build_envs(self) -> VectorEnv:
        self._env = env = VectorEnv(self._create_envs())
        self.num_envs = env.num_envs
        return env

    @property
    def env(self) -> VectorEnv:
        """The sub-environments (a VectorEnv), built on first use when the runner started without them."""
        env = self._env
        if env is None:
            env = self._build_envs()
            self._alloc_episode_state()
            self._fire_environment_created()
        return env

    @property
    def sub_envs(self) -> list[Any]:
        """The list of sub-environments (built on first use)."""
        return self.env.envs

    @property
    def has_envs(self) -> bool:
        """Whether this runner has built its sub-environments."""
        return self._env is not None

    def env_info(self) -> EnvInfo:
        """What a runner without envs of its own needs to know about this runner's envs."""
        env = self.env
        env_spaces = None
        if isinstance(env.envs[0], ConnectorEnv):
            env_spaces = (env.envs[0].env.observation_space, env.envs[0].env.action_space)
        return EnvInfo(env.observation_space, env.action_space, self.num_envs,
                       self.is_atari if hasattr(self, "is_atari") else is_atari_env(env.envs[0]),
                       env_spaces)

    def _check_first_env(self, env: Any) -> Any:
        """The first sub-env: no MultiAgentEnv, checked (unless disable_env_checking) and wrapped
        when it speaks the old gym API (auto_wrap_old_gym_envs)."""
        cfg = self.config
        if isinstance(env, MultiAgentEnv):
            env.close()
            raise MultiAgentEnvFoundError(
                f"Env {self.env_name!r} is a MultiAgentEnv ({type(env).__name__}), which {type(self).__name__} "
                "cannot step. Leave env_runner_cls unset: Algorithms sample MultiAgentEnvs with "
                "MultiAgentEnvRunner.")
        if not cfg.disable_env_checking:
            env = check_env(env, cfg.auto_wrap_old_gym_envs, seed=self._seed)
            self._wrap_old = isinstance(env, OldGymEnvCompatibility)
            return env
        self._wrap_old = cfg.auto_wrap_old_gym_envs and looks_like_old_gym_api(env)
        return OldGymEnvCompatibility(env) if self._wrap_old else env

    def _adapt_env(self, env: Any) -> Any:
        """Another sub-env, wrapped for the old gym API as the first one was."""
        return OldGymEnvCompatibility(env) if self._wrap_old else env

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

    # ------------------------------------------------------------------ the module's acting path (self.slot)

    module: RLModule = slot_attribute("module", "The RLModule this runner acts with (shared with the local Learner).")
    filter: Any = slot_attribute(
        "filter", "The observation filter (with the env-to-module connectors' state when they keep any).")
    exploration: Any = slot_attribute("exploration", "The Exploration that turns the module's outputs into actions.")
    module_observation_space: gym.Space = slot_attribute(
        "module_observation_space", "The observation space the module sees (after preprocessing).")
    module_action_space: gym.Space = slot_attribute(
        "module_action_space", "The action space the module acts in: [-1, 1] boxes when actions are normalized.")

    def get_weights(self, policies: list[str] | None = None) -> dict[str, np.ndarray]:
        """Module weights as NumPy arrays."""
        return self.module.get_state()

    def _load_weights(self, weights: dict[str, Any]) -> None:
        self.module.set_state(weights)

    def _step_counts(self, batch: dict[str, np.ndarray]) -> dict[str, int]:
        valid = batch.get(Columns.VALID)
        return {"num_env_steps_sampled": int(valid.sum()) if valid is not None else int(batch[Columns.REWARDS].size)}

    def _agent_step_counts(self, batch: dict[str, np.ndarray], env_steps: int) -> dict[Any, int]:
        """One agent (DEFAULT_AGENT_ID) took every env step."""
        return {DEFAULT_AGENT_ID: env_steps}

    def _module_step_counts(self, batch: dict[str, np.ndarray], env_steps: int) -> dict[str, int]:
        """One module (default_policy) acted at every env step."""
        return {DEFAULT_POLICY_ID: env_steps}
