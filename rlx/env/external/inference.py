"""Server-side acting for external episodes: one copy of the module, batched across clients.

Requests that arrive while a forward pass runs wait and are answered together by the next
pass (the first waiting request runs it), so 8 clients cost about one batched forward per
round, not 8. The copy is refreshed from the training module by `sync_from()` on the
driver thread, between forward passes, so an update never changes weights mid-pass.
"""
from __future__ import annotations

import copy

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rlx.core.columns import Columns
from rlx.env.policy_view import Policy
from rlx.utils.errors import NotSupportedYetError


@dataclass
class Decision:
    """One observation's answer: the env action and the behaviour columns of its row."""

    env_action: Any
    logp: float
    dist_inputs: np.ndarray


@dataclass
class _Request:
    obs: np.ndarray
    explore: bool
    event: threading.Event = field(default_factory=threading.Event)
    decision: Decision | None = None
    error: BaseException | None = None


class BatchedPolicy:
    """Acting with a private copy of an EnvRunner's module (its preprocessor, filter, action
    space and exploration), for requests from many threads at once.

    Args:
        runner: the SingleAgentEnvRunner whose module, spaces and preprocessing to use.
        explore: whether get_action samples (True) or takes the greedy action.
    """

    def __init__(self, runner: Any, explore: bool = True):
        slot = getattr(runner, "slot", runner)  # a single-agent runner's slot, or a multi-agent runner's
        if getattr(slot.module, "is_stateful", lambda: False)():
            raise NotSupportedYetError("a recurrent module behind a policy server",
                                       "external episodes are acted on one step at a time without state",
                                       fix="Use a feed-forward model (no use_lstm/use_attention) for now.")
        self.observation_space = slot.observation_space
        self.action_space = slot.action_space
        self._source = slot.module
        self.module = copy.deepcopy(slot.module).eval()
        self.steps = 0  # env steps acted on, for exploration schedules
        start = int(slot.num_env_steps_sampled_lifetime)
        generator = torch.Generator().manual_seed(int(slot.config.seed or 0) + 1013)
        self.policy = Policy.from_slot(slot.acting_copy(self.module, lambda: start + self.steps, generator))
        self.adapter = slot.adapter(False, False)
        self.explore = bool(explore)
        self.version = 0
        self._weights_cache: tuple[int, bytes] | None = None
        self._model_lock = threading.Lock()
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._busy = False
        probe = self.act(self.prepare(runner.observation_space.sample()), explore=False)
        #: Numbers in one row of action_dist_inputs (what a local-inference client must send).
        self.dist_size = int(probe.dist_inputs.size)

    def prepare(self, obs: Any) -> np.ndarray:
        """An env observation as the module's input row (preprocessed and filtered)."""
        return self.policy._prepare([obs])[0]

    def row_action(self, env_action: Any) -> np.ndarray:
        """An env action in the form offline batches hold it (rlx.offline.spaces): Discrete from
        0, Box in the env's bounds, Tuple/Dict flattened."""
        adapter = self.adapter
        if adapter.structured:
            return adapter.from_env([env_action])[0]
        if adapter.is_discrete:
            return np.asarray(int(env_action) - adapter.discrete_start, np.int64)
        return np.asarray(env_action, adapter.batch_dtype).reshape(adapter.batch_shape)

    def act(self, obs_row: np.ndarray, explore: bool | None = None) -> Decision:
        """The action for one prepared observation, computed in a batch with whatever other
        requests are waiting."""
        return self.act_rows([obs_row], explore)[0]

    def act_rows(self, obs_rows: list[np.ndarray], explore: bool | None = None) -> list[Decision]:
        """The actions for prepared observations (one request's agents), computed in one batch
        with whatever other requests are waiting."""
        explore = self.explore if explore is None else bool(explore)
        requests = [_Request(row, explore) for row in obs_rows]
        with self._cond:
            self._queue.extend(requests)
            while any(r.decision is None and r.error is None for r in requests):
                if self._busy:
                    self._cond.wait()
                    continue
                self._busy = True
                batch, self._queue = self._queue, []
                self._cond.release()
                try:
                    self._run(batch)
                finally:
                    self._cond.acquire()
                    self._busy = False
                    self._cond.notify_all()
        for r in requests:
            if r.error is not None:
                raise r.error
        return [r.decision for r in requests]  # type: ignore[misc]

    def act_many(self, obs_rows: list[np.ndarray], explore: bool) -> list[Decision]:
        """Actions for several prepared observations in one forward pass."""
        requests = [_Request(row, bool(explore)) for row in obs_rows]
        self._run(requests)
        for r in requests:
            if r.error is not None:
                raise r.error
        return [r.decision for r in requests]  # type: ignore[misc]

    def _run(self, batch: list[_Request]) -> None:
        try:
            with self._model_lock:
                for explore in (True, False):
                    part = [r for r in batch if r.explore == explore]
                    if not part:
                        continue
                    obs = np.stack([r.obs for r in part])
                    actions, extra = self.policy._act(obs, explore)
                    env_actions = self.policy._to_env(actions, None, None)
                    logp = extra[Columns.ACTION_LOGP]
                    dist = extra[Columns.ACTION_DIST_INPUTS]
                    for i, r in enumerate(part):
                        r.decision = Decision(env_actions[i], float(logp[i]), np.asarray(dist[i], np.float32))
                self.steps += len(batch)
        except BaseException as err:  # every waiting request learns of it
            for r in batch:
                r.error = err

    def sync_from(self, module: Any = None) -> None:
        """Copy the training module's current weights into the acting copy."""
        source = self._source if module is None else module
        state = source.state_dict()
        with self._model_lock:
            self.module.load_state_dict(state)
            self.version += 1

    def weights_bytes(self) -> tuple[int, bytes]:
        """(version, safetensors bytes) of the acting copy's weights."""
        from safetensors.numpy import save

        cached = self._weights_cache
        if cached is not None and cached[0] == self.version:
            return cached
        with self._model_lock:
            version = self.version
            arrays = {k: np.ascontiguousarray(v.detach().cpu().numpy()) for k, v in self.module.state_dict().items()}
        self._weights_cache = (version, save(arrays))
        return self._weights_cache


def load_weights_bytes(module: Any, data: bytes) -> None:
    """Load safetensors bytes (from `BatchedPolicy.weights_bytes`) into `module`."""
    from safetensors.numpy import load

    arrays = load(data)
    module.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in arrays.items()})




class PolicySet:
    """The acting copies of a multi-agent EnvRunner's policies: one BatchedPolicy per module,
    refreshed together, with one weights version for all.

    Args:
        runner: the MultiAgentEnvRunner (its `slots` give each policy's module and spaces).
        explore: whether get_action samples (True) or takes the greedy action.
    """

    def __init__(self, runner: Any, explore: bool = True):
        self._runner = runner
        self.explore = bool(explore)
        self.policies: dict[str, BatchedPolicy] = {pid: BatchedPolicy(slot, explore=self.explore)
                                                   for pid, slot in runner.slots.items()}
        self.version = 0
        self._weights_cache: tuple[int, bytes] | None = None
        self._lock = threading.Lock()

    def get(self, policy_id: str) -> BatchedPolicy:
        """The acting copy of policy `policy_id` (built on first use for a policy added since)."""
        policy = self.policies.get(policy_id)
        if policy is None:
            with self._lock:
                policy = self.policies.get(policy_id)
                if policy is None:
                    policy = self.policies[policy_id] = BatchedPolicy(self._runner.slots[policy_id],
                                                                      explore=self.explore)
        return policy

    def sync_from(self, module: Any = None) -> None:
        """Copy the training modules' current weights into the acting copies."""
        for pid, policy in list(self.policies.items()):
            if module is None:
                policy.sync_from()
            elif pid in module:
                policy.sync_from(module[pid])
        self.version += 1

    def weights_bytes(self) -> tuple[int, bytes]:
        """(version, safetensors bytes) of every policy's weights, named '<policy id>/<parameter>'."""
        from safetensors.numpy import save

        cached = self._weights_cache
        if cached is not None and cached[0] == self.version:
            return cached
        version = self.version
        arrays = {}
        for pid, policy in list(self.policies.items()):
            with policy._model_lock:
                for k, v in policy.module.state_dict().items():
                    arrays[f"{pid}/{k}"] = np.ascontiguousarray(v.detach().cpu().numpy())
        self._weights_cache = (version, save(arrays))
        return self._weights_cache


def split_policy_weights(data: bytes) -> dict[str, dict[str, np.ndarray]]:
    """{policy id: {parameter: array}} of `PolicySet.weights_bytes` (parameter names hold no '/')."""
    from safetensors.numpy import load

    out: dict[str, dict[str, np.ndarray]] = {}
    for name, array in load(data).items():
        pid, _, param = name.rpartition("/")
        out.setdefault(pid, {})[param] = array
    return out


def load_state(module: Any, arrays: dict[str, np.ndarray]) -> None:
    """Load a {parameter: array} state (from the safetensors weights) into `module`."""
    module.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in arrays.items()})
