"""Advice when an image env is trained with settings that are clearly CartPole's: a model
without convolutions on image observations, or (for an Atari game) on-policy train batches
of a few dozen steps. It logs one warning naming what looks wrong and the tuned example to
start from (tuned_examples/, `rlx list`); it never raises, since such a config is valid.

Each reason is told once per process, however many Algorithms are built.
"""
from __future__ import annotations

import logging
from typing import Any

import gymnasium as gym

logger = logging.getLogger("rlx")

#: On-policy train batches smaller than this (env steps) look like CartPole's on an Atari game;
#: Atari's published settings sample 8+ sub-envs x 128 steps (PPO) or 500-step batches (APPO).
SMALL_ATARI_BATCH = 256
#: Tuned Atari examples by algorithm (each has a pong- and a breakout- file).
_TUNED_ATARI = {"PPO": "ppo", "DQN": "dqn", "APPO": "appo", "IMPALA": "appo"}
#: Reasons already told in this process.
_TOLD: set[str] = set()


def is_image_space(space: Any) -> bool:
    """Whether `space` holds images: a Box of rank 3 (height, width and at most 12 channels,
    first or last) whose sides are at least 16 pixels."""
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 3:
        return False
    h, w, c = space.shape
    if c > 12 and space.shape[0] <= 12:  # channels first
        c, h, w = space.shape
    return c <= 12 and min(h, w) >= 16


def tuned_atari_example(algo_name: str, env: Any) -> str:
    """The tuned example to start from for `algo_name` on Atari env `env` ('breakout-ppo' ...)."""
    algo = _TUNED_ATARI.get(algo_name.upper(), "ppo")
    game = "breakout" if isinstance(env, str) and "breakout" in env.lower() else "pong"
    return f"{game}-{algo}"


def cartpole_signs(config: Any, module: Any) -> list[str]:
    """What in `config` (and its built `module`) looks tuned for CartPole on an image env, in
    words; empty when nothing does (or the observations are not images)."""
    import torch  # loaded by then (the module is built); not at import, which keeps rlx's import light

    signs = []
    space: Any = getattr(module, "observation_space", None)
    if module is not None and is_image_space(space) and \
            not any(isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)) for m in module.modules()):
        signs.append(f"a model without convolutions (an MLP) on {'x'.join(map(str, space.shape))} image observations")
    elif config.is_atari and isinstance(space, gym.spaces.Box) and len(space.shape) == 1 and space.shape[0] >= 1000:
        signs.append(f"an MLP on flattened frames ({space.shape[0]} values per observation)")
    on_policy = "replay_buffer_config" not in config  # off-policy algorithms train on replayed batches
    if config.is_atari and on_policy:
        batch = int(config.total_train_batch_size or 0)
        if 0 < batch < SMALL_ATARI_BATCH:
            signs.append(f"train batches of {batch} env steps (Atari's tuned settings use 500-1024+)")
    return signs


def advise_on_image_settings(algo: Any) -> None:
    """Log, once per reason, a warning when `algo` trains an image env with CartPole's settings,
    naming the tuned example to use instead. Never raises."""
    try:
        config = algo.config
        try:
            module = algo.get_module()
        except Exception:  # multi-agent without a default module, no local module: judge the config alone
            module = None
        signs = cartpole_signs(config, module)
    except Exception:  # advice only: a config this check does not understand trains as it is
        logger.debug("Checking the config for CartPole settings on an image env failed", exc_info=True)
        return
    signs = [s for s in signs if s not in _TOLD]
    if not signs:
        return
    _TOLD.update(signs)
    algo_name = getattr(config.algo_class, "__name__", str(config.algo_class))
    example = tuned_atari_example(algo_name, config.env)
    logger.warning(
        "%s on %s is configured with settings that look like CartPole's: %s. Image envs learn with a CNN "
        "(the default for image observations; model conv_filters), frames stacked and batches of several "
        "sub-envs. Start from a tuned example: rlx train file %s (tuned_examples/, see 'rlx list'), or copy "
        "its config.", algo_name, config.env, "; ".join(signs), example)
