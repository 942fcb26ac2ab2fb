"""SingleAgentEpisode / MultiAgentEpisode at RLlib 2.60's public API: chunks (cut,
concat_episode, t_started), lookback buffers and their indexing, to_numpy, slicing, state."""
from __future__ import annotations

import numpy as np
import pytest


def _episode(steps: int = 5, **kwargs):
    """Observations 0..steps, actions 10+i, rewards 0.5*i, one extra output per step."""
    from rlx.env.single_agent_episode import SingleAgentEpisode

    return SingleAgentEpisode(
        observations=list(range(steps + 1)), actions=[10 + i for i in range(steps)],
        rewards=[0.5 * i for i in range(steps)], infos=[{"i": i} for i in range(steps + 1)],
        extra_model_outputs={"action_logp": [-float(i) for i in range(steps)]}, **kwargs)


def test_constructor_data_is_lookback_by_default_as_in_rllib():
    auto = _episode(5)
    assert len(auto) == 0 and auto.get_observations() == [5]
    assert auto.get_actions(-1, neg_index_as_lookback=True) == 14
    explicit = _episode(5, len_lookback_buffer=2, t_started=7)
    assert len(explicit) == 3 and explicit.t_started == 7 and explicit.t == 10
    assert explicit.get_observations() == [2, 3, 4, 5] and explicit.get_actions() == [12, 13, 14]
    assert explicit.get_return() == pytest.approx(0.5 * (2 + 3 + 4))


def test_indexing_counts_from_the_chunk_start_and_reaches_back_with_neg_index_as_lookback():
    ep = _episode(5, len_lookback_buffer=2)
    assert ep.get_observations(0) == 2 and ep.get_observations(-1) == 5
    assert ep.get_actions(-1, neg_index_as_lookback=True) == 11
    assert ep.get_actions(slice(-2, 1), neg_index_as_lookback=True) == [10, 11, 12]
    assert ep.get_rewards([0, -1]) == [1.0, 2.0]
    assert ep.get_infos(-1) == {"i": 5}
    assert ep.get_extra_model_outputs("action_logp", -1) == -4.0
    assert ep.get_extra_model_outputs("action_logp", -2, neg_index_as_lookback=True) == -0.0
    # Outside the data: `fill` pads, without it the index is an error.
    assert ep.get_actions(slice(-4, 1), neg_index_as_lookback=True, fill=0) == [0, 0, 10, 11, 12]
    assert ep.get_rewards(5, fill=0.0) == 0.0
    with pytest.raises(IndexError, match="out of range"):
        ep.get_actions(-3, neg_index_as_lookback=True)


def test_cut_keeps_the_id_and_a_lookback_and_concat_episode_joins_chunks():
    from rlx.env.single_agent_episode import EpisodeError, SingleAgentEpisode

    ep = SingleAgentEpisode("ep1")
    ep.add_env_reset(np.zeros(2))
    for i in range(4):
        ep.add_env_step(np.full(2, i + 1.0), i, 1.0, extra_model_outputs={"v": i})
    successor = ep.cut(len_lookback_buffer=2)
    assert successor.id_ == "ep1" and len(successor) == 0 and successor.t_started == 4 == ep.t
    assert successor.get_actions(slice(-2, None), neg_index_as_lookback=True) == [2, 3]
    np.testing.assert_array_equal(successor.get_observations(0), ep.get_observations(-1))
    successor.add_env_step(np.full(2, 5.0), 4, 2.0, terminated=True, extra_model_outputs={"v": 4})
    assert successor.get_return() == 2.0  # a chunk's return is its own
    ep.concat_episode(successor)
    assert len(ep) == 5 and ep.is_terminated and ep.get_return() == 6.0
    assert ep.get_actions() == [0, 1, 2, 3, 4] and ep.get_extra_model_outputs("v") == [0, 1, 2, 3, 4]
    with pytest.raises(EpisodeError, match="done"):
        ep.cut()
    other = SingleAgentEpisode("other")
    other.add_env_reset(0)
    with pytest.raises(EpisodeError, match="not a chunk"):
        SingleAgentEpisode("ep2", observations=[0, 1], actions=[0], rewards=[0.0],
                           len_lookback_buffer=0).concat_episode(other)


def test_concat_episode_refuses_chunks_out_of_order():
    from rlx.env.single_agent_episode import EpisodeError

    ep = _episode(3, len_lookback_buffer=0)
    later = ep.cut()
    later.add_env_step(9, 0, 0.0)
    later_still = later.cut()
    with pytest.raises(EpisodeError, match="in order"):
        ep.concat_episode(later_still)


def test_to_numpy_slices_and_state_round_trip():
    from rlx.env.single_agent_episode import EpisodeError, SingleAgentEpisode

    ep = SingleAgentEpisode(observations=[np.full(3, i, np.float32) for i in range(5)], actions=[0, 1, 0, 1],
                            rewards=[1.0, 2.0, 3.0, 4.0], len_lookback_buffer=0)
    part = ep[1:3]
    assert len(part) == 2 and part.t_started == 1 and part.get_actions() == [1, 0] and not part.is_done
    assert ep.slice(slice(1, 3), len_lookback_buffer=1).get_actions(-1, neg_index_as_lookback=True) == 0
    assert ep[2:].get_return() == 7.0
    ep.to_numpy()
    assert ep.is_numpy and ep.get_observations().shape == (5, 3) and ep.get_rewards().dtype == np.float64
    assert ep.get_actions(slice(0, 2)).tolist() == [0, 1]
    with pytest.raises(EpisodeError, match="to_numpy"):
        ep.add_env_step(np.zeros(3), 0, 0.0)
    chunk = _episode(4, len_lookback_buffer=1, t_started=3)
    restored = SingleAgentEpisode.from_state(chunk.get_state())
    assert restored.t_started == 3 and len(restored) == 3 and restored.get_actions() == chunk.get_actions()
    assert restored.get_actions(-1, neg_index_as_lookback=True) == 10


def test_multi_agent_episode_cut_concat_and_to_numpy():
    from rlx.env.multi_agent_episode import MultiAgentEpisode

    ep = MultiAgentEpisode("ma", record=True)
    ep.agent_to_module_map.update({"a": "p0", "b": "p1"})
    ep.add_env_reset({"a": np.zeros(2), "b": np.zeros(2)}, {})
    ep.add_env_step({"a": np.ones(2), "b": np.ones(2)}, {"a": 0, "b": 1}, {"a": 1.0, "b": 2.0}, {}, {}, {})
    successor = ep.cut()
    assert successor.id_ == "ma" and len(successor) == 0 and successor.env_t_started == 1
    successor.add_env_step({"a": np.full(2, 2.0)}, {"a": 1, "b": 0}, {"a": 0.5, "b": 0.5},
                           {"__all__": False}, {}, {})
    assert len(successor) == 1 and successor.get_return() == 1.0 and successor.module_for("b") == "p1"
    ep.concat_episode(successor)
    assert len(ep) == 2 and ep.get_return() == 4.0
    assert ep.get_actions(agent_ids="a") == {"a": [0, 1]}
    ep.to_numpy()
    assert ep.get_observations(agent_ids="a")["a"].shape == (3, 2)
