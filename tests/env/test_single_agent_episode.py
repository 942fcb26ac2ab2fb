"""SingleAgentEpisode: recording steps, accessors and their index semantics, and misuse errors."""
from __future__ import annotations

import numpy as np
import pytest

from rlx.env.single_agent_episode import EpisodeError, SingleAgentEpisode


def make_episode(steps=3, terminated=True) -> SingleAgentEpisode:
    """Obs 0..steps, action i at step i, reward i + 1, infos {'i': i}."""
    ep = SingleAgentEpisode("abc", env_index=2, worker_index=1)
    ep.add_env_reset(0, infos={"i": 0})
    for i in range(steps):
        last = i == steps - 1
        ep.add_env_step(i + 1, action=i, reward=i + 1.0, infos={"i": i + 1},
                        terminated=terminated and last, extra_model_outputs={"logp": -float(i)})
    return ep


def test_return_length_and_flags():
    ep = make_episode(3)
    assert ep.get_return() == 6.0 and isinstance(ep.get_return(), float)
    assert len(ep) == 3 and ep.t == 3 and ep.t_started == 0
    assert ep.is_terminated and not ep.is_truncated and ep.is_done
    assert ep.length == 3 and ep.total_reward == 6.0


def test_numpy_rewards_sum_to_python_float():
    ep = SingleAgentEpisode()
    ep.add_env_reset(np.zeros(2))
    ep.add_env_step(np.ones(2), 0, np.float32(0.5))
    ep.add_env_step(np.ones(2), 1, np.float32(0.25), truncated=True)
    assert type(ep.get_return()) is float and ep.get_return() == 0.75
    assert ep.is_truncated and not ep.is_terminated and ep.is_done


def test_ids_and_old_aliases():
    ep = make_episode()
    assert ep.id_ == ep.episode_id == "abc"
    assert ep.env_index == ep.env_id == 2 and ep.worker_index == 1
    a, b = SingleAgentEpisode(), SingleAgentEpisode()
    assert a.id_ != b.id_ and len(a.id_) == 32


def test_observations_and_infos_have_one_more_entry():
    ep = make_episode(3)
    assert ep.get_observations() == [0, 1, 2, 3]
    assert ep.get_infos() == [{"i": 0}, {"i": 1}, {"i": 2}, {"i": 3}]
    assert ep.get_actions() == [0, 1, 2]
    assert ep.get_rewards() == [1.0, 2.0, 3.0]


def test_index_semantics():
    ep = make_episode(3)
    assert ep.get_observations(-1) == 3 and ep.get_observations(0) == 0
    assert ep.get_actions(-1) == 2 and ep.get_rewards(-2) == 2.0
    assert ep.get_observations([0, -1]) == [0, 3]
    assert ep.get_rewards(slice(1, None)) == [2.0, 3.0]
    assert ep.get_infos(np.int64(1)) == {"i": 1}
    assert ep.get_extra_model_outputs("logp") == [0.0, -1.0, -2.0]
    assert ep.get_extra_model_outputs("logp", -1) == -2.0


def test_accessor_returns_a_copy():
    ep = make_episode(2)
    ep.get_rewards().append(100.0)
    assert ep.get_rewards() == [1.0, 2.0]


def test_bad_indices():
    ep = make_episode(2)
    with pytest.raises(IndexError, match="actions index 5 out of range"):
        ep.get_actions(5)
    with pytest.raises(TypeError, match="indices must be"):
        ep.get_actions("last")


def test_extra_model_outputs_stay_aligned_with_actions():
    ep = SingleAgentEpisode()
    ep.add_env_reset(0)
    ep.add_env_step(1, 0, 0.0)
    ep.add_env_step(2, 1, 0.0, extra_model_outputs={"vf": 0.5})
    ep.add_env_step(3, 0, 0.0)
    assert ep.get_extra_model_outputs("vf") == [None, 0.5, None]
    with pytest.raises(KeyError, match="'vf'"):
        ep.get_extra_model_outputs("logp")


def test_temporary_timestep_data():
    ep = SingleAgentEpisode()
    ep.add_temporary_timestep_data("frames", "f0")
    ep.add_temporary_timestep_data("frames", "f1")
    assert ep.get_temporary_timestep_data("frames") == ["f0", "f1"]
    with pytest.raises(KeyError, match="'frames'"):
        ep.get_temporary_timestep_data("rgb")


def test_user_dicts_are_per_episode():
    a, b = SingleAgentEpisode(), SingleAgentEpisode()
    a.user_data["x"] = 1
    a.custom_metrics["m"] = 2.0
    a.hist_data["h"] = [1]
    a.media["v"] = "clip"
    assert b.user_data == b.custom_metrics == b.hist_data == b.media == {}


def test_step_before_reset_raises():
    ep = SingleAgentEpisode()
    with pytest.raises(EpisodeError, match="add_env_reset"):
        ep.add_env_step(1, 0, 1.0)


def test_step_after_done_raises():
    ep = make_episode(2, terminated=True)
    with pytest.raises(EpisodeError, match="already done"):
        ep.add_env_step(9, 0, 1.0)
    assert len(ep) == 2 and ep.get_return() == 3.0


def test_second_reset_raises():
    ep = make_episode(1, terminated=False)
    with pytest.raises(EpisodeError, match="already reset"):
        ep.add_env_reset(0)


def test_last_for_methods_before_and_after_steps():
    ep = SingleAgentEpisode()
    assert ep.last_observation_for() is None and ep.last_info_for() is None
    assert ep.last_action_for() is None and ep.last_reward_for() == 0.0
    ep.add_env_reset("o0", infos={"r": 1})
    assert ep.last_observation_for() == "o0" and ep.last_raw_obs_for() == "o0"
    assert ep.last_info_for() == {"r": 1} and ep.last_action_for() is None
    ep.add_env_step("o1", 4, 2.5)
    assert ep.last_observation_for("agent0") == "o1" and ep.last_action_for() == 4
    assert ep.last_reward_for() == 2.5 and ep.last_info_for() == {}


def test_duration_runs_until_done_then_freezes():
    ep = SingleAgentEpisode()
    assert ep.get_duration_s() == 0.0
    ep.add_env_reset(0)
    ep.add_env_step(1, 0, 0.0, terminated=True)
    d = ep.get_duration_s()
    assert d >= 0.0 and ep.get_duration_s() == d


def test_repr_is_short():
    r = repr(make_episode(3))
    assert r.startswith("SingleAgentEpisode(") and "len=3" in r and "terminated" in r and len(r) < 100
