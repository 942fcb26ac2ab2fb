"""The lockstep sampling loop: a vector of single-agent envs stepped together, one row a step.

Each step, the observations of all B sub-envs are filtered as one [B, ...] array, the module
acts on them in one forward pass (rlx.env.runner.module_slot), and every sub-env steps; what
they return is written straight into row t of the preallocated [T, B] columns of the batch
(the one module's column block is the vector env's batch: no per-step dicts). A sub-env whose
episode ends is reset at once, so its column goes on with the next episode. With
`remote_env_batch_wait_ms` a row holds only the sub-envs whose steps arrived
(rlx.env.partial_steps).
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable

import numpy as np
import torch

from rlx.core import DEFAULT_AGENT_ID
from rlx.core.columns import Columns, state_column
from rlx.core.preprocessors import NoPreprocessor
from rlx.env.partial_fragment import attach_partial_fragment, cut_time_major
from rlx.env.partial_steps import PartialSteps, compact_columns
from rlx.env.runner.columns import ModuleColumns
from rlx.env.runner.episode_events import episode_extras, log_episode_returns
from rlx.env.runner.env_checks import REWARD_TYPES, RESTART_HINT, StepChecks
from rlx.env.runner.runner import clip_rewards, scale_rewards
from rlx.env.runner.trajectories import episode_runs, postprocess_stretch
from rlx.utils.errors import EnvError, EnvOutputError
from rlx.utils.progress_events import env_step_listener

logger = logging.getLogger("rlx")


class LockstepSampling(StepChecks):
    """The sampling loop of a runner of single-agent envs (the part of SingleAgentEnvRunner that
    steps its sub-envs), with the episodes the callbacks see."""

    def _alloc_episode_state(self) -> None:
        """Per-sub-env bookkeeping arrays, sized to num_envs."""
        self._raw_obs = np.zeros((self.num_envs,) + self._obs_shape, dtype=np.float32)
        self._ep_return = np.zeros(self.num_envs, dtype=np.float64)
        self._ep_len = np.zeros(self.num_envs, dtype=np.int64)
        self._at_boundary = np.ones(self.num_envs, dtype=bool)
        self._episodes: list[Any] = [None] * self.num_envs
        #: Each sub-env's last finished episode's extras, until the episode is logged.
        self._ended_extras: list[tuple[dict, dict] | None] = [None] * self.num_envs
        if getattr(self, "_stateful", False):
            self._state = {k: np.repeat(v[None], self.num_envs, axis=0) for k, v in self._initial_state.items()}
            self._next_state = {}

    def _reset_state(self, rows: Any) -> None:
        """Give these sub-envs' rows the recurrent module's initial state (new episodes)."""
        for k, v in self._initial_state.items():
            self._state[k][rows] = v

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
                               f"env's reset(), or see the traceback above.{RESTART_HINT}") from err
            self._restart_sub_env(i, err)
        try:
            return self.env.envs[i].reset(**reset_kwargs)
        except Exception as err:
            raise EnvError(f"{self._sub_env_label(i)}: env.reset() raised {type(err).__name__}: {err}, also on a "
                           "freshly built sub-env (restart_failed_sub_environments); fix the env's reset().") from err

    def _target(self, num_timesteps: int | None) -> int:
        """Steps per sub-env: rollout_fragment_length, or num_timesteps spread over the sub-envs."""
        if num_timesteps is None:
            return self.config.get_rollout_fragment_length(self.worker_index)
        return max(1, math.ceil(num_timesteps / self.env.num_envs))

    def _before_sample(self) -> None:
        partial = getattr(self, "_partial_steps", None)
        if partial is not None and partial.drop_in_flight(self.env.envs):
            self._needs_reset = True  # a sample() that raised left steps in flight: start fresh episodes

    def _batch_columns(self) -> ModuleColumns:
        """The module's [T, B] columns (rlx.env.runner.columns), written a whole row a step."""
        columns = getattr(self, "_writer", None)
        if columns is None:
            columns = self._writer = ModuleColumns(self._obs_shape, self.actions.batch_shape,
                                                   self.actions.batch_dtype,
                                                   {k: v.shape for k, v in self._initial_state.items()})
        return columns

    def _numpy_actor(self, explore: bool, random_actions: bool) -> Callable[[np.ndarray], Any] | None:
        """The slot's NumPy acting function for this sample() call (ModuleSlot.numpy_actor)."""
        return self.slot.numpy_actor(explore, random_actions)

    def _act(self, obs: np.ndarray, explore: bool, random_actions: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Actions, their log-probabilities and the distribution inputs for a batch of observations
        through torch (ModuleSlot.act; the loop calls the NumPy actor itself first); a recurrent
        module's next state goes to `_next_state`."""
        out = self.slot.act(obs, explore, random_actions, state_in=self._state if self._stateful else None)
        if self._stateful:
            self._next_state = self.slot.state_out
        return out

    @torch.no_grad()
    def _run(
        self,
        steps_per_env: int | None,
        num_episodes: int | None,
        explore: bool,
        random_actions: bool,
        complete: bool,
    ) -> dict[str, np.ndarray]:
        """Step the sub-envs `steps_per_env` times (then, with `complete`, on until their episodes
        end) or until `num_episodes` episodes completed; the time-major batch of those rows.
        Rows that belong to no collected step are marked False in the `valid` column (present
        only then)."""
        if (steps_per_env is None) == (num_episodes is None):
            raise ValueError("_run(): give exactly one of steps_per_env and num_episodes.")
        self._failed_sub_env = None
        B = self.num_envs
        envs = self.env.envs
        T_cap = steps_per_env if steps_per_env is not None else 256
        columns = self._batch_columns()
        buf = columns.alloc(T_cap, B)
        dist_buf: np.ndarray | None = None
        direct = type(self.preprocessor) is NoPreprocessor
        obs_shape = self._obs_shape
        obs_dtype = getattr(self.observation_space, "dtype", None)
        check_info = not self.config.disable_env_checking
        check_finite = self._float_obs
        reward_types, ndarray, isfinite, np_bool = REWARD_TYPES, np.ndarray, math.isfinite, np.bool_
        identity_filter = self.filter.is_identity
        raw = self._raw_obs
        active = list(range(B if num_episodes is None else min(B, num_episodes)))
        episodes_started = len(active) if num_episodes is not None else 0
        episodes_done = 0
        track = self._track_episodes
        remote_envs = self.config.sub_envs_in_processes
        row_episodes: list[list[Any]] | None = [] if self._on_postprocess_trajectory is not None else None
        numpy_actor = self._numpy_actor(explore, random_actions)
        to_env = self.actions.to_env
        # remote_env_batch_wait_ms > 0: each row acts only for the sub-envs whose steps arrived
        # (rlx.env.partial_steps); `target` is the steps to collect, `collected` those collected.
        partial = self._partial_stepper() if remote_envs else None
        target = None if steps_per_env is None else steps_per_env * B
        collected = 0
        t = 0
        progress = env_step_listener(self)  # the progress display of this process, or None
        while True:
            if t >= T_cap:
                T_cap *= 2
                buf = columns.grow_time(T_cap)
                dist_buf = buf.get(Columns.ACTION_DIST_INPUTS)
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
            acted = numpy_actor(obs_t) if numpy_actor is not None else None  # (the NumPy path, no torch op)
            actions, logp, dist_inputs = acted if acted is not None else self._act(obs_t, explore, random_actions)
            if dist_buf is None:
                dist_buf = columns.set_dist_width(dist_inputs)
            dist_buf[t] = dist_inputs
            self._progress = (buf, t, row_episodes)  # rows an env error keeps (_with_partial_fragment)
            buf[Columns.ACTIONS][t] = actions
            buf[Columns.ACTION_LOGP][t] = logp
            env_actions = to_env(actions)
            rew_t = buf[Columns.REWARDS][t]
            term_t = buf[Columns.TERMINATEDS][t]
            trunc_t = buf[Columns.TRUNCATEDS][t]
            next_t = buf[Columns.NEXT_OBS][t]
            valid_t = buf[Columns.VALID][t]
            finished: list[int] = []
            if row_episodes is not None:
                row_episodes.append(list(self._episodes))
            dropped: list[int] = []
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
                if (type(te) is not bool and type(te) is not np_bool) or \
                        (type(tr) is not bool and type(tr) is not np_bool):
                    try:
                        te, tr = self._step_flags(i, te, tr)  # their truth values, flagged once
                    except EnvOutputError as err:
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
                if self._returns_episodes:  # RLlib's episodes: the module's actions and its outputs
                    for i, obs, r, info, te, tr in stepped:
                        if i not in dropped:
                            self._step_episode(i, obs, actions[i].copy(), r, info, te, tr, {
                                Columns.ACTION_LOGP: logp[i].copy(), Columns.ACTION_DIST_INPUTS: dist_inputs[i].copy()})
                else:
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
            if progress is not None:
                progress.on_env_steps(n_active)
            if finished:
                for i in finished:
                    if i not in dropped:
                        self._log_episode(float(self._ep_return[i]), int(self._ep_len[i]), self._ended_extras[i])
                        self._ended_extras[i] = None
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
            elif steps_per_env is not None and t >= steps_per_env:
                if not complete:
                    break
                active = [i for i in active if not self._at_boundary[i]]
                if not active:
                    break
        batch = columns.take(t)
        if partial is not None:
            if partial.drop_in_flight(envs):  # num_episodes reached: the other episodes are cut
                self._needs_reset = True
            batch, row_episodes = compact_columns(batch, row_episodes)
        if num_episodes is None and not complete and (partial is None or batch[Columns.VALID].all()):
            del batch[Columns.VALID]
        self._check_obs_bounds(batch)
        self._finish_rewards(batch)
        if row_episodes is not None:
            self._postprocess_trajectories(batch, row_episodes)
        return batch

    def _with_partial_fragment(self, err: EnvError, complete: bool) -> BaseException:
        """`err` with the rows this sample() call finished before it (rlx.env.partial_fragment):
        the runner is replaced, its rows are not. (Not with remote_env_batch_wait_ms, whose rows
        may still wait for steps in flight.)"""
        rows, self._progress = self._progress, None
        if rows is None or self.config.remote_env_batch_wait_ms:
            return err
        buf, t, row_episodes = rows
        try:
            if t < len(buf[Columns.REWARDS]) and self._keep_failed_row(buf, t, complete):
                t += 1
            if t == 0:
                return err
            batch = {k: v[:t] for k, v in buf.items()}
            if not complete and batch[Columns.VALID].all():
                del batch[Columns.VALID]
            self._finish_rewards(batch)
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
        if num_episodes is not None or target is None:  # target is None exactly when sampling episodes
            return free
        budget = target - collected - partial.num_in_flight
        if budget > 0:
            return free[:budget]
        if complete:
            return [i for i in free if not self._at_boundary[i]]
        return []

    def _postprocess_trajectories(self, batch: dict[str, np.ndarray], row_episodes: list[list[Any]]) -> None:
        """Call on_postprocess_trajectory once per (sub-env, episode) stretch of the batch
        (rlx.env.runner.trajectories), each with its dones, eps_id, env_id and, where the episode
        holds them, the steps' infos and t."""
        valid = batch.get(Columns.VALID)
        for b in range(self.num_envs):
            for t, end, episode in episode_runs([row[b] for row in row_episodes]):
                rows = slice(t, end)
                if valid is not None and not valid[rows, b].any():
                    continue
                n = end - t
                extra = {"eps_id": np.full(n, hash(episode.id_) if episode is not None else -1, np.int64),
                         "env_id": np.full(n, b, np.int64)}
                if episode is not None and episode.t >= n:
                    # The stretch is the episode's latest steps: their infos and step indices.
                    infos = np.empty(n, dtype=object)
                    infos[:] = episode.get_infos()[-n:]
                    extra["infos"] = infos
                    extra["t"] = np.arange(episode.t - n, episode.t, dtype=np.int64)
                postprocess_stretch(self, "default_policy", batch, b, rows, episode, 0, extra)

    def _finish_rewards(self, batch: dict[str, np.ndarray]) -> None:
        """Clip the batch's rewards as `clip_rewards` says (Atari: sign by default), then scale
        them when `normalize_rewards` is on."""
        clip = self.config.clip_rewards
        clip_rewards(batch[Columns.REWARDS], self.is_atari if clip is None else clip)
        scale_rewards(self.slot.filter, batch)

    # ------------------------------------------------------------------ episodes (callbacks)

    def _episode_env(self, i: int) -> Any:
        return self.env

    def _new_episode(self, i: int) -> None:
        from rlx.env.single_agent_episode import SingleAgentEpisode

        self._episodes[i] = SingleAgentEpisode(
            env_index=i, worker_index=self.worker_index,
            observation_space=self.observation_space, action_space=self.action_space,
        )
        self._fire_episode_event(self._on_episode_created, i)

    def _start_episode(self, i: int, obs: Any, info: Any) -> None:
        self._episodes[i].add_env_reset(obs, info)
        self._fire_episode_event(self._on_episode_start, i)

    def _step_episode(self, i: int, obs: Any, action: Any, reward: float, info: Any,
                      terminated: bool, truncated: bool, extra_model_outputs: dict[str, Any] | None = None) -> None:
        episode = self._episodes[i]
        episode.add_env_step(obs, action, reward, info, terminated=terminated, truncated=truncated,
                             extra_model_outputs=extra_model_outputs)
        self._fire_episode_event(self._on_episode_step, i)
        if terminated or truncated:
            if self._returns_episodes:
                self._done_episodes.append(episode)
            self._fire_episode_end(i)
            self._ended_extras[i] = episode_extras(episode)

    def _log_episode(self, episode_return: float, length: int,
                     extras: tuple[dict[str, Any], dict[str, Any]] | None = None) -> None:
        """Log a finished episode (the one-agent, one-module case of the multi-agent runner's) with
        the extras callbacks put on it."""
        log_episode_returns(self.metrics, self._smoothing, episode_return, length,
                            [(DEFAULT_AGENT_ID, "default_policy", episode_return)], per_policy=False,
                            extras=(extras or ({}, {})) if self._track_episodes else None)
