"""The Policy view lives with the runner (rlx.env, layer L4) and the old API's ModelV2 in the
core (L1): RLlib's paths (rlx.policy.policy, rlx.models.modelv2) are aliases of the same
objects, and nothing in rlx/env or rlx/core imports those compat modules any more. Episode
state dicts are read in one direction (single_agent_episode -> episode_state)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from import_graph import build_graph  # noqa: E402


def test_the_runners_policy_view_is_rllibs_policy_class():
    from rlx.algorithms.ppo import PPOConfig
    from rlx.env.policy_view import Policy as View
    from rlx.policy import Policy as FromPackage
    from rlx.policy.policy import Policy

    assert Policy is View is FromPackage
    algo = PPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=1).build()
    try:
        policy = algo.get_policy()
        assert isinstance(policy, Policy) and type(policy).__module__ == "rlx.env.policy_view"
        action, state, extra = policy.compute_single_action(np.zeros(4, np.float32), explore=False)
        assert action in (0, 1) and state == [] and "action_dist_inputs" in extra
    finally:
        algo.stop()


def test_modelv2_lives_in_the_core_and_keeps_rllibs_path():
    import rlx.core.modelv2 as core
    import rlx.models.modelv2 as compat
    from rlx.models import ModelV2
    from rlx.models.torch.torch_modelv2 import TorchModelV2

    assert compat.ModelV2 is core.ModelV2 is ModelV2
    assert compat.restore_original_dimensions is core.restore_original_dimensions
    assert issubclass(TorchModelV2, core.ModelV2)


def test_weight_files_are_read_by_one_base_module():
    import rlx.algorithms.model_import as model_import
    import rlx.utils.weights_io as weights_io

    for name in ("load_h5_weights", "load_state_dict_checked", "read_h5_state"):
        assert getattr(model_import, name) is getattr(weights_io, name)


def test_env_and_core_import_neither_the_policy_nor_the_modelv2_compat_path():
    graph = build_graph()
    below = [e for e in graph.edges if e.source.startswith(("rlx.env.", "rlx.core."))
             and e.target in ("rlx.policy.policy", "rlx.models.modelv2")]
    assert not below, [(e.source, e.line, e.target) for e in below]
    both = {(e.source, e.target) for e in graph.edges}
    assert ("rlx.env.episode_state", "rlx.env.single_agent_episode") not in both
    assert ("rlx.env.single_agent_episode", "rlx.env.episode_state") in both


def test_an_episode_state_round_trips_through_from_state():
    from rlx.env.single_agent_episode import SingleAgentEpisode

    episode = SingleAgentEpisode()
    episode.add_env_reset(np.zeros(2, np.float32))
    episode.add_env_step(np.ones(2, np.float32), 1, 0.5)
    episode.add_env_step(np.full(2, 2.0, np.float32), 0, 1.5, terminated=True)
    copy = SingleAgentEpisode.from_state(episode.get_state())
    assert type(copy) is SingleAgentEpisode and copy.id_ == episode.id_
    assert len(copy) == 2 and copy.get_return() == 2.0 and copy.is_terminated
    np.testing.assert_array_equal(copy.get_observations(-1), episode.get_observations(-1))
