"""The agent-wise sampling loop of multi-agent envs: one batched forward pass per module a step.

Each step, the observations of every acting agent in every sub-env are grouped by the module
their agent is mapped to (policy_mapping_fn, once per agent per episode), and each module acts
on its group in one batched forward pass (rlx.env.runner.module_slot). What the agents
experience goes straight into each module's preallocated [T, C] columns
(rlx.env.runner.columns): a persistent slot (sub-env, agent) is one column, the row of an
agent's transition is opened when it acts (observation, action, log-probability, distribution
inputs, state) and closed when the transition completes (the rewards it received until it
next observes, its next observation, done flags). Simultaneous agents fill their columns in
lockstep; agents that act in turns or leave early leave their columns shorter, and `valid`
marks the rows that hold data.
"""
from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import torch

from rlx.core.columns import Columns, state_column
from rlx.core.sample_batch import MultiAgentBatch
from rlx.env.multi_agent_env import ALL_AGENTS
from rlx.env.multi_agent_episode import MultiAgentEpisode
from rlx.env.runner.agent_batches import AgentBatches
from rlx.env.runner.columns import ModuleColumns
from rlx.env.runner.episode_events import episode_extras, log_episode_returns
from rlx.env.runner.module_slot import ModuleSlot, joint_forward
from rlx.utils.errors import EnvError
from rlx.utils.progress_events import env_step_listener

logger = logging.getLogger("rlx")


class AgentSlot:
    """Where one agent of one sub-env's episode acts: its sub-env and id, its module's slot and
    columns, its column, and the reward its open transition received so far."""

    __slots__ = ("env", "agent_id", "module_id", "slot", "columns", "column", "reward", "direct_shape", "obs_dtype")

    def __init__(self, env: int, agent_id: Any, module_id: str, slot: ModuleSlot):
        self.env, self.agent_id = env, agent_id
        self.module_id, self.slot = module_id, slot
        self.columns: ModuleColumns | None = None
        self.column = -1
        self.reward = 0.0
        #: The observation shape stored as the env returns it (no preprocessor), else None.
        self.direct_shape = slot.obs_shape if slot.direct else None
        self.obs_dtype = slot.obs_dtype

    def drop_open_row(self) -> None:
        """Mark this agent's open transition as one that never completes (its episode was cut)."""
        if self.columns is not None:
            self.columns.open[self.column] = False


class _Closing:
    """The transitions of one module that completed in the current round of env steps, closed
    into its columns together (`_close_transitions`): their columns, rewards and next
    observations, and the positions (in these lists) of those that ended terminated or truncated."""

    __slots__ = ("cols", "rewards", "next_obs", "terminated_at", "truncated_at")

    def __init__(self) -> None:
        self.cols: list[int] = []
        self.rewards: list[float] = []
        self.next_obs: list[np.ndarray] = []
        self.terminated_at: list[int] = []
        self.truncated_at: list[int] = []

    def add(self, agent: AgentSlot, next_obs: np.ndarray, terminated: bool, truncated: bool) -> None:
        """The transition of `agent` completed with `next_obs`."""
        if terminated:
            self.terminated_at.append(len(self.cols))
        elif truncated:
            self.truncated_at.append(len(self.cols))
        self.cols.append(agent.column)
        self.rewards.append(agent.reward)
        self.next_obs.append(next_obs)

    def flags(self, at: list[int]) -> np.ndarray:
        """A bool per transition, True at the positions `at`."""
        out = np.zeros(len(self.cols), bool)
        if at:
            out[at] = True
        return out

    def clear(self) -> None:
        """Empty, for the next round."""
        for items in (self.cols, self.rewards, self.next_obs, self.terminated_at, self.truncated_at):
            items.clear()


class _Acting:
    """The agents one module acts for in the current round (AgentSlots), their observations,
    their columns, and those of them that have no column yet (parallel lists)."""

    __slots__ = ("agents", "rows", "cols", "new")

    def __init__(self) -> None:
        self.agents: list[AgentSlot] = []
        self.rows: list[np.ndarray] = []
        self.cols: list[int] = []
        self.new: list[AgentSlot] = []


class AgentSampling(AgentBatches):
    """The sampling loop of a runner of multi-agent envs (the part of MultiAgentEnvRunner that
    steps its sub-envs), with the episodes the callbacks see."""

    def _setup_sampling(self) -> None:
        from rlx.utils.replay_buffers.multi_agent_replay_buffer import needs_env_step_columns

        #: {module_id: ModuleColumns}.
        self._columns: dict[str, ModuleColumns] = {}
        #: {module_id: {(sub-env, agent): column}}: a slot's column, for the runner's lifetime.
        self._slot_index: dict[str, dict[tuple[int, Any], int]] = {}
        #: {module_id: [(sub-env, agent) of each column]}.
        self._column_agents: dict[str, list[tuple[int, Any]]] = {}
        self._closing: dict[str, _Closing] = {}
        self._rows_planned = 64
        #: Whether batches carry eps_id and t columns (for replay_mode='lockstep').
        self._env_step_columns = needs_env_step_columns(self.config)

    def _forget_module(self, module_id: str) -> None:
        """Drop a removed module's columns."""
        for table in (self._columns, self._slot_index, self._column_agents, self._closing):
            table.pop(module_id, None)

    def _before_sample(self) -> None:
        if not self.envs:
            self._make_env(self._env_context(0))  # env=None: raises the error that says what to configure

    def _target(self, num_timesteps: int | None) -> int:
        """Env steps to collect (agent steps with count_steps_by='agent_steps')."""
        if num_timesteps is None:
            return max(1, self.config.get_rollout_fragment_length(self.worker_index) * self.num_envs)
        return max(1, int(num_timesteps))

    def _episode_env(self, b: int) -> Any:
        return self.envs[b]

    def _alloc_episode_state(self) -> None:
        B = self.num_envs
        self._episodes: list[Any] = [None] * B  # each sub-env's MultiAgentEpisode (from the first reset)
        self._obs: list[dict[Any, np.ndarray]] = [{} for _ in range(B)]  # preprocessed, per acting agent
        self._pending: list[dict[Any, AgentSlot]] = [{} for _ in range(B)]  # agents with an open transition
        self._agent_slots: list[dict[Any, AgentSlot]] = [{} for _ in range(B)]  # this episode's agents
        # agent -> its recurrent module's state (agents of stateful modules only), reset per episode
        self._agent_state: list[dict[Any, dict[str, np.ndarray]]] = [{} for _ in range(B)]
        self._last_row: list[dict[Any, np.ndarray]] = [{} for _ in range(B)]
        self._at_boundary = np.ones(B, dtype=bool)
        self._check_steps = [True] * B  # check what step() returns (first episode of each sub-env)
        # {agent: (module action, extra model outputs)} of each sub-env's step (when returning episodes)
        self._module_outputs: list[dict[Any, tuple[Any, dict[str, Any]]]] = [{} for _ in range(B)]

    # ------------------------------------------------------------------ episodes

    def _reset_all(self) -> None:
        self.num_resets += 1
        for b in range(self.num_envs):
            seed = self._seed + b if self._seed is not None and self._needs_seed else None
            self._start_episode(b, seed)
        self._needs_seed = False
        self._needs_reset = False

    def _start_episode(self, b: int, seed: int | None = None) -> None:
        # Transitions of an episode cut short (a reset of every sub-env) never complete.
        for agent in self._pending[b].values():
            agent.drop_open_row()
        episode = MultiAgentEpisode(env_index=b, worker_index=self.worker_index, record=self._track_episodes)
        self._episodes[b] = episode
        self._pending[b] = {}
        self._agent_slots[b] = {}
        self._agent_state[b] = {}
        self._last_row[b] = {}
        self._fire_episode_event(self._on_episode_created, b)
        try:
            obs, infos = self.envs[b].reset(seed=seed)
        except Exception as err:
            raise EnvError(f"{self._sub_env_label(b)}: env.reset() raised {type(err).__name__}: {err}") from err
        if not isinstance(obs, dict):
            raise EnvError(f"{self._sub_env_label(b)}: reset() returned observations {type(obs).__name__}; a "
                           "MultiAgentEnv returns (obs_dict, infos_dict) keyed by agent id.")
        obs = self._apply_observation_fn(obs, b)
        episode.add_env_reset(obs, infos if isinstance(infos, dict) else {})
        self._obs[b] = {aid: self._preprocess(b, aid, o, "from reset()") for aid, o in obs.items()}
        self._last_row[b] = dict(self._obs[b])
        self._at_boundary[b] = True
        self._fire_episode_event(self._on_episode_start, b)

    def _agent_slot(self, b: int, aid: Any) -> AgentSlot:
        """Agent `aid` of sub-env b's episode: mapped to a module (policy_mapping_fn, once per
        agent per episode); its column is given when it first acts."""
        agent = self._agent_slots[b].get(aid)
        if agent is None:
            episode = self._episodes[b]
            pid = episode.agent_to_module_map.get(aid)
            if pid is None:
                pid = episode.agent_to_module_map[aid] = self._mapper(aid, episode, worker=self)
            agent = self._agent_slots[b][aid] = AgentSlot(b, aid, pid, self._slots[pid])
        return agent

    def _module_of(self, b: int, aid: Any) -> str:
        return self._agent_slot(b, aid).module_id

    def _apply_observation_fn(self, obs: dict, b: int) -> dict:
        fn = self._observation_fn
        if fn is None:
            return obs
        out = fn(agent_obs=obs, worker=self, base_env=self.envs, policies=self.policy_map,
                 episode=self._episodes[b])
        if not isinstance(out, dict):
            raise EnvError(f"observation_fn returned {type(out).__name__}; it must return the dict of agent "
                           "observations.")
        return out

    def _preprocess(self, b: int, aid: Any, obs: Any, where: str | None = None) -> np.ndarray:
        """Agent `aid`'s observation as its module takes it (before the filter); EnvError naming
        the sub-env, the agent and the step (`where`, default: this step) when it does not fit."""
        slot = self._agent_slot(b, aid).slot
        if slot.direct and type(obs) is np.ndarray and obs.dtype == slot.obs_dtype and \
                obs.shape == slot.obs_shape:
            # What Box envs usually return: stored as is (finiteness is checked per module batch
            # in _compute_actions).
            return obs
        pid = slot.module_id
        where = where or f"at step {self._episodes[b].env_t + 1} of its episode"
        try:
            row = np.asarray(slot.preprocessor.transform(obs), dtype=np.float32)
        except Exception as err:
            raise EnvError(f"{self._sub_env_label(b)} returned observation {obs!r:.80} for agent {aid!r} {where}, "
                           f"which policy {pid!r}'s observation space {slot.observation_space} does not fit "
                           f"({type(err).__name__}: {err}).") from err
        if row.shape != slot.preprocessor.shape:
            raise EnvError(f"{self._sub_env_label(b)} returned an observation of shape {row.shape} for agent "
                           f"{aid!r} {where}; policy {pid!r} expects {slot.preprocessor.shape} "
                           f"({slot.observation_space}).")
        if slot.float_obs and not math.isfinite(float(np.vdot(row, row))):
            raise EnvError(f"{self._sub_env_label(b)} returned a NaN or infinite observation for agent {aid!r} "
                           f"{where}; observations must be finite.")
        return row

    def _log_episode(self, episode: MultiAgentEpisode) -> None:
        """Log a finished episode: its return and length, each agent's and module's return, the
        ((policy_id, agent return), ...) of the old API's per-policy statistics, and its extras."""
        agent_returns = [(aid, episode.agent_to_module_map.get(aid), ret)
                         for aid, ret in episode.agent_episode_returns.items()]
        # (The whole episode's: sample() may have returned earlier chunks of it.)
        log_episode_returns(self.metrics, self._smoothing, episode.whole_episode_return(), episode.env_t,
                            agent_returns, per_policy=True,
                            extras=episode_extras(episode) if self._track_episodes else None)

    # ------------------------------------------------------------------ the loop

    @torch.no_grad()
    def _run(self, target: int | None, num_episodes: int | None, explore: bool, random_actions: bool,
             complete: bool) -> MultiAgentBatch:
        """Step the sub-envs until `target` env steps (agent steps with count_steps_by='agent_steps')
        are collected (then, with `complete`, on until their episodes end) or `num_episodes`
        episodes completed; the per-module batches of the completed transitions."""
        if (target is None) == (num_episodes is None):
            raise ValueError("_run(): give exactly one of target and num_episodes.")
        by_agent = self.config.count_steps_by == "agent_steps"
        active = list(range(self.num_envs if num_episodes is None else min(self.num_envs, num_episodes)))
        # Rows per column: one per env step of its sub-env, and the transition carried over.
        self._rows_planned = 2 + (-(-target // len(active)) if target is not None else 64)
        for columns in self._columns.values():
            columns.alloc(self._rows_planned, columns.C)
        # Each row's episode is kept where something reads it: on_postprocess_trajectory, the
        # fragment kept when an env fails in complete_episodes mode, replay's env-step columns.
        self._row_episodes = self._on_postprocess_trajectory is not None or complete or self._env_step_columns
        self._actors: dict[str, tuple[Any, Any]] = {}  # {module_id: (module, its NumPy actor)} (_numpy_actor)
        started = len(active) if num_episodes is not None else 0
        done_episodes = 0
        env_steps = agent_steps = 0
        check = not self.config.disable_env_checking
        progress = env_step_listener(self)  # the progress display of this process, or None
        while active:
            actions = self._compute_actions(active, explore, random_actions)
            finished = []
            for k, b in enumerate(active):
                agent_steps += len(actions[b])
                try:
                    ended = self._step_env(b, actions[b], check)
                except EnvError:
                    self._progress = env_steps + k  # the env steps an env error keeps (_with_partial_fragment)
                    raise
                if ended:
                    finished.append(b)
            self._close_transitions()
            env_steps += len(active)
            self._progress = env_steps
            self.num_env_steps_sampled_lifetime += len(active)
            if progress is not None:
                progress.on_env_steps(len(active))
            for b in finished:
                done_episodes += 1
                if num_episodes is not None and started >= num_episodes:
                    active.remove(b)
                    continue
                started += num_episodes is not None
                self._start_episode(b)
            if num_episodes is not None:
                if done_episodes >= num_episodes:
                    break
                continue
            if target is not None and (agent_steps if by_agent else env_steps) >= target:
                if not complete:
                    break
                active = [b for b in active if not self._at_boundary[b]]
        self.num_agent_steps_sampled_lifetime += agent_steps
        return self._build_batch(env_steps, agent_steps)

    def _columns_of(self, pid: str) -> ModuleColumns:
        """Module `pid`'s columns (made on its first step)."""
        columns = self._columns.get(pid)
        if columns is None:
            slot = self._slots[pid]
            extra = {Columns.EPS_ID: np.int64, Columns.T: np.int64} if self._env_step_columns else None
            columns = self._columns[pid] = ModuleColumns(
                slot.obs_shape, slot.actions.batch_shape, slot.act_dtype,
                {k: v.shape for k, v in slot.initial_state.items()}, extra, ragged=True)
            columns.alloc(self._rows_planned, 0)
            self._slot_index[pid], self._column_agents[pid] = {}, []
            self._closing[pid] = _Closing()
        return columns

    def _give_columns(self, pid: str, group: "_Acting") -> ModuleColumns:
        """Module `pid`'s columns, with a column for each agent of `group` that has none yet (a
        (sub-env, agent) slot keeps its column for the runner's lifetime)."""
        columns = self._columns_of(pid)
        if not group.new:
            return columns
        index, agents = self._slot_index[pid], self._column_agents[pid]
        for agent in group.new:
            key = (agent.env, agent.agent_id)
            c = index.get(key)
            if c is None:
                c = index[key] = len(agents)
                agents.append(key)
            agent.columns, agent.column = columns, c
        group.cols = [agent.column for agent in group.agents]
        if len(agents) > columns.C:
            columns.grow_columns(len(agents))
        return columns

    def _compute_actions(self, active: list[int], explore: bool, random_actions: bool) -> dict[int, dict]:
        """Each module acts for its acting agents in one forward pass; their rows are opened.
        {sub-env: {agent: env action}}."""
        groups: dict[str, _Acting] = {}
        for b in active:
            slots_b = self._agent_slots[b]
            for aid, row in self._obs[b].items():
                agent = slots_b.get(aid) or self._agent_slot(b, aid)
                group = groups.get(agent.module_id)
                if group is None:
                    group = groups[agent.module_id] = _Acting()
                group.agents.append(agent)
                group.rows.append(row)
                group.cols.append(agent.column)
                if agent.columns is None:
                    group.new.append(agent)
        inputs = []
        for pid, group in groups.items():
            slot = self._slots[pid]
            raw = np.array(group.rows)
            if slot.float_obs and not math.isfinite(float(np.vdot(raw, raw))):
                self._raise_nonfinite(raw, group)
            if slot.filter.is_identity:
                obs = raw if raw.dtype == np.float32 else raw.astype(np.float32)
            else:
                slot.filter.update(raw)
                obs = np.ascontiguousarray(slot.filter.apply_batch(raw, update=False), dtype=np.float32)
            state_in = None
            if slot.stateful:
                states = [self._agent_state[agent.env].get(agent.agent_id, slot.initial_state)
                          for agent in group.agents]
                state_in = {k: np.stack([st[k] for st in states]) for k in slot.initial_state}
            inputs.append((pid, group, slot, obs, state_in))
        # A MultiRLModule that runs its modules jointly (e.g. a shared encoder before every policy)
        # computes every acting module's output in one forward on {module_id: batch}; rlx's own
        # runs each module alone, below, on the NumPy fast path where it can.
        outs = joint_forward(self.module, {pid: slot.module_batch(obs, state_in) for pid, _, slot, obs, state_in
                                           in inputs}, explore) if self.module.runs_modules_jointly() else {}
        actions: dict[int, dict] = {b: {} for b in active}
        pending = self._pending
        cache = self.module.module_cache
        for pid, group, slot, obs, state_in in inputs:
            if cache is not None:
                cache.use(pid)  # policy_map_capacity: back into memory if it was swapped out
            if slot.module is not self.module[pid]:  # (a module swapped back in may be a new object)
                slot.use(self.module[pid], slot.exploration)
            out = outs.get(pid)
            numpy_actor = self._numpy_actor(slot, explore, random_actions) if out is None else None
            acted = numpy_actor(obs) if numpy_actor is not None else None  # (the NumPy path, no torch op)
            acts, logp, dist_inputs = acted if acted is not None else slot.act(
                obs, explore, random_actions, state_in=state_in, out=out)
            env_actions = slot.actions.to_env(acts)
            self._open(self._give_columns(pid, group), group, obs, acts, logp, dist_inputs, state_in)
            if self._returns_episodes:  # RLlib's episodes hold the module's actions and its outputs
                outputs = self._module_outputs
                for k, agent in enumerate(group.agents):
                    outputs[agent.env][agent.agent_id] = (acts[k].copy(), {
                        Columns.ACTION_LOGP: logp[k].copy(), Columns.ACTION_DIST_INPUTS: dist_inputs[k].copy()})
            for agent, action in zip(group.agents, env_actions):
                actions[agent.env][agent.agent_id] = action
                pending[agent.env][agent.agent_id] = agent
                agent.reward = 0.0
            if state_in is not None:
                # The state after this step is each agent's next state_in.
                for k, agent in enumerate(group.agents):
                    self._agent_state[agent.env][agent.agent_id] = {key: v[k] for key, v in slot.state_out.items()}
        return actions

    def _numpy_actor(self, slot: ModuleSlot, explore: bool, random_actions: bool) -> Any:
        """The slot's NumPy acting function (ModuleSlot.numpy_actor), made once per sample() call
        and module, when the module first acts (in memory: under policy_map_capacity its NumPy
        forward is built on the storage it has then)."""
        entry = self._actors.get(slot.module_id)
        if entry is None or entry[0] is not slot.module:
            entry = self._actors[slot.module_id] = (slot.module, slot.numpy_actor(explore, random_actions))
        return entry[1]

    def _open(self, columns: ModuleColumns, group: "_Acting", obs: np.ndarray, acts: np.ndarray, logp: np.ndarray,
              dist_inputs: np.ndarray, state_in: dict[str, np.ndarray] | None) -> None:
        """Open the rows of the agents that acted: what they saw and did, and the state before it
        (where the Learner's sequences start)."""
        cols = np.array(group.cols, np.int64)
        rows = columns.open_rows(cols)
        arrays = columns.arrays
        arrays[Columns.OBS][rows, cols] = obs
        arrays[Columns.ACTIONS][rows, cols] = acts
        arrays[Columns.ACTION_LOGP][rows, cols] = logp
        columns.set_dist_width(dist_inputs)[rows, cols] = dist_inputs
        if state_in is not None:
            for key, value in state_in.items():
                arrays[state_column(key)][rows, cols] = value
        if self._row_episodes:  # (for on_postprocess_trajectory, complete_episodes fragments, replay)
            episodes = [self._episodes[agent.env] for agent in group.agents]
            row_episodes = columns.episodes
            for r, c, episode in zip(rows.tolist(), cols.tolist(), episodes):
                row_episodes[r, c] = episode
            if self._env_step_columns:  # which env step each row acted in (lockstep replay groups by it)
                arrays[Columns.EPS_ID][rows, cols] = [episode.episode_id for episode in episodes]
                arrays[Columns.T][rows, cols] = [episode.env_t for episode in episodes]

    def _raise_nonfinite(self, raw: np.ndarray, group: "_Acting") -> None:
        """EnvError naming the first agent whose observation holds NaN or inf (an overflowing
        sum of squares alone is not an error)."""
        for k, agent in enumerate(group.agents):
            b, aid = agent.env, agent.agent_id
            if not np.isfinite(raw[k]).all():
                raise EnvError(f"{self._sub_env_label(b)} returned a NaN or infinite observation for agent {aid!r} "
                               f"(at step {self._episodes[b].env_t} of its episode): {raw[k]!r:.200}; observations "
                               "must be finite.")

    def _step_env(self, b: int, action_dict: dict, check: bool) -> bool:
        """Step sub-env b; note the transitions it completed; True when its episode ended."""
        try:
            out = self.envs[b].step(action_dict)
        except Exception as err:
            if not self.config.restart_failed_sub_environments:
                raise EnvError(f"env.step() of {self._sub_env_label(b)} raised {type(err).__name__}: {err}. With "
                               "config.fault_tolerance(restart_failed_sub_environments=True), a sub-env that does "
                               "this is rebuilt and its episode dropped instead.") from err
            self._restart_sub_env(b, err)
            return True
        if check and self._check_steps[b]:
            # Every step of each sub-env's first episode; later ones skip the check (it costs
            # about a tenth of a step).
            from rlx.env.multi_agent_env_checker import check_step_output

            check_step_output(self._sub_env_label(b), out, set(action_dict),
                              set(self._episodes[b].agent_to_module_map) | set(self._obs[b]))
        obs, rewards, terminateds, truncateds, infos = out
        episode = self._episodes[b]
        if obs and self._observation_fn is not None:
            obs = self._apply_observation_fn(obs, b)
        pending = self._pending[b]
        for aid, reward in rewards.items():
            agent = pending.get(aid)
            if agent is not None:
                agent.reward += float(reward)
        rows = {}
        slots_b = self._agent_slots[b]
        ndarray = np.ndarray
        for aid, o in obs.items():
            agent = slots_b.get(aid)
            # What Box envs usually return is stored as is (see _preprocess).
            if agent is not None and type(o) is ndarray and o.shape == agent.direct_shape and \
                    (o.dtype is agent.obs_dtype or o.dtype == agent.obs_dtype):
                rows[aid] = o
            else:
                rows[aid] = self._preprocess(b, aid, o)
        if self._returns_episodes:
            outputs, self._module_outputs[b] = self._module_outputs[b], {}
            module_actions = {aid: outputs[aid][0] if aid in outputs else a for aid, a in action_dict.items()}
            episode.add_env_step(obs, module_actions, rewards, terminateds, truncateds, infos,
                                 extra_model_outputs={aid: out[1] for aid, out in outputs.items()})
        else:
            episode.add_env_step(obs, action_dict, rewards, terminateds, truncateds, infos)
        closing = self._closing
        last_row = self._last_row[b]
        if True in terminateds.values() or True in truncateds.values():
            term, trunc = terminateds.get, truncateds.get
            all_t = bool(term(ALL_AGENTS, False))
            all_tr = bool(trunc(ALL_AGENTS, False))
            for aid in list(pending):
                done_t = bool(term(aid, False)) or all_t
                done_tr = (bool(trunc(aid, False)) or all_tr) and not done_t
                row = rows.get(aid)
                if row is not None or done_t or done_tr:
                    agent = pending.pop(aid)
                    closing[agent.module_id].add(agent, row if row is not None else last_row[aid], done_t, done_tr)
            last_row.update(rows)
            acting = {aid: row for aid, row in rows.items() if not (term(aid, False) or trunc(aid, False))}
        else:  # (most steps: nobody is done, the agents that observed complete their transitions)
            all_t = all_tr = False
            for aid, row in rows.items():
                agent = pending.pop(aid, None)
                if agent is not None:
                    completed = closing[agent.module_id]
                    completed.cols.append(agent.column)
                    completed.rewards.append(agent.reward)
                    completed.next_obs.append(row)
            last_row.update(rows)
            acting = rows
        self._obs[b] = acting
        self._at_boundary[b] = False
        if self._on_episode_step is not None:
            self._fire_episode_event(self._on_episode_step, b)
        if all_t or all_tr or not acting:
            self._check_steps[b] = False
            episode.finish(all_t, all_tr or not all_t)
            if self._returns_episodes:
                self._done_episodes.append(episode)
            self._fire_episode_end(b)
            self._log_episode(episode)
            self._at_boundary[b] = True
            return True
        return False

    def _close_transitions(self) -> None:
        """Close the rows of the transitions completed by this round of env steps, per module at once."""
        for pid, completed in self._closing.items():
            if completed.cols:
                self._columns[pid].close_rows(np.array(completed.cols, np.int64), np.array(completed.next_obs),
                                              completed.rewards, completed.flags(completed.terminated_at),
                                              completed.flags(completed.truncated_at))
                completed.clear()

    def _restart_sub_env(self, b: int, err: BaseException) -> None:
        """Replace sub-env b, whose step() raised, by a new one (restart_failed_sub_environments).
        Its episode is dropped: not logged, its agents' open transitions never complete, and their
        last rows end as truncated."""
        super()._restart_sub_env(b, err)
        for agent in self._pending[b].values():
            agent.drop_open_row()
        self._pending[b] = {}
        for pid, columns in self._columns.items():
            cols = [c for c, (env_index, _) in enumerate(self._column_agents[pid]) if env_index == b]
            rows, cols_done = columns.last_closed_rows(cols)
            columns.arrays[Columns.TRUNCATEDS][rows, cols_done] = True
        self._at_boundary[b] = True
