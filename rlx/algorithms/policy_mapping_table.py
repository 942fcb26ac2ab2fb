"""A policy_mapping_fn as a table of agent -> policy, for checkpoints of lambda mappings.

The docs write `policy_mapping_fn` as a lambda, which a checkpoint cannot store (it has no
import path). A checkpoint then stores, in its place, the policy the function picks for each
agent of the env (`mapping_table_for`), and loading rebuilds that table as a
`PolicyMappingTable`: a checkpoint of a lambda mapping evaluates, serves and trains on as it
was trained.
"""
from __future__ import annotations

import logging
import weakref
from typing import Any, Iterable, Mapping

from rlx.core.rl_module.agent_mapping import AgentMapper
from rlx.env.multi_agent_episode import MultiAgentEpisode
from rlx.utils.checkpoint_recipes import set_recipe
from rlx.utils.errors import ConfigError

logger = logging.getLogger(__name__)

#: Episodes the mapping function is asked about per agent when the table is made: a mapping
#: that depends on the episode shows it by answering differently.
_PROBES = 8
#: Mapping functions warned about already (a run saving every iteration warns once).
_WARNED: "weakref.WeakSet[Any]" = weakref.WeakSet()


class PolicyMappingTable:
    """A policy_mapping_fn looking agents up in a fixed table {agent_id: policy_id}.

    Called as RLlib calls a mapping function, `table(agent_id, episode, worker=None, **kw)`.
    An agent id is looked up as it is, then by its string form (agent ids that travelled
    through JSON arrive as strings). An agent not in the table raises a ConfigError that says
    how to give the mapping function back.
    """

    def __init__(self, pairs: Mapping[Any, str] | Iterable[Any]):
        items = pairs.items() if isinstance(pairs, Mapping) else pairs
        table: dict[Any, str] = {}
        for item in items:
            if not isinstance(item, (list, tuple)) or len(item) != 2 or not isinstance(item[1], str):
                raise ConfigError(f"PolicyMappingTable takes [agent_id, policy_id] pairs; got {item!r:.80}.")
            agent_id, policy_id = item
            try:
                hash(agent_id)
            except TypeError:
                raise ConfigError(f"PolicyMappingTable: agent id {agent_id!r:.80} is not hashable.") from None
            table[agent_id] = policy_id
        self.table = table
        self._by_str = {str(agent_id): policy_id for agent_id, policy_id in table.items()}
        set_recipe(self, "policy_mapping_table", [[agent_id, policy_id] for agent_id, policy_id in table.items()])

    def __call__(self, agent_id: Any, episode: Any = None, worker: Any = None, **kwargs: Any) -> str:
        """The policy of `agent_id`."""
        if agent_id in self.table:
            return self.table[agent_id]
        if str(agent_id) in self._by_str:
            return self._by_str[str(agent_id)]
        known = ", ".join(f"{a!r} -> {p!r}" for a, p in self.table.items()) or "none"
        raise ConfigError(
            f"Agent {agent_id!r} is not in this policy mapping table ({known}). A checkpoint whose "
            "policy_mapping_fn was a lambda or local function stores the policy it picked for each agent the env "
            "had when saving. Give a mapping function for the other agents when loading: "
            "Algorithm.from_checkpoint(path, policy_mapping_fn=fn), or for rlx evaluate / rlx serve "
            "--config '{\"policy_mapping_fn\": \"my_module:fn\"}' (a module-level function)."
        )

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, PolicyMappingTable) and other.table == self.table

    def __hash__(self) -> int:
        return hash(tuple(sorted(map(str, self.table.items()))))

    def __repr__(self) -> str:
        return f"PolicyMappingTable({self.table!r})"


def mapping_table_for(algo: Any) -> PolicyMappingTable | None:
    """The table of what `algo.config.policy_mapping_fn` picks for each agent of the local
    EnvRunner's env; None when there is no env to take the agents from or the function fails
    outside an episode. A mapping that answers differently from episode to episode is stored
    with its first answer, and a warning names the agents it affects."""
    runner = getattr(algo, "env_runner", None)
    envs = getattr(runner, "envs", None) or []
    if not envs:
        return None
    agents = _agent_ids(envs[0])
    if not agents:
        return None
    try:
        mapper = AgentMapper(algo.config.policy_mapping_fn, list(algo.policy_ids))
        answers: dict[Any, list[str]] = {agent_id: [] for agent_id in agents}
        for _ in range(_PROBES):
            probe = MultiAgentEpisode(env_index=0, worker_index=0)
            for agent_id in agents:
                answers[agent_id].append(mapper(agent_id, probe, worker=runner))
    except Exception as err:  # the user's function, asked outside a real episode
        logger.warning("policy_mapping_fn cannot be stored in the checkpoint (it has no import path), and asking it "
                       "for the env's agents failed (%s: %s); load the checkpoint with "
                       "Algorithm.from_checkpoint(path, policy_mapping_fn=...).", type(err).__name__, err)
        return None
    varying = [agent_id for agent_id, picked in answers.items() if len(set(picked)) > 1]
    if varying and _first_warning(algo.config.policy_mapping_fn):
        logger.warning("policy_mapping_fn has no import path, so the checkpoint stores one policy per agent; it maps "
                       "agents %s to different policies in different episodes, and the checkpoint keeps the first. "
                       "Define it at module level to store the function itself.", ", ".join(map(repr, varying)))
    return PolicyMappingTable([[agent_id, picked[0]] for agent_id, picked in answers.items()])


def _first_warning(fn: Any) -> bool:
    """Whether this is the first warning about mapping function `fn` in this process."""
    try:
        if fn in _WARNED:
            return False
        _WARNED.add(fn)
    except TypeError:  # not weakly referenceable: warn every time
        pass
    return True


def _agent_ids(env: Any) -> list[Any]:
    """The env's agents, from what it declares (it is not reset: its episode may be running)."""
    agents = list(getattr(env, "possible_agents", None) or [])
    if not agents and hasattr(env, "get_agent_ids"):
        agents = sorted(env.get_agent_ids(), key=str)
    return agents or list(getattr(env, "agents", None) or [])
