"""Building, checking, restarting and reaching an EnvRunner's sub-environments.

`SubEnvs` is the part of the EnvRunner that owns the sub-envs: it creates them from the
config's env (with the env context of each, checked and wrapped as the kind of runner needs),
wraps them to run custom connectors, rebuilds one that failed
(`restart_failed_sub_environments`), fires the env-created callbacks, applies functions to
them (`foreach_env`) and records videos. What differs between a runner of single-agent
Gymnasium envs and one of MultiAgentEnvs are three hooks: `_check_first_env`, `_adapt_env`
and `_connected`.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable

import gymnasium as gym

from rlx.core import DEFAULT_AGENT_ID
from rlx.env.env_checker import OldGymEnvCompatibility, looks_like_old_gym_api
from rlx.env.env_context import EnvContext
from rlx.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv
from rlx.env.runner.current import acting_runner
from rlx.env.runner.parts import RunnerParts
from rlx.utils.errors import EnvError
from rlx.utils.registry import make_env_creator
from rlx.utils.typing import MultiAgentDict

logger = logging.getLogger("rlx")


def worker_seed(seed: int | None, worker_index: int) -> int | None:
    """The seed of EnvRunner `worker_index` for the config's `seed` (None: unseeded)."""
    return None if seed is None else int(seed) + 1000 * int(worker_index)


def is_atari_env(env: Any) -> bool:
    """Whether `env` is an Atari (ALE) game, judged by its Gymnasium id or its class's module."""
    spec = getattr(env, "spec", None)
    env_id = getattr(spec, "id", "") or ""
    if env_id.startswith("ALE/") or "NoFrameskip" in env_id or "Deterministic-v" in env_id:
        return True
    module = type(getattr(env, "unwrapped", env)).__module__
    return module.startswith(("ale_py", "gym.envs.atari", "gymnasium.envs.atari"))


def episode_step_limit(env: Any) -> int | None:
    """The env's episode time limit (Gymnasium's max_episode_steps or a TimeLimit wrapper), if any;
    for a multi-agent env made of limited single-agent envs (make_multi_agent,
    SingleAgentAsMultiAgent), the largest of theirs."""
    if isinstance(env, MultiAgentEnv):
        inner = [env.env] if isinstance(env, SingleAgentAsMultiAgent) else list(getattr(env, "envs", None) or [])
        limits = [x for x in (episode_step_limit(e) for e in inner if isinstance(e, gym.Env)) if x]
        return max(limits) if limits else None
    limit = getattr(getattr(env, "spec", None), "max_episode_steps", None)
    node = env
    while limit is None and node is not None:
        if isinstance(node, gym.wrappers.TimeLimit):
            limit = node._max_episode_steps
        node = node.env if isinstance(node, gym.Wrapper) else None
    return int(limit) if limit else None


@dataclasses.dataclass(frozen=True)
class EnvInfo:
    """The spaces and layout of a runner's envs, for a runner that has none of its own."""

    observation_space: gym.Space
    action_space: gym.Space
    num_envs: int
    is_atari: bool
    #: The env's own spaces when custom connectors change what the module sees.
    env_spaces: tuple | None = None


class MultiAgentEnvFoundError(EnvError):
    """A SingleAgentEnvRunner was given a MultiAgentEnv (the Algorithm then builds MultiAgentEnvRunners)."""


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
        """Reset the env: its observation and info under DEFAULT_AGENT_ID."""
        obs, info = self.env.reset(seed=seed, options=options)
        return {DEFAULT_AGENT_ID: obs}, {DEFAULT_AGENT_ID: info}

    def step(self, action_dict: MultiAgentDict) -> tuple[  # type: ignore[override]  # see MultiAgentEnv.step
            MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        """Step the env with DEFAULT_AGENT_ID's action."""
        obs, reward, terminated, truncated, info = self.env.step(action_dict[DEFAULT_AGENT_ID])
        a = DEFAULT_AGENT_ID
        return ({a: obs}, {a: reward}, {a: terminated, ALL_AGENTS: terminated},
                {a: truncated, ALL_AGENTS: truncated}, {a: info})

    def render(self) -> Any:
        """The env's frame."""
        return self.env.render()

    def close(self) -> None:
        """Close the env."""
        self.env.close()


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


class SubEnvFactory:
    """Builds one sub-env inside its own process (remote_worker_envs), old-API envs wrapped."""

    def __init__(self, make_env: Callable[[EnvContext], Any], ctx: EnvContext, wrap_old: bool):
        self.make_env, self.ctx, self.wrap_old = make_env, ctx, wrap_old

    def __call__(self) -> Any:
        env = self.make_env(self.ctx)
        if self.wrap_old and looks_like_old_gym_api(env):
            env = OldGymEnvCompatibility(env)
        return env


class SubEnvs(RunnerParts):
    """The sub-env side of an EnvRunner."""

    def _env_creator(self, external: bool) -> tuple[Callable[[EnvContext], Any], str]:
        """(creator, name) of the config's env. With no env and `external` (an external
        application reports the episodes), a creator that explains what is missing when called."""
        if self.config.env is None and external:
            return (lambda ctx: make_env_creator(None)[0](ctx)), "<external env>"
        make_env, name = make_env_creator(self.config.env)
        if self.config.preprocessor_pref == "deepmind" and not self.config._disable_preprocessor_api:
            make_env = DeepMindAtariCreator(make_env, self.config.model)
        return make_env, name

    def _env_context(self, vector_index: int) -> EnvContext:
        return EnvContext(self.config.env_config, worker_index=self.worker_index, vector_index=vector_index,
                          remote=self.worker_index > 0, num_workers=self.num_workers)

    def _sub_env_label(self, i: int) -> str:
        return f"Sub-env {i} of EnvRunner {self.worker_index} (env {self.env_name!r})"

    def _create_envs(self) -> list[Any]:
        """`num_envs_per_env_runner` sub-envs (as the config resolves it from the first one's time
        limit), the first one checked, each wrapped to run the custom connectors."""
        cfg = self.config
        envs: list[Any] = []
        count = int(cfg.num_envs_per_env_runner)
        i = 0
        while i < count:
            env = self._build_env(i)
            if i == 0:
                count = cfg.resolve_num_envs_per_env_runner(episode_step_limit(env))
                env = self._check_first_env(env)
            else:
                env = self._adapt_env(env)
            envs.append(env)
            i += 1
        return [self._connected(env, i) for i, env in enumerate(envs)]

    def _build_env(self, i: int) -> Any:
        """Sub-env `i`: built here, or with remote_worker_envs in a process of its own."""
        ctx = self._env_context(i)
        if self.config.sub_envs_in_processes:
            from rlx.env.remote_sub_env import RemoteSubEnv

            return RemoteSubEnv(SubEnvFactory(self._make_env, ctx, self.config.auto_wrap_old_gym_envs),
                                name=f"{self.worker_index}/{i}")
        try:
            env = self._make_env(ctx)
        except EnvError:
            raise
        except Exception as err:
            raise EnvError(
                f"Creating env '{self.env_name}' (worker_index={self.worker_index}, vector_index={i}) "
                f"failed: {type(err).__name__}: {err}"
            ) from err
        return self._as_runner_env(env)

    def _as_runner_env(self, env: Any) -> Any:
        """A freshly created env in the form this runner steps (hook; as it is by default)."""
        return env

    def _check_first_env(self, env: Any) -> Any:
        """The first sub-env, checked (hook; unchecked by default)."""
        return env

    def _adapt_env(self, env: Any) -> Any:
        """Any sub-env but the first, wrapped as the first one was (hook; as it is by default)."""
        return env

    def _connected(self, env: Any, i: int) -> Any:
        """Sub-env `env`, wrapped to run the custom connectors when the config has any (hook)."""
        return env

    def _restart_sub_env(self, i: int, err: BaseException) -> None:
        """Replace sub-env `i`, whose step() raised or returned what rlx cannot use, by a new one
        (restart_failed_sub_environments). The caller drops its episode."""
        logger.warning("Sub-env %d of EnvRunner %d failed (%s: %s); restarting it and dropping its episode.",
                       i, self.worker_index, type(err).__name__, err)
        envs = self.sub_envs
        try:
            envs[i].close()
        except Exception:  # a broken env may not close cleanly; it is discarded either way
            pass
        envs[i] = self._connected(self._adapt_env(self._build_env(i)), i)
        self.num_sub_env_restarts += 1
        # Reaches result["env_runners"]["num_sub_env_restarts"] (this iteration, all runners).
        self.metrics.log_value("num_sub_env_restarts", 1, reduce="sum", clear_on_reduce=True)

    def _fire_environment_created(self) -> None:
        """on_environment_created (and the old API's on_sub_environment_created per sub-env)."""
        cb = self._callbacks
        if not cb.has_any(("on_environment_created", "on_sub_environment_created")):
            return
        with acting_runner(self):  # get_global_worker() in these events is this runner
            if cb.has("on_environment_created"):
                cb.fire("on_environment_created", env_runner=self, metrics_logger=self.metrics, env=self.env,
                        env_context=self._env_context(0))
            if cb.has("on_sub_environment_created"):
                for i, sub_env in enumerate(self.sub_envs):
                    cb.fire("on_sub_environment_created", worker=self, sub_environment=sub_env,
                            env_context=self._env_context(i), env_index=i)

    def foreach_env(self, func: Callable[[Any], Any]) -> list[Any]:
        """Apply `func` to every sub-environment (none on a runner that has not built its envs)."""
        return [func(env) for env in self.sub_envs] if self.has_envs else []

    def foreach_env_with_context(self, func: Callable[[Any, EnvContext], Any]) -> list[Any]:
        """Apply `func(env, env_context)` to every sub-environment."""
        if not self.has_envs:
            return []
        return [func(env, self._env_context(i)) for i, env in enumerate(self.sub_envs)]

    def start_video_recording(self, video_dir: str) -> None:
        """Record episode videos of sub-env 0 into `video_dir` (render_env=True, old `monitor`).

        Sub-env 0 gets gymnasium's RecordVideo wrapper with its capped-cubic schedule
        (episodes 0, 1, 8, 27, ..., 1000, 2000, ...). A Gymnasium id is re-created with
        render_mode='rgb_array'; any other env must already have that render mode.
        """
        from rlx.env.video import RGB_ARRAY, check_rgb_array_env, gymnasium_id, make_gymnasium_env, \
            record_videos, require_moviepy

        require_moviepy("render_env=True")
        envs = self.sub_envs
        env = envs[0]
        env_id = gymnasium_id(self.config.env)
        if env_id is not None and getattr(env, "render_mode", None) != RGB_ARRAY:
            new_env = make_gymnasium_env(env_id, self._env_context(0), RGB_ARRAY)
            env.close()
            env = new_env
        else:
            check_rgb_array_env(env, "render_env=True", "Create your env with render_mode='rgb_array', e.g. from "
                                "a 'render_mode' key of env_config: config.environment(env_config="
                                "{'render_mode': 'rgb_array'}), or turn render_env off.")
        envs[0] = record_videos(env, video_dir)
        # Sampling starts with a (seeded) reset of every sub-env, which also starts the first video.
        self._needs_reset = True
