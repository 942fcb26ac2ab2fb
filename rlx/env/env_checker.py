"""Checks that an env follows the Gymnasium API, with errors that name the problem and the fix.

Also wraps envs written against the old gym API (reset() -> obs, step() -> 4-tuple) when
`auto_wrap_old_gym_envs=True`.
"""
from __future__ import annotations

import logging

import inspect
import numbers
from typing import Any

import gymnasium as gym
import numpy as np

from rlx.utils.errors import EnvError

_DISABLE_HINT = " (Turn these checks off with config.environment(disable_env_checking=True).)"


class OldGymEnvCompatibility(gym.Env):
    """Adapts an env with the pre-0.26 gym API to Gymnasium's reset/step signatures."""

    def __init__(self, env: Any):
        self.env = env
        self.observation_space = convert_space(env.observation_space)
        self.action_space = convert_space(env.action_space)
        self.metadata = getattr(env, "metadata", {})

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if seed is not None and hasattr(self.env, "seed"):
            self.env.seed(seed)
        out = self.env.reset()
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
            return out
        return out, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, done, info = self.env.step(action)
        info = dict(info or {})
        truncated = bool(info.pop("TimeLimit.truncated", False))
        return obs, reward, bool(done) and not truncated, truncated, info

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        if hasattr(self.env, "close"):
            self.env.close()

    @property
    def unwrapped(self) -> Any:
        return getattr(self.env, "unwrapped", self.env)


logger = logging.getLogger(__name__)

#: The keys of the warnings `warn_once` already logged in this process.
_WARNED: set[tuple] = set()


def warn_once(key: tuple, message: str) -> bool:
    """Log `message` as a warning the first time `key` is seen in this process (later calls with
    the same key log nothing); returns whether it logged. The env checker and the sampling loop
    flag what RLlib accepts but is likely a bug (values outside the observation space's bounds,
    non-bool terminated/truncated) this way: once, without failing."""
    if key in _WARNED:
        return False
    _WARNED.add(key)
    logger.warning(message)
    return True


def flag_truth(value: Any) -> bool | None:
    """What a non-bool terminated/truncated flag means when stored in a bool array, as RLlib's
    (Gymnasium's) vector envs store it: its truth value (so the string "no" is True); None when it
    has none (e.g. an array of several values)."""
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - ambiguous truth values (arrays) and broken __bool__
        return None


def warn_non_bool_flags(env_label: str, flags: dict[str, Any], where: str = "step()") -> dict[str, bool]:
    """The truth values of `flags` ({"terminated": value, ...}, those that are not bools), flagged
    once per env class as a warning; EnvError for a flag without a truth value. RLlib (through
    Gymnasium) accepts such flags with a warning and reads their truth value; rlx does the same."""
    truths = {}
    for name, flag in flags.items():
        truth = flag_truth(flag)
        if truth is None:
            raise EnvError(f"{env_label}.{where} returned {name}={describe_value(flag)}; it must be a bool "
                           f"(this value has no single truth value).{_DISABLE_HINT}")
        truths[name] = truth
    said = ", ".join(f"{name}={flag!r} ({type(flag).__name__}, read as {truths[name]})" for name, flag in flags.items())
    warn_once(("non-bool flag", env_label),
              f"{env_label}.{where} returned {said}; the Gymnasium API's terminated and truncated are bools. rlx "
              "reads such a flag as its truth value, bool(flag), as RLlib does (so a string such as 'no' means "
              "True); return bools. (Warned once; config.environment(disable_env_checking=True) turns such checks "
              "off.)")
    return truths


def warn_out_of_bounds(env_label: str, where: str, space: Any, obs: Any) -> None:
    """Flag (once per env class) an observation outside its Box's low/high bounds: RLlib samples
    such envs (many step slightly outside their declared bounds), so rlx warns and goes on."""
    values = np.array2string(np.asarray(obs).ravel(), threshold=8, precision=3)
    warn_once(("obs out of bounds", env_label),
              f"The observation returned by {env_label}.{where} is outside the env's observation_space bounds "
              f"({space}, got {values}); rlx uses it as it is, as RLlib does. Fix the space's low/high if this is "
              "not intended. (Warned once; config.environment(disable_env_checking=True) turns such checks off.)")


def convert_space(space: Any) -> gym.Space:
    """Convert an old `gym` space (or a Gymnasium one) to a Gymnasium space."""
    if isinstance(space, gym.spaces.Space):
        return space
    name = type(space).__name__
    try:
        if name == "Box":
            return gym.spaces.Box(space.low, space.high, space.shape, space.dtype)
        if name == "Discrete":
            return gym.spaces.Discrete(int(space.n))
        if name == "MultiDiscrete":
            return gym.spaces.MultiDiscrete(space.nvec)
        if name == "MultiBinary":
            return gym.spaces.MultiBinary(space.n)
        if name == "Tuple":
            return gym.spaces.Tuple([convert_space(s) for s in space.spaces])
        if name == "Dict":
            return gym.spaces.Dict({k: convert_space(s) for k, s in space.spaces.items()})
    except Exception as err:  # pragma: no cover - defensive
        raise EnvError(f"Could not convert space {space!r} to a gymnasium space: {err}") from err
    raise EnvError(f"{space!r} is not a gymnasium.spaces.Space; define your env's spaces with gymnasium.spaces.")


def looks_like_old_gym_api(env: Any) -> bool:
    """True for envs written against the pre-0.26 gym API (judged without stepping them):
    old `gym` spaces, or a reset() that takes neither `seed` nor **kwargs."""
    if isinstance(env, gym.Env):
        return False
    spaces = (getattr(env, "observation_space", None), getattr(env, "action_space", None))
    if any(s is not None and not isinstance(s, gym.spaces.Space) for s in spaces):
        return True
    reset = getattr(env, "reset", None)
    if reset is None:
        return False
    try:
        params = inspect.signature(reset).parameters
    except (TypeError, ValueError):
        return False
    return "seed" not in params and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _is_old_api_reset(out: Any) -> bool:
    return not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict))


def env_label(env: Any) -> str:
    """The name warnings give an env: its unwrapped class's."""
    try:
        return type(getattr(env, "unwrapped", env)).__name__
    except Exception:  # noqa: BLE001 - an env whose `unwrapped` property fails
        return type(env).__name__


def describe_value(obs: Any) -> str:
    """A short description of something an env returned, for error messages."""
    if isinstance(obs, np.ndarray):
        return f"array of shape {obs.shape} and dtype {obs.dtype}"
    return f"{type(obs).__name__} {obs!r}"[:200]


def _check_in_space(obs: Any, space: gym.Space, where: str, env_label: str = "the env") -> None:
    try:
        ok = space.contains(obs)
    except Exception:
        ok = False
    if not ok:
        hint = ""
        if isinstance(space, gym.spaces.Box) and isinstance(obs, np.ndarray):
            if obs.shape != space.shape:
                hint = f" The shapes differ: {obs.shape} vs {space.shape}."
            elif obs.dtype != space.dtype:
                hint = f" The dtypes differ: {obs.dtype} vs {space.dtype} (cast with .astype({space.dtype}))."
            elif obs.dtype.kind == "f" and not np.isfinite(obs).all():
                hint = " It holds NaN or infinite values; observations must be finite."
            else:
                # Values outside the declared bounds only: RLlib's single-agent EnvRunner samples
                # such envs (many step slightly outside their bounds), so rlx warns and goes on.
                warn_out_of_bounds(env_label, where, space, obs)
                return
        raise EnvError(
            f"The observation returned by {where} is not in the env's observation_space: got "
            f"{describe_value(obs)}, observation_space is {space}.{hint}{_DISABLE_HINT}"
        )


def check_env(env: Any, auto_wrap_old_gym_envs: bool = True, seed: int | None = None) -> Any:
    """Validate spaces and the reset/step signatures of `env`; return the env (wrapped if old-API).

    Raises EnvError naming the first problem found.
    """
    for attr in ("observation_space", "action_space"):
        if not hasattr(env, attr):
            raise EnvError(f"The env {type(env).__name__} has no `{attr}` attribute; set it in __init__.{_DISABLE_HINT}")
    old_spaces = not isinstance(env.observation_space, gym.spaces.Space) or not isinstance(
        env.action_space, gym.spaces.Space
    )
    if old_spaces and not auto_wrap_old_gym_envs:
        raise EnvError(
            f"The env {type(env).__name__} uses spaces that are not gymnasium.spaces "
            f"({type(env.observation_space).__module__}); switch to gymnasium or set auto_wrap_old_gym_envs=True."
        )
    try:
        out = env.reset(seed=seed) if not old_spaces else env.reset()
    except TypeError as err:
        if "seed" not in str(err) and "options" not in str(err):
            raise
        out = env.reset()
        old_spaces = True
    if old_spaces or _is_old_api_reset(out):
        if not auto_wrap_old_gym_envs:
            raise EnvError(
                f"{type(env).__name__}.reset() returned {describe_value(out)}, but the Gymnasium API returns "
                "(obs, info). "
                "Upgrade the env to gymnasium's reset(*, seed=None, options=None) -> (obs, info) and "
                "step() -> (obs, reward, terminated, truncated, info), or set "
                "config.environment(auto_wrap_old_gym_envs=True)."
            )
        env = OldGymEnvCompatibility(env)
        out = env.reset(seed=seed)
    obs, info = out
    if not isinstance(info, dict):
        raise EnvError(f"{type(env).__name__}.reset() must return (obs, info) with info a dict, got info={info!r}.")
    label = env_label(env)
    _check_in_space(obs, env.observation_space, "reset()", label)
    action = env.action_space.sample()
    try:
        result = env.step(action)
    except Exception as err:
        # Envs may refuse some actions (e.g. masked ones); a random action proves nothing then.
        # Sampling reports a step() that fails on the policy's actions, naming the sub-env.
        logger.warning("%s.step() raised %s: %s on the random action %r the env checker tried; its step() "
                       "output is not checked.", type(env).__name__, type(err).__name__, err, action)
        return env
    if not isinstance(result, tuple) or len(result) != 5:
        n = len(result) if isinstance(result, tuple) else "a non-tuple"
        raise EnvError(
            f"{type(env).__name__}.step() returned {n} values; the Gymnasium API returns 5: "
            "(obs, reward, terminated, truncated, info). An old-gym env returning (obs, reward, done, info) "
            "is wrapped automatically only if its reset() also uses the old API."
        )
    obs, reward, terminated, truncated, info = result
    _check_in_space(obs, env.observation_space, "step()", label)
    if isinstance(reward, (bool, np.bool_)) or not isinstance(reward, (numbers.Real, np.number)):
        if not (isinstance(reward, np.ndarray) and reward.shape == ()):
            raise EnvError(
                f"{type(env).__name__}.step() returned reward {reward!r} ({type(reward).__name__}); "
                f"it must be a single number.{_DISABLE_HINT}"
            )
    if not isinstance(reward, (int, np.integer)) and not np.isfinite(reward):
        raise EnvError(
            f"{type(env).__name__}.step() returned reward {reward!r}; rewards must be finite numbers. Check the "
            "env's reward computation (a division by zero, log(0), a diverging simulation)."
        )
    odd = {name: flag for name, flag in (("terminated", terminated), ("truncated", truncated))
           if not isinstance(flag, (bool, np.bool_))}
    if odd:
        warn_non_bool_flags(label, odd)
    if not isinstance(info, dict):
        raise EnvError(f"{type(env).__name__}.step() must return a dict as info, got {info!r}.")
    return env
