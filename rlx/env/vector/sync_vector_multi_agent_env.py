"""SyncVectorMultiAgentEnv: MultiAgentEnvs stepped one after another in this process."""
from __future__ import annotations

import copy as _copy
from typing import Any, Callable, Iterable, Sequence

import gymnasium as gym
import numpy as np

from rlx.env.vector.vector_multi_agent_env import ArrayType, VectorMultiAgentEnv

__all__ = ["SyncVectorMultiAgentEnv"]

_AUTORESET_MODES = ("next_step",)


def _agent_spaces(env: Any, kind: str) -> dict:
    """{agent_id: space} of one MultiAgentEnv: its `<kind>_spaces`, else its Dict `<kind>_space`,
    else `get_<kind>_space(aid)` for each possible agent."""
    base = getattr(env, "unwrapped", env)
    spaces = getattr(base, f"{kind}_spaces", None)
    if spaces:
        return dict(spaces)
    space = getattr(base, f"{kind}_space", None)
    if isinstance(space, gym.spaces.Dict):
        return dict(space.spaces)
    agents = list(getattr(base, "possible_agents", None) or getattr(base, "agents", None) or [])
    getter = getattr(base, f"get_{kind}_space", None)
    if agents and getter is not None:
        return {aid: getter(aid) for aid in agents}
    raise ValueError(
        f"{type(base).__name__} does not say its per-agent {kind} spaces: give it `{kind}_spaces` "
        f"({{agent_id: space}}), a Dict `{kind}_space` keyed by agent id, or `possible_agents`."
    )


class SyncVectorMultiAgentEnv(VectorMultiAgentEnv):
    """Steps `len(env_fns)` MultiAgentEnvs sequentially (RLlib's `SyncVectorMultiAgentEnv`).

    Args:
        env_fns: callables that each build one sub-env.
        copy: return deep copies of the observations (so later steps cannot change them).
        autoreset_mode: "next_step" (the only mode): a sub-env whose episode ended
            (`terminateds["__all__"]` or `truncateds["__all__"]`) is reset by the next
            `step()` call, which returns its reset observations and zero rewards instead of
            stepping it (its action in that call is ignored).
    """

    envs: list[Any]

    def __init__(self, env_fns: Iterable[Callable[[], Any]], copy: bool = True,
                 autoreset_mode: str = "next_step"):
        super().__init__()
        if autoreset_mode not in _AUTORESET_MODES:
            raise ValueError(f"autoreset_mode={autoreset_mode!r} is not supported; use one of {_AUTORESET_MODES}.")
        self.env_fns = list(env_fns)
        if not self.env_fns:
            raise ValueError("SyncVectorMultiAgentEnv needs at least one env_fn.")
        self.copy = copy
        self.autoreset_mode = autoreset_mode
        self.envs = [fn() for fn in self.env_fns]
        self.num_envs = len(self.envs)
        first = self.envs[0]
        self.metadata = dict(getattr(first, "metadata", {}) or {})
        self.metadata["autoreset_mode"] = autoreset_mode
        self.render_mode = getattr(first, "render_mode", None)
        self.single_observation_spaces = _agent_spaces(first, "observation")
        self.single_action_spaces = _agent_spaces(first, "action")
        self.single_observation_space = gym.spaces.Dict(self.single_observation_spaces)
        self.single_action_space = gym.spaces.Dict(self.single_action_spaces)
        self.observation_space = self.single_observation_space
        self.action_space = self.single_action_space
        self._observations: list[dict] = [{} for _ in range(self.num_envs)]
        self._rewards: list[dict] = [{} for _ in range(self.num_envs)]
        self._terminateds: list[dict] = [{} for _ in range(self.num_envs)]
        self._truncateds: list[dict] = [{} for _ in range(self.num_envs)]
        self._infos: list[dict] = [{} for _ in range(self.num_envs)]
        self._autoreset = np.zeros(self.num_envs, dtype=bool)

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, (int, np.integer)):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"Got {len(seeds)} seeds for {self.num_envs} sub-envs; give one per sub-env, "
                             "or one int (sub-env i gets seed + i).")
        return seeds

    def _out(self, value: list[dict]) -> list[dict]:
        return _copy.deepcopy(value) if self.copy else value

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict | None = None) -> tuple[ArrayType, ArrayType]:
        """Reset every sub-env (sub-env i with `seed + i` for an int seed)."""
        for i, (env, s) in enumerate(zip(self.envs, self._seeds(seed))):
            self._observations[i], self._infos[i] = env.reset(seed=s, options=options)
        self._autoreset[:] = False
        return self._out(self._observations), list(self._infos)

    def step(self, actions: Sequence[dict]) -> tuple[ArrayType, ArrayType, ArrayType, ArrayType, ArrayType]:
        """Step sub-env i with `actions[i]` (or reset it, if its episode ended last step)."""
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"step() got {len(actions)} action dicts for {self.num_envs} sub-envs.")
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            if self._autoreset[i]:
                self._observations[i], self._infos[i] = env.reset()
                agents = list(self._observations[i])
                self._rewards[i] = {aid: 0.0 for aid in agents}
                self._terminateds[i] = {**{aid: False for aid in agents}, "__all__": False}
                self._truncateds[i] = {**{aid: False for aid in agents}, "__all__": False}
            else:
                obs, rew, term, trunc, info = env.step(action)
                self._observations[i], self._rewards[i], self._infos[i] = obs, rew, info
                self._terminateds[i], self._truncateds[i] = term, trunc
        self._autoreset = np.array(
            [bool(t.get("__all__", False)) or bool(tr.get("__all__", False))
             for t, tr in zip(self._terminateds, self._truncateds)], dtype=bool)
        return (self._out(self._observations), [dict(r) for r in self._rewards],
                [dict(t) for t in self._terminateds], [dict(t) for t in self._truncateds], list(self._infos))

    def render(self) -> tuple[Any, ...]:
        """The rendered frame of every sub-env."""
        return tuple(env.render() for env in self.envs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """`getattr(env, name)(*args, **kwargs)` on every sub-env (or the attribute itself,
        when it is not callable)."""
        out = []
        for env in self.envs:
            getter = getattr(env, "get_wrapper_attr", None)
            attr = getter(name) if getter is not None else getattr(env, name)
            out.append(attr(*args, **kwargs) if callable(attr) else attr)
        return tuple(out)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """The attribute `name` of every sub-env."""
        return tuple(getattr(env, name) for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        for env in getattr(self, "envs", None) or []:
            env.close()

    @property
    def np_random_seed(self) -> tuple[Any, ...]:
        """The seed of every sub-env's random generator."""
        return self.get_attr("np_random_seed")

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """Every sub-env's random generator."""
        return self.get_attr("np_random")
