"""Episodes as RLlib 2.60's users read them: MultiAgentEpisode indexed by env step
(`env_steps=True`, the default), `env_t_to_agent_t`, the agents to act / that stepped, and
`get_state()` / `from_state()` round trips of both episode types."""
import pickle

import gymnasium as gym
import numpy as np
import pytest

from rlx.env.multi_agent_episode import MultiAgentEpisode
from rlx.env.single_agent_episode import SingleAgentEpisode


def _turn_based_episode():
    """Agent "a" observes every env step; "b" only at env steps 0 and 2 (its action of env step
    2 still waits for its next observation at the end)."""
    episode = MultiAgentEpisode("turns", record=True)
    episode.agent_to_module_map.update({"a": "p0", "b": "p1"})
    episode.add_env_reset({"a": 0, "b": 100}, {"a": {"r": 0}, "b": {"r": 100}})
    episode.add_env_step({"a": 1}, {"a": 10, "b": 110}, {"a": 1.0, "b": 2.0}, {}, {}, {},
                         extra_model_outputs={"a": {"action_logp": -0.1}, "b": {"action_logp": -0.2}})
    episode.add_env_step({"a": 2, "b": 102}, {"a": 11}, {"a": 1.0, "b": 3.0}, {}, {}, {},
                         extra_model_outputs={"a": {"action_logp": -0.3}})
    episode.add_env_step({"a": 3}, {"a": 12, "b": 112}, {"a": 1.0}, {}, {}, {},
                         extra_model_outputs={"a": {"action_logp": -0.4}, "b": {"action_logp": -0.5}})
    return episode


def test_multi_agent_episode_indexes_by_env_step_as_rllib():
    episode = _turn_based_episode()
    S = MultiAgentEpisode.SKIP_ENV_TS_TAG
    assert episode.env_t_to_agent_t == {"a": [0, 1, 2, 3], "b": [0, S, 1, S]}
    # One env step: only the agents that observed there.
    assert episode.get_observations(-1) == {"a": 3}
    assert episode.get_observations(0) == {"a": 0, "b": 100}
    assert episode.get_observations(1, fill=-1) == {"a": 1, "b": -1}
    assert episode.get_infos(1, agent_ids="b") == {}  # ("b" got no observation at env step 1)
    # Several env steps: each agent's values where it observed; return_list: one dict per env step.
    assert episode.get_observations() == {"a": [0, 1, 2, 3], "b": [100, 102]}
    assert episode.get_observations(slice(0, 3), return_list=True) == [{"a": 0, "b": 100}, {"a": 1},
                                                                       {"a": 2, "b": 102}]
    assert episode.get_observations([1, 2], fill=0) == {"a": [1, 2], "b": [0, 102]}
    # Actions, rewards, extra outputs: what an agent did after observing at an env step (none yet
    # after the latest; "b"'s last action still waits for its next observation).
    assert episode.get_actions() == {"a": [10, 11, 12], "b": [110, 112]}
    assert episode.get_actions(-1) == {"a": 12, "b": 112}
    assert episode.get_rewards() == {"a": [1.0, 1.0, 1.0], "b": [5.0, 0.0]}
    assert episode.get_extra_model_outputs("action_logp", -1) == {"a": pytest.approx(-0.4), "b": pytest.approx(-0.5)}
    # By each agent's own steps.
    assert episode.get_observations(-1, env_steps=False) == {"a": 3, "b": 102}
    assert episode.get_actions(env_steps=False) == {"a": [10, 11, 12], "b": [110]}
    with pytest.raises(ValueError, match="return_list"):
        episode.get_observations(env_steps=False, return_list=True)
    assert episode.get_agents_that_stepped() == {"a"} and episode.get_agents_to_act() == {"a"}
    assert episode.get_terminateds() == {"a": False, "b": False, "__all__": False}

    # A cut keeps env steps to look back on; concat_episode joins the mapping again.
    successor = episode.cut(len_lookback_buffer=1)
    assert successor.get_observations(0) == {"a": 3}
    assert successor.get_observations(-1, neg_index_as_lookback=True) == {"a": 2, "b": 102}
    successor.add_env_step({"a": 4, "b": 104}, {"a": 13}, {"a": 1.0, "b": 1.0}, {}, {}, {})
    assert successor.get_observations(-1) == {"a": 4, "b": 104}
    assert successor.get_agents_to_act() == {"a", "b"}
    episode.concat_episode(successor)
    assert episode.env_t_to_agent_t == {"a": [0, 1, 2, 3, 4], "b": [0, S, 1, S, 2]}
    assert episode.get_observations() == {"a": [0, 1, 2, 3, 4], "b": [100, 102, 104]}


def test_multi_agent_episode_state_round_trip_keeps_every_field_and_goes_on_stepping():
    episode = _turn_based_episode()
    episode.observation_space = gym.spaces.Dict({"a": gym.spaces.Discrete(200), "b": gym.spaces.Discrete(200)})
    episode.custom_data["note"] = [1, 2]
    restored = MultiAgentEpisode.from_state(pickle.loads(pickle.dumps(episode.get_state())))
    assert restored.id_ == episode.id_ and restored.env_t == 3 and restored.env_t_started == 0
    assert len(restored) == len(episode) == 3
    assert restored.env_t_to_agent_t == episode.env_t_to_agent_t
    assert restored.agent_to_module_map == {"a": "p0", "b": "p1"} and restored.module_for("b") == "p1"
    assert restored.observation_space == episode.observation_space
    assert restored.custom_data == {"note": [1, 2]}
    assert restored.get_return() == episode.get_return() == 8.0
    assert restored.agent_episode_returns == episode.agent_episode_returns
    assert restored.agent_steps() == episode.agent_steps() and restored.env_steps() == episode.env_steps()
    assert restored.get_observations() == episode.get_observations()
    assert restored.get_actions() == episode.get_actions()  # (with "b"'s waiting action)
    assert restored.get_infos(0) == {"a": {"r": 0}, "b": {"r": 100}}
    assert restored.get_agents_to_act() == episode.get_agents_to_act()
    assert restored.last_observation_for("b") == 102
    # The restored episode records the next step as the original would.
    for ep in (episode, restored):
        ep.add_env_step({"a": 4, "b": 104}, {"a": 13}, {"a": 1.0, "b": 1.0}, {"__all__": True}, {}, {})
        ep.finish(terminated=True, truncated=False)
    assert restored.get_rewards() == episode.get_rewards()
    assert restored.agent_episodes["b"].get_actions() == [110, 112]
    assert restored.is_done and restored.get_state()["is_terminated"]


def test_single_agent_episode_state_round_trip_keeps_every_field():
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    episode = SingleAgentEpisode("one", env_index=3, worker_index=2, observation_space=space,
                                 action_space=gym.spaces.Discrete(2), agent_id="x", module_id="m",
                                 multi_agent_episode_id="ma")
    episode.add_env_reset(np.zeros(2, np.float32), {"start": True})
    for t in range(4):
        episode.add_env_step(np.full(2, t, np.float32), t % 2, float(t), {"t": t},
                             extra_model_outputs={"action_logp": -float(t)})
    chunk = episode.cut(len_lookback_buffer=2)
    chunk.add_env_step(np.ones(2, np.float32), 1, 5.0, {"t": 4}, terminated=True,
                       extra_model_outputs={"action_logp": -4.0})
    chunk.custom_data["k"] = "v"
    chunk.custom_metrics["m"] = 1.5

    for original in (chunk, chunk.slice(slice(0, 1)), episode.to_numpy()):
        restored = SingleAgentEpisode.from_state(pickle.loads(pickle.dumps(original.get_state())))
        for name in ("id_", "agent_id", "module_id", "multi_agent_episode_id", "env_index", "worker_index",
                     "t_started", "t", "is_terminated", "is_truncated", "is_numpy"):
            assert getattr(restored, name) == getattr(original, name), name
        assert restored.observation_space == space and restored.action_space == gym.spaces.Discrete(2)
        assert len(restored) == len(original) and restored.get_return() == original.get_return()
        np.testing.assert_array_equal(restored.get_observations(), original.get_observations())
        np.testing.assert_array_equal(restored.get_actions(), original.get_actions())
        assert restored.get_infos() == original.get_infos()
        np.testing.assert_array_equal(restored.get_extra_model_outputs("action_logp"),
                                      original.get_extra_model_outputs("action_logp"))
        assert restored.custom_data == original.custom_data and restored.custom_metrics == original.custom_metrics
        assert restored.get_duration_s() == pytest.approx(original.get_duration_s(), abs=0.5)
    restored = SingleAgentEpisode.from_state(chunk.get_state())
    assert restored.get_actions(slice(-2, 0), neg_index_as_lookback=True) == [0, 1]  # the lookback kept
