"""Episode chunks from RLlink EPISODES messages, checked, into the external episode book.

A client that acts itself (local inference) sends its episodes as SingleAgentEpisode state
dicts, in chunks: an episode still running when a message goes out continues, with the
same id, in a later message. `read_chunks` checks a message's episodes against the
server's spaces (nothing reaches the book from a message that has a bad part);
`ChunkWriter.write` records them with the episode commands an HTTP client's REPORT uses
(start, log_action, log_returns, end), so they become training rows on the one external
path: EpisodeBook -> flat SampleBatch -> rlx.offline.training_batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.env.external import codec
from rlx.env.external.codec import RequestError
from rlx.env.external.episodes import SOLE_AGENT
from rlx.env.single_agent_episode import SingleAgentEpisode

#: Episodes one message may hold.
MAX_EPISODES_PER_MESSAGE = 100_000


@dataclass
class Chunk:
    """One episode's steps of a message, checked: env observations (one more than actions),
    actions, rewards, the behaviour policy's log-probs and distribution inputs (per step, None
    when not sent) and how the chunk ends."""

    episode_id: str
    observations: list[Any]
    actions: list[Any]
    rewards: list[float]
    logps: list[float | None]
    dist_inputs: list[np.ndarray | None]
    terminated: bool
    truncated: bool

    def __len__(self) -> int:
        return len(self.actions)


def read_chunks(fields: dict, observation_space: Any, action_space: Any, dist_size: int | None) -> list[Chunk]:
    """The checked chunks of an EPISODES message's fields; RequestError/EpisodeStateError naming
    the first bad part."""
    states = fields.get("episodes")
    if not isinstance(states, list):
        raise RequestError(400, f"an EPISODES message needs an 'episodes' list of episode states, got "
                                f"{codec._short(states)}.")
    if len(states) > MAX_EPISODES_PER_MESSAGE:
        raise RequestError(400, f"the message holds {len(states)} episodes; at most {MAX_EPISODES_PER_MESSAGE}.")
    chunks, seen = [], set()
    for i, state in enumerate(states):
        episode = SingleAgentEpisode.from_state(state)
        key = codec.episode_id(episode.id_)
        if key in seen:
            raise RequestError(400, f"episodes[{i}]: episode {key!r} appears twice in one message.")
        seen.add(key)
        chunks.append(_read_chunk(episode, key, observation_space, action_space, dist_size))
    return chunks


def _read_chunk(episode: Any, key: str, observation_space: Any, action_space: Any, dist_size: int | None) -> Chunk:
    start = int(episode._lookback)  # lookback steps (already sent in an earlier message)
    what = f"episode {key!r}"
    observations = _values(episode._observations[start:], observation_space, f"{what} observation", bounds=False)
    actions = _values(episode._actions[start:], action_space, f"{what} action", bounds=True)
    rewards = [codec.reward(codec.to_jsonable(r)) for r in episode._rewards[start:]]
    extra = episode._extra_model_outputs
    n = len(actions)
    logps_in = extra.get(Columns.ACTION_LOGP, [None] * len(episode._actions))[start:]
    dists_in = extra.get(Columns.ACTION_DIST_INPUTS, [None] * len(episode._actions))[start:]
    logps: list[float | None] = [None] * n
    dists: list[np.ndarray | None] = [None] * n
    known = [t for t in range(n) if logps_in[t] is not None and dists_in[t] is not None]
    if known:  # steps without both: the learner computes them with the current policy
        logp = _numbers([logps_in[t] for t in known], f"{what} action_logp", (1,), in_float32=True).reshape(-1)
        bad = np.flatnonzero(logp > 1e-4)
        if bad.size:
            raise RequestError(422, f"{what} step {known[bad[0]]}: action_logp must be a log-probability (<= 0), "
                                    f"got {logp[bad[0]]}.")
        dist = _numbers([dists_in[t] for t in known], f"{what} action_dist_inputs",
                        None if dist_size is None else (dist_size,), in_float32=True)
        for i, t in enumerate(known):
            logps[t], dists[t] = float(logp[i]), dist[i].reshape(-1)
    return Chunk(key, observations, actions, rewards, logps, dists, bool(episode.is_terminated),
                 bool(episode.is_truncated))


def _values(items: list[Any], space: Any, what: str, bounds: bool) -> list[Any]:
    """Checked values of `space`: Box and Discrete ones checked as one array, others one by one."""
    import gymnasium as gym

    if items and isinstance(space, gym.spaces.Box):
        array = _numbers(items, what, space.shape)
        if bounds and not (np.all(array >= space.low) and np.all(array <= space.high)):
            first = int(np.flatnonzero(~((array >= space.low) & (array <= space.high)).reshape(len(items), -1)
                                       .all(axis=1))[0])
            raise RequestError(422, f"{what} {first} is outside the bounds of {space}.")
        return list(codec.cast(array, space.dtype, f"{what}s"))
    if items and isinstance(space, gym.spaces.Discrete) and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in items):
        ints = np.asarray(items, np.int64)
        outside = np.flatnonzero((ints < space.start) | (ints >= space.start + space.n))
        if outside.size:
            raise RequestError(422, f"{what} {int(outside[0])} ({ints[outside[0]]}) is outside {space}.")
        return [int(v) for v in ints]
    return [codec.from_space(codec.to_jsonable(v), space, f"{what} {t}", check_bounds=bounds)
            for t, v in enumerate(items)]


def _numbers(items: list[Any], what: str, shape: tuple | None, in_float32: bool = False) -> np.ndarray:
    """`items` as one finite float array of shape [len(items), *shape] (`in_float32`: finite
    when cast to float32 too)."""
    try:
        array = np.asarray(items, dtype=np.float64)
    except (ValueError, TypeError, OverflowError):
        raise RequestError(422, f"{what}s must be numbers of one shape{'' if shape is None else f' {shape}'}.") \
            from None
    if shape is not None and array.shape[1:] != tuple(shape) and not (shape == (1,) and array.ndim == 1):
        raise RequestError(422, f"{what}s have shape {array.shape[1:]}; expected {tuple(shape)}.")
    ok = np.isfinite(array)
    if in_float32:  # batches hold these values as float32, where 1e39 would become inf
        ok &= np.abs(array) <= codec.FLOAT32_MAX
    finite = ok.reshape(len(items), -1).all(axis=1)
    if not finite.all():
        raise RequestError(422, f"{what} {int(np.flatnonzero(~finite)[0])} holds NaN or infinite values"
                                f"{' (in float32)' if in_float32 else ''}.")
    return array


class ChunkWriter:
    """Records checked chunks with an EpisodeBackend (rlx.env.external.reader): each becomes
    complete rows in the backend's book."""

    def __init__(self, backend: Any):
        self.backend = backend
        self.book = backend.book

    def write(self, chunk: Chunk) -> int:
        """Record one chunk; returns the rows it completed (its steps)."""
        backend, key = self.backend, chunk.episode_id
        try:
            self.book.get(key)
        except RequestError as err:
            if err.status != 404:  # 409: the episode has ended already
                raise
            backend.start_episode(key)  # its first chunk (or the first since the episode expired)
        for t in range(len(chunk)):
            backend.log_action(key, chunk.observations[t], chunk.actions[t], chunk.logps[t], chunk.dist_inputs[t])
            backend.log_returns(key, chunk.rewards[t])
        last = chunk.observations[-1]
        if chunk.terminated or chunk.truncated:
            backend.end_episode(key, last, truncated=chunk.truncated and not chunk.terminated)
        elif len(chunk):
            # The episode goes on in a later message: complete this chunk's last step with the
            # observation it led to now, so every step sent trains in the next batch.
            self.book.act(key, {SOLE_AGENT: backend.policy.prepare(last)}, {})
        return len(chunk)

