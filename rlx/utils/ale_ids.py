"""Atari ids without a package prefix: `ALE/<Game>-v5` names a game of ale-py, whose envs
Gymnasium knows only once ale-py registered them (`gymnasium.register_envs(ale_py)`).

rlx registers them on first use of such an id, in every process that resolves one (the
driver, EnvRunner and learner processes, Ray actors, Tune trials), so that `ALE/Pong-v5`
works as `ale_py:ALE/Pong-v5` does; ale-py is imported only then, keeping `import rlx` light.
"""
from __future__ import annotations

from typing import Any

from rlx.utils.errors import EnvError, install_hint

#: The namespace ale-py registers its games under.
ALE_PREFIX = "ALE/"


def is_ale_id(env: Any) -> bool:
    """Whether `env` is an id of the ALE namespace ('ALE/Pong-v5')."""
    return isinstance(env, str) and env.startswith(ALE_PREFIX)


def ensure_ale_registered(env: Any) -> bool:
    """Register ale-py's games with Gymnasium when `env` is an 'ALE/...' id they are not
    registered for yet; returns whether it did. Raises EnvError naming the fix when
    ale-py is not installed."""
    if not is_ale_id(env):
        return False
    import gymnasium as gym

    if env in gym.registry:
        return False
    try:
        import ale_py
    except ImportError as err:
        raise EnvError(f"Env '{env}' is an Atari game, which needs ale-py (it ships the games): "
                       + install_hint("atari")) from err
    gym.register_envs(ale_py)
    return True
