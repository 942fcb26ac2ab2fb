"""A multi-agent runner's batch: each module's closed rows (rlx.env.runner.columns) as its
time-major [T, C] batch, in a MultiAgentBatch with the call's env and agent step counts.

The next observations are filtered with each module's filter as it is when the batch is cut
(the observations were filtered as the agents acted), rewards clipped as configured,
`on_postprocess_trajectory` called per (agent, episode) stretch, and `valid` kept where a
column holds fewer rows than the batch. When an env fails, the rows completed before it are
kept on the error (rlx.env.partial_fragment).
"""
from __future__ import annotations

import abc
import logging
from typing import Any, Callable

import numpy as np

from rlx.core.columns import Columns
from rlx.core.rl_module.agent_mapping import AgentMapper
from rlx.core.sample_batch import MultiAgentBatch
from rlx.env.partial_fragment import attach_partial_fragment, cut_time_major
from rlx.env.runner.columns import ClosedRows, ModuleColumns
from rlx.env.runner.module_slot import ModuleSlot
from rlx.env.runner.runner import EnvRunner, clip_rewards, scale_rewards
from rlx.env.runner.trajectories import episode_runs, postprocess_stretch
from rlx.utils.errors import EnvError

logger = logging.getLogger("rlx")


class AgentBatches(EnvRunner):
    """The batches of a multi-agent runner (the part of MultiAgentEnvRunner that cuts them), and
    the state its sampling loop keeps."""

    #: The sub-envs (MultiAgentEnvs).
    envs: list[Any]
    #: {policy_id: PolicySpec or None}.
    policies: dict[str, Any]
    #: Calls policy_mapping_fn.
    _mapper: AgentMapper
    _observation_fn: Callable[..., Any] | None
    #: {module_id: ModuleColumns}.
    _columns: dict[str, ModuleColumns]
    #: {module_id: {(sub-env, agent): column}}: a slot's column, for the runner's lifetime.
    _slot_index: dict[str, dict[tuple[int, Any], int]]
    #: {module_id: [(sub-env, agent) of each column]}.
    _column_agents: dict[str, list[tuple[int, Any]]]
    #: Whether batches carry eps_id and t columns (for replay_mode='lockstep').
    _env_step_columns: bool
    #: Whether each row's episode is kept (see AgentSampling._run).
    _row_episodes: bool
    #: What the latest batch was cut from, per module.
    _taken: dict[str, ClosedRows]

    @abc.abstractmethod
    def _close_transitions(self) -> None:
        """Close the rows of the transitions the current round of env steps completed."""

    def _build_batch(self, env_steps: int, agent_steps: int) -> MultiAgentBatch:
        """Every module's closed rows as its time-major batch (modules without any left out)."""
        batches = {}
        self._taken: dict[str, ClosedRows] = {}
        for pid, columns in self._columns.items():
            if pid not in self._slots or not columns.count.any():
                continue
            taken = self._taken[pid] = columns.take_closed()
            batches[pid] = self._module_batch(self._slots[pid], taken)
        return MultiAgentBatch(batches, env_steps, agent_steps)

    def _module_batch(self, slot: ModuleSlot, taken: ClosedRows) -> dict[str, np.ndarray]:
        batch = taken.batch
        next_obs = batch[Columns.NEXT_OBS]
        if not slot.filter.is_identity:  # the filter as it is now (observations were filtered as the agents acted)
            shape = next_obs.shape
            batch[Columns.NEXT_OBS] = slot.filter.apply_batch(next_obs.reshape((-1,) + shape[2:]),
                                                              update=False).reshape(shape)
        clip_rewards(batch[Columns.REWARDS], self.config.clip_rewards)
        scale_rewards(slot.filter, batch, taken.columns)
        if batch[Columns.VALID].all():
            del batch[Columns.VALID]
        if self._on_postprocess_trajectory is not None:
            self._postprocess_trajectories(slot.module_id, taken)
        return batch

    def _postprocess_trajectories(self, policy_id: str, taken: ClosedRows) -> None:
        """Call on_postprocess_trajectory once per (agent, episode) stretch of a module's batch
        (rlx.env.runner.trajectories), each with its dones, eps_id and agent_index."""
        agents = self._column_agents[policy_id]
        for c, (column, n) in enumerate(zip(taken.columns.tolist(), taken.count.tolist())):
            for t, end, episode in episode_runs(taken.episodes[:n, c]):
                extra = {"eps_id": np.full(end - t, episode.episode_id, np.int64),
                         "agent_index": np.full(end - t, c, np.int64)}
                postprocess_stretch(self, policy_id, taken.batch, c, slice(t, end), episode, agents[column][1], extra)

    def _with_partial_fragment(self, err: EnvError, complete: bool) -> BaseException:
        """`err` with the rows this sample() call finished before it (rlx.env.partial_fragment):
        the runner is replaced, its rows are not."""
        env_steps, self._progress = self._progress, None
        if not env_steps:
            return err
        try:
            self._close_transitions()  # those of the sub-envs that stepped before the error
            batch = self._build_batch(env_steps, 0)
            agent_steps = 0
            kept_episodes: dict[int, Any] = {}
            for pid, module_batch in batch.policy_batches.items():
                cut_time_major(module_batch, complete)
                valid = module_batch.get(Columns.VALID)
                agent_steps += int(valid.sum()) if valid is not None else int(module_batch[Columns.REWARDS].size)
                if complete:  # the episodes kept whole: every one started in this call
                    taken = self._taken[pid]
                    for c, n in enumerate(taken.count.tolist()):
                        kept = int(valid[:, c].sum()) if valid is not None else n
                        kept_episodes.update((id(e), e) for e in taken.episodes[:kept, c])
            if complete:
                env_steps = sum(int(episode.env_steps()) for episode in kept_episodes.values())
            if not agent_steps:
                return err
            batch = MultiAgentBatch(batch.policy_batches, env_steps, agent_steps)
            return attach_partial_fragment(err, self, batch, env_steps, agent_steps)
        except Exception as salvage_err:  # never hide the env's error behind this one
            logger.warning("The rows sampled before the env error could not be kept (%s: %s).",
                           type(salvage_err).__name__, salvage_err)
            return err
