"""RemoteFragment: what a remote EnvRunner answers in place of a sampled fragment.

An algorithm may handle each asynchronous fragment on the runner that sampled it (the config's
`runner_fragment_hook`, see rlx.env.runner_group.calls.AsyncSampleCall): IMPALA and APPO put it
in Ray's object store, A3C turns it into gradients, Ape-X adds it to a replay shard. The driver
then gets a RemoteFragment: the fragment's env and agent step counts (so sampling is counted as
for a batch) and the payload the hook made (an ObjectRef, gradients, a replay receipt), never
the fragment's arrays.
"""
from __future__ import annotations

from typing import Any


class RemoteFragment:
    """A fragment handled on its runner: its step counts and the hook's `payload`.

    It answers `env_steps()`, `agent_steps()` and `as_multi_agent()` (itself) like a batch, so
    the step counting of runner groups and Algorithms takes it as it takes a sampled batch.
    """

    __slots__ = ("payload", "_env_steps", "_agent_steps")

    def __init__(self, payload: Any, env_steps: int, agent_steps: int):
        self.payload = payload
        self._env_steps = int(env_steps)
        self._agent_steps = int(agent_steps)

    def env_steps(self) -> int:
        """Env steps of the fragment."""
        return self._env_steps

    def agent_steps(self) -> int:
        """Agent steps of the fragment."""
        return self._agent_steps

    def as_multi_agent(self, module_id: str | None = None) -> "RemoteFragment":
        """Itself: a RemoteFragment carries the step counts a batch's multi-agent view gives."""
        return self

    def __getstate__(self) -> tuple[Any, int, int]:
        return self.payload, self._env_steps, self._agent_steps

    def __setstate__(self, state: tuple[Any, int, int]) -> None:
        self.payload, self._env_steps, self._agent_steps = state

    def __repr__(self) -> str:
        return f"RemoteFragment({type(self.payload).__name__}, env_steps={self._env_steps}, " \
               f"agent_steps={self._agent_steps})"
