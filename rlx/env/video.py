"""Envs that render: to a window (`rlx evaluate --render`) or into mp4 episode videos
(`rlx evaluate --video-dir`, and `render_env=True` while training).

Videos are written by gymnasium's RecordVideo wrapper, which needs moviepy. A Gymnasium id
is created with the render mode asked for; a custom env must have been built with it.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from rlx.env.config_view import EnvConfig
from rlx.env.env_checker import OldGymEnvCompatibility, check_env, looks_like_old_gym_api
from rlx.env.env_context import EnvContext
from rlx.env.multi_agent_env import MultiAgentEnv
from rlx.env.multi_agent_env_checker import check_multi_agent_env
from rlx.utils.errors import ConfigError, EnvError, install_hint
from rlx.utils.registry import _gym_creator, get_registered_creator, make_env_creator

#: File names of the videos start with this: rl-video-episode-0.mp4, ...
VIDEO_NAME_PREFIX = "rl-video"

RGB_ARRAY = "rgb_array"
HUMAN = "human"


def require_moviepy(feature: str) -> None:
    """Raise ConfigError naming `feature` when moviepy, which RecordVideo needs, cannot be imported.

    Imported here, when a video is asked for, so that a missing (or blocked) moviepy is
    reported up front with the fix instead of deep inside gymnasium.
    """
    try:
        import moviepy  # noqa: F401
    except ImportError as err:
        raise ConfigError(
            f"{feature} records videos with gymnasium's RecordVideo, which needs moviepy: "
            + install_hint("video")
        ) from err


def gymnasium_id(env_spec: Any) -> str | None:
    """The Gymnasium id `env_spec` resolves to, or None for other envs (registered names,
    import paths, classes, creators), which rlx cannot re-create with a render mode."""
    import gymnasium as gym

    if not isinstance(env_spec, str) or get_registered_creator(env_spec) is not None:
        return None
    if env_spec in gym.registry:
        return env_spec
    try:
        _, resolved = make_env_creator(env_spec)
    except EnvError:
        return None
    return resolved if resolved in gym.registry else None


def make_gymnasium_env(env_id: str, env_context: EnvContext, render_mode: str) -> Any:
    """`gymnasium.make(env_id, render_mode=render_mode, **env_config)`, checking the mode took."""
    # pygame (Gymnasium's renderer) greets on stdout at import; keep the command's output clean.
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    ctx = env_context.copy_with_overrides(env_config={**env_context, "render_mode": render_mode})
    env = _gym_creator(env_id)(ctx)
    if getattr(env, "render_mode", None) != render_mode:
        modes = env.metadata.get("render_modes", [])
        env.close()
        raise EnvError(f"The Gymnasium env '{env_id}' cannot render with render_mode='{render_mode}' "
                       f"(it supports: {', '.join(modes) or 'none'}).")
    return env


def check_rgb_array_env(env: Any, feature: str, fix: str) -> None:
    """Raise EnvError unless `env.render_mode` is 'rgb_array' (what RecordVideo needs).

    `fix` tells the user how to give their env that render mode in their setting.
    """
    mode = getattr(env, "render_mode", None)
    if mode != RGB_ARRAY:
        name = type(getattr(env, "unwrapped", env)).__name__
        raise EnvError(
            f"{feature} records videos from env.render(), which needs an env with render_mode='rgb_array', but "
            f"{name}.render_mode is {mode!r}. {fix}"
        )


def always(episode_id: int) -> bool:
    """Episode trigger recording every episode."""
    return True


def record_videos(env: Any, video_dir: str, episode_trigger: Callable[[int], bool] | None = None) -> Any:
    """`env` wrapped in gymnasium's RecordVideo, writing mp4s into `video_dir`.

    Without `episode_trigger`, RecordVideo's capped-cubic schedule applies: episodes 0, 1, 8,
    27, ..., 1000, 2000, ... A video is written when its episode's successor starts, or when
    the env is closed.
    """
    from gymnasium.wrappers import RecordVideo

    return RecordVideo(env, video_folder=str(video_dir), episode_trigger=episode_trigger,
                       name_prefix=VIDEO_NAME_PREFIX)


def make_env(config: EnvConfig, render_mode: str | None = None, feature: str = "") -> Any:
    """A fresh env as `config` describes it (env, env_config), checked and old-API-wrapped as
    an EnvRunner's, for acting outside an EnvRunner (rlx evaluate).

    With `render_mode`, a Gymnasium id is created with that mode; another env is created as
    usual and, for 'rgb_array', must report that mode (`feature` names what asked for it).
    """
    ctx = EnvContext(config.env_config)
    env_id = gymnasium_id(config.env) if render_mode is not None else None
    if env_id is not None and render_mode is not None:  # (env_id is only set with a render_mode)
        env = make_gymnasium_env(env_id, ctx, render_mode)
    else:
        creator, name = make_env_creator(config.env)
        try:
            env = creator(ctx)
        except EnvError:
            raise
        except Exception as err:
            raise EnvError(f"Creating env '{name}' failed: {type(err).__name__}: {err}") from err
        if render_mode == RGB_ARRAY:
            check_rgb_array_env(env, feature, "Create the env with render_mode='rgb_array', e.g. from a "
                                "'render_mode' key of env_config (--config '{\"env_config\": "
                                "{\"render_mode\": \"rgb_array\"}}').")
    if isinstance(env, MultiAgentEnv):
        if not config.disable_env_checking:
            check_multi_agent_env(env)
        return env
    if not config.disable_env_checking:
        return check_env(env, config.auto_wrap_old_gym_envs)
    if config.auto_wrap_old_gym_envs and looks_like_old_gym_api(env):
        return OldGymEnvCompatibility(env)
    return env
