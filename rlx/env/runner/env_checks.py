"""Checks of what sub-envs return, for the lockstep (single-agent) sampling loop.

The loop stores what envs usually return (a reward of a common number type, an array of the
space's shape and dtype, a dict info) after an inline type check, and tests each step's
rewards and new observations for NaN/inf with one vectorized test per column; `StepChecks`
does the rest: the full check of an unusual step, errors that name the sub-env, the step and
the fix, and the handling of a failed sub-env (an EnvError, or with
restart_failed_sub_environments a rebuilt sub-env and its row ended as a truncation).
What is checked, and why not bounds: docs/environments.md.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import gymnasium as gym
import numpy as np

from rlx.core.columns import Columns
from rlx.core.preprocessors import NoPreprocessor, Preprocessor
from rlx.env.env_checker import describe_value, env_label, flag_truth, warn_non_bool_flags, warn_out_of_bounds
from rlx.env.runner.actions import ActionAdapter
from rlx.env.runner.module_slot import ModuleSlot, slot_attribute
from rlx.env.runner.runner import EnvRunner
from rlx.utils.errors import EnvError, EnvOutputError

#: Reward types envs usually return: the sampling loop stores them without the full check.
REWARD_TYPES = frozenset({float, int, np.float64, np.float32, np.int64, np.int32})
RESTART_HINT = (" With config.fault_tolerance(restart_failed_sub_environments=True), a sub-env that does this is "
                "rebuilt and its episode dropped instead.")


def all_finite(array: np.ndarray) -> bool:
    """Whether every entry of a contiguous float array is finite (no NaN, no inf)."""
    # The sum of squares (one BLAS dot) is NaN or inf whenever an entry is, at about a third of
    # the cost of np.isfinite(array).all(); only when it overflows (entries beyond ~1e19) does
    # the exact test decide.
    return math.isfinite(np.vdot(array, array)) or bool(np.isfinite(array).all())


def restart_hint(where: str) -> str:
    """The restart hint of an error about what a sub-env returned `where` (a failed step can
    restart its sub-env; a failed reset() cannot)."""
    return "" if where.startswith("from reset") else RESTART_HINT


class StepChecks(EnvRunner):
    """The checks of a lockstep runner's sub-env outputs (the part of SingleAgentEnvRunner that
    knows what envs may return), and the per-sub-env state the loop keeps."""

    observation_space: gym.Space
    action_space: gym.Space
    is_atari: bool
    #: The module's acting path.
    slot: ModuleSlot
    #: Each sub-env's latest observation (preprocessed, before the filter), [B, ...].
    _raw_obs: np.ndarray
    _ep_return: np.ndarray
    _ep_len: np.ndarray
    _obs_shape: tuple
    _float_obs: bool
    #: A recurrent module's initial state and each sub-env's current state ({name: [B, ...]}).
    _initial_state: dict[str, np.ndarray]
    _state: dict[str, np.ndarray]
    #: The state the module's last act() returned ({} before the first).
    _next_state: dict[str, np.ndarray]
    _stateful: bool
    #: The sub-env whose step failed in the current row (None: none).
    _failed_sub_env: int | None
    #: Whether sampling already flagged (or cannot see) observations outside the Box's bounds.
    _bounds_flagged: bool = False

    preprocessor: Preprocessor = slot_attribute("preprocessor", "The observation preprocessor.")
    actions: ActionAdapter = slot_attribute("actions", "The adapter from module actions to env actions.")

    def _step_flags(self, i: int, terminated: Any, truncated: Any) -> tuple[bool, bool]:
        """Sub-env i's terminated and truncated as bools when one is not a bool: its truth value, as
        RLlib (Gymnasium's vector envs) reads it, flagged once as a warning unless env checking is
        off; EnvOutputError for a flag without a truth value (e.g. an array of several values)."""
        flags = {"terminated": terminated, "truncated": truncated}
        odd = {name: flag for name, flag in flags.items() if type(flag) is not bool and type(flag) is not np.bool_}
        for name, flag in odd.items():
            truth = flag_truth(flag)
            if truth is None:
                raise EnvOutputError(f"{self._sub_env_label(i)} returned {name}={describe_value(flag)} "
                                     f"{self._at_step(i)}; it must be a bool.{RESTART_HINT}")
            flags[name] = truth
        if not self.config.disable_env_checking:
            warn_non_bool_flags(env_label(self.env.envs[i]), odd,
                                where=f"step() ({self._sub_env_label(i)}, {self._at_step(i)})")
        return bool(flags["terminated"]), bool(flags["truncated"])

    def _check_obs_bounds(self, batch: dict[str, np.ndarray]) -> None:
        """Flag once, as a warning, a sampled observation outside the Box observation space's
        low/high (RLlib samples such envs without a word; many step slightly outside their
        bounds). One vectorized test per sample() call on the batch's new observations, until the
        first one is found; off with disable_env_checking, preprocessed or filtered observations."""
        space = self.observation_space
        if self._bounds_flagged or self.config.disable_env_checking \
                or not isinstance(space, gym.spaces.Box) or type(self.preprocessor) is not NoPreprocessor \
                or not self.filter.is_identity:
            return
        low, high = space.low, space.high
        if space.dtype.kind in "iu":
            limits = np.iinfo(space.dtype)
            if (low <= limits.min).all() and (high >= limits.max).all():
                self._bounds_flagged = True  # every value of the dtype is inside: nothing to check
                return
        elif not (np.isfinite(low).any() or np.isfinite(high).any()):
            self._bounds_flagged = True
            return
        rows = batch[Columns.NEXT_OBS]
        if rows.shape[2:] != low.shape:
            return
        with np.errstate(invalid="ignore"):
            outside = ((rows < low) | (rows > high)).reshape(rows.shape[:2] + (-1,)).any(axis=2)
        valid = batch.get(Columns.VALID)
        if valid is not None:
            outside &= valid
        if not outside.any():
            return
        self._bounds_flagged = True
        t, i = (int(x[0]) for x in np.nonzero(outside))
        warn_out_of_bounds(env_label(self.env.envs[i]), f"step() ({self._sub_env_label(i)})", space, rows[t, i])

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

    def _at_step(self, i: int) -> str:
        return f"at step {int(self._ep_len[i]) + 1} of its episode"

    def _checked_step(self, i: int, reward: Any, obs: Any, info: Any) -> tuple[float, np.ndarray]:
        """The full check of a step's output that the inline check did not pass: the reward as a
        float and the observation as rlx stores it; EnvOutputError naming what is wrong."""
        if not self.config.disable_env_checking and not isinstance(info, dict):
            raise EnvOutputError(
                f"{self._sub_env_label(i)} returned info {describe_value(info)} {self._at_step(i)}; the Gymnasium "
                "API's info is a dict (return {} for no info). Turn this check off with "
                f"config.environment(disable_env_checking=True).{RESTART_HINT}")
        value = reward[()] if isinstance(reward, np.ndarray) and reward.shape == () else reward
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise EnvOutputError(
                f"{self._sub_env_label(i)} returned reward {describe_value(reward)} {self._at_step(i)}; a reward "
                f"must be a single number (int, float or a NumPy scalar).{RESTART_HINT}")
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
                f"numeric array of shape {self._obs_shape} (observation_space {space}).{restart_hint(where)}")
        if arr.shape != self._obs_shape:
            raise EnvOutputError(
                f"{self._sub_env_label(i)} returned an observation of shape {arr.shape} {where}; observation_space "
                f"{space} has shape {self._obs_shape}.{restart_hint(where)}")
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
                f"handle ({type(err).__name__}: {err}).{restart_hint(where)}") from err

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
            f"simulation).{restart_hint(where)}")

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

