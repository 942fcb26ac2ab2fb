"""Render episodes with a callback and log the best and worst one of each sampling round as videos.

RLlib's `ray.rllib.examples.envs.env_rendering_and_recording`: the module holds
`EnvRenderCallback`, which other example scripts plug in with
`config.callbacks(EnvRenderCallback)`, and a script that trains with it:

    python -m rlx.examples.envs.env_rendering_and_recording --env CartPole-v1 --no-tune

How it works:

- `on_episode_step` renders the sub-env the episode runs in (`env.render()`, so the env
  must be made with `render_mode="rgb_array"`), shrinks the frame to 64x96, puts the
  channels first and keeps it in the episode's scratch dict (`episode.custom_data`).
- `on_episode_end` stacks an episode's frames into a video shaped
  `(1, T, 3, 64, 96)` (uint8) when its return is the best or the worst of this sampling
  round on this EnvRunner.
- `on_sample_end` logs those two videos under `episode_videos_best` and
  `episode_videos_worst` with `reduce=None`: the values are kept as they are (never
  averaged) and the list starts anew after each iteration's results are collected, so the
  results of an iteration hold `env_runners/episode_videos_best` as a list of videos (one per
  EnvRunner that finished an episode).

What happens to the videos is up to the result loggers: Tune's WandB logger uploads 5-D
arrays as videos, Tune's TensorBoard logger writes them when `moviepy` is installed and skips
them otherwise. Training does not depend on either package.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from rlx.algorithms.registry import get_algorithm_class
from rlx.callbacks.callbacks import RLlibCallback
from rlx.examples.utils import add_rllib_example_script_args, run_rllib_example_script_experiment
from rlx.utils.registry import register_env

__all__ = ["EnvRenderCallback", "render_frame", "resize_frame"]

#: Height and width the frames are shrunk to (small videos: cheap to keep and to send).
VIDEO_HEIGHT, VIDEO_WIDTH = 64, 96


def resize_frame(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """An RGB frame `[h, w, 3]` (or a grayscale `[h, w]`) resized to `[height, width, ...]`
    (bilinear with Pillow when it is installed, nearest-neighbour with NumPy otherwise),
    as uint8."""
    image = np.asarray(image)
    if image.ndim not in (2, 3):
        raise ValueError(f"Expected an image shaped [h, w] or [h, w, c], got shape {image.shape}.")
    if image.dtype != np.uint8:
        scale = 255.0 if image.size and float(np.nanmax(image)) <= 1.0 else 1.0
        image = np.clip(np.nan_to_num(image.astype(np.float64) * scale), 0, 255).astype(np.uint8)
    if image.shape[:2] == (height, width):
        return image
    try:
        from PIL import Image
    except ImportError:
        rows = (np.arange(height) * image.shape[0] // height).clip(0, image.shape[0] - 1)
        cols = (np.arange(width) * image.shape[1] // width).clip(0, image.shape[1] - 1)
        return np.ascontiguousarray(image[rows][:, cols])
    squeeze = image.ndim == 3 and image.shape[2] == 1
    pil = Image.fromarray(image[..., 0] if squeeze else image)
    out = np.asarray(pil.resize((width, height), Image.BILINEAR), dtype=np.uint8)
    return out[..., None] if squeeze else out


def render_frame(env: Any, env_index: int = 0) -> Optional[np.ndarray]:
    """The frame of the env an episode runs in.

    `env` is what a callback's `env` argument holds: a vector of sub-envs (rlx's EnvRunner
    vector, a gymnasium VectorEnv or a VectorMultiAgentEnv; sub-env `env_index` is rendered)
    or a single env. Returns None when the env renders nothing (no `render_mode`).
    """
    base = getattr(env, "unwrapped", env)
    envs = getattr(base, "envs", None)
    if isinstance(envs, (list, tuple)) and envs:
        sub = envs[env_index if 0 <= env_index < len(envs) else 0]
    else:
        sub = env
    frame = sub.render()
    if isinstance(frame, (list, tuple)):  # render_mode="rgb_array_list": the frames since the last render
        frame = frame[-1] if frame else None
    return None if frame is None else np.asarray(frame)


def _scratch(episode: Any) -> dict:
    """The episode's dict for temporary per-episode data (`custom_data`; `user_data` is the
    old name, which rlx's single-agent episodes also have)."""
    data = getattr(episode, "custom_data", None)
    return data if isinstance(data, dict) else episode.user_data


class EnvRenderCallback(RLlibCallback):
    """Records every episode's frames and logs the best and worst episode of each sampling
    round (per EnvRunner) as videos shaped `(1, T, 3, height, width)`.

    Args:
        env_runner_indices: the EnvRunners (by `worker_index`; 0 is the local one) that
            record; None records on all of them.
    """

    def __init__(self, env_runner_indices: Optional[Sequence[int]] = None):
        super().__init__()
        self._env_runner_indices = None if env_runner_indices is None else set(env_runner_indices)
        self.best_episode_and_return: tuple[Optional[np.ndarray], float] = (None, float("-inf"))
        self.worst_episode_and_return: tuple[Optional[np.ndarray], float] = (None, float("inf"))

    def _active(self, env_runner: Any) -> bool:
        return self._env_runner_indices is None or getattr(env_runner, "worker_index", 0) in self._env_runner_indices

    def on_episode_step(self, *, episode: Any, env_runner: Any = None, metrics_logger: Any = None, env: Any = None,
                        env_index: int = 0, rl_module: Any = None, **kwargs: Any) -> None:
        """Render the episode's env and keep the (shrunk, channels-first) frame in the episode."""
        if not self._active(env_runner):
            return
        frame = render_frame(env, env_index)
        if frame is None:
            return
        if frame.ndim == 2:
            frame = np.repeat(frame[..., None], 3, axis=-1)
        frame = resize_frame(frame, VIDEO_HEIGHT, VIDEO_WIDTH)
        _scratch(episode).setdefault("render_images", []).append(np.transpose(frame, (2, 0, 1)))

    def on_episode_end(self, *, episode: Any, env_runner: Any = None, metrics_logger: Any = None, env: Any = None,
                       env_index: int = 0, rl_module: Any = None, **kwargs: Any) -> None:
        """Compile the episode's video if its return is the best or worst so far this round."""
        if not self._active(env_runner):
            return
        images = _scratch(episode).pop("render_images", None)
        if not images:
            return
        episode_return = float(episode.get_return())
        best = episode_return > self.best_episode_and_return[1]
        worst = episode_return < self.worst_episode_and_return[1]
        if not (best or worst):
            return
        video = np.stack(images, axis=0)[None]  # (1, T, 3, h, w): Tune's loggers read 5-D arrays as videos
        if best:
            self.best_episode_and_return = (video, episode_return)
        if worst:
            self.worst_episode_and_return = (video, episode_return)

    def on_sample_end(self, *, env_runner: Any = None, metrics_logger: Any = None, samples: Any = None,
                      **kwargs: Any) -> None:
        """Log this round's best and worst videos (unreduced) and start a new round."""
        if metrics_logger is None:
            return
        if self.best_episode_and_return[0] is not None:
            metrics_logger.log_value("episode_videos_best", self.best_episode_and_return[0], reduce=None)
        if self.worst_episode_and_return[0] is not None:
            metrics_logger.log_value("episode_videos_worst", self.worst_episode_and_return[0], reduce=None)
        self.best_episode_and_return = (None, float("-inf"))
        self.worst_episode_and_return = (None, float("inf"))


def _env_creator(env_id: str):
    """A creator of `env_id` rendering to RGB arrays (Atari ids get RLlib's Atari settings)."""
    import gymnasium as gym

    def create(cfg: dict) -> Any:
        kwargs = dict(cfg or {}, render_mode="rgb_array")
        if env_id.startswith("ale_py:ALE/") or env_id.startswith("ALE/"):
            try:
                from rlx.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack
            except ImportError as err:
                raise ImportError(f"--env={env_id} needs rlx.env.wrappers.atari_wrappers ({err}); "
                                  "use a non-Atari env such as CartPole-v1.") from err
            kwargs.update(frameskip=1, full_action_space=False, repeat_action_probability=0.0)
            return wrap_atari_for_new_api_stack(gym.make(env_id, **kwargs), framestack=4)
        return gym.make(env_id, **kwargs)

    return create


def main(argv: Optional[Sequence[str]] = None) -> Any:
    """Train PPO (or --algo) on --env (default CartPole-v1) with EnvRenderCallback."""
    parser = add_rllib_example_script_args(default_reward=20.0)
    parser.set_defaults(env="CartPole-v1")
    args = parser.parse_args(argv)
    register_env("env", _env_creator(args.env))
    config = get_algorithm_class(args.algo).get_default_config().environment("env").callbacks(EnvRenderCallback)
    return run_rllib_example_script_experiment(config, args)


if __name__ == "__main__":
    main()
