"""What a PPO run shows in TensorBoard, read back with TensorBoard's own reader: each value
once (under its new-stack key), throughput and timers as scalars, the return first; and the
`tensorboard_legacy_keys` option that brings the old names (Ray Tune's layout) back.

Expected values come from the result dicts train() returned.
"""
from __future__ import annotations

import pytest

from rlx.algorithms.ppo import PPOConfig
from rlx.loggers import TBXLogger, flatten_result
from rlx.utils.errors import ConfigError

RETURN = "env_runners/episode_return_mean"
LENGTH = "env_runners/episode_len_mean"
#: Names the result dict gives the mean return besides RETURN (single agent, one module).
RETURN_ALIASES = ("episode_reward_mean", "policy_reward_mean/default_policy",
                  "env_runners/agent_episode_returns_mean/default_agent",
                  "env_runners/module_episode_returns_mean/default_policy")


def read_events(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "histograms": 0})
    ea.Reload()
    return ea


def train_ppo(logdir, iterations=2, **logger_config):
    """Two short PPO iterations on CartPole, logging into `logdir`; the result dicts."""
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size=256, minibatch_size=64, num_epochs=1)
        .debugging(seed=0, logger_config={"logdir": str(logdir), **logger_config})
    )
    algo = config.build_algo()
    try:
        return [algo.train() for _ in range(iterations)]
    finally:
        algo.stop()


def series(ea, tag):
    """The values of `tag`, one per iteration."""
    return [e.value for e in ea.Scalars(tag)]


def expected_series(results, key):
    """What `key` held in each result, approximately (TensorBoard keeps float32)."""
    return pytest.approx([float(flatten_result(r)[key]) for r in results], rel=1e-6)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("tb_default")
    results = train_ppo(logdir)
    return results, read_events(logdir)


def key_of(tag):
    """The result key a tag draws: the tag, less a group prefix ('1_return/', 'run/') if any."""
    group, _, rest = tag.partition("/")
    return rest if group[:1].isdigit() or group == "run" else tag


def tag_of(tags, key):
    """The one tag drawing result key `key`."""
    found = [t for t in tags if key_of(t) == key]
    assert len(found) == 1, (key, found)
    return found[0]


def test_each_value_is_drawn_once_under_its_new_stack_key(default_run):
    results, ea = default_run
    tags = ea.Tags()["scalars"]
    flat = flatten_result(results[-1])
    assert all(alias in flat for alias in RETURN_ALIASES), "the result dict keeps the old names"
    # The return was drawn five times before: now once (CartPole's length, one step one
    # reward, is the same series under its own name).
    return_series = expected_series(results, RETURN)
    same_as_return = {t for t in tags if series(ea, t) == return_series}
    assert same_as_return - {tag_of(tags, LENGTH)} == {tag_of(tags, RETURN)}
    # The learner's loss was drawn twice (learners/ and info/learner/): now once.
    loss_series = expected_series(results, "learners/default_policy/total_loss")
    assert [t for t in tags if series(ea, t) == loss_series] == [tag_of(tags, "learners/default_policy/total_loss")]
    # No old name, and no new-stack key repeating another's counter, is a tag.
    old_names = [k for k in flat if k.startswith(("info/", "policy_reward_", "hist_stats/"))] + [
        "episode_reward_mean", "episode_len_mean", "episodes_this_iter", "episodes_total", "timesteps_total",
        "timesteps_this_iter", "num_env_steps_sampled", "num_env_steps_trained",
        "env_runners/num_env_steps_sampled_lifetime", "num_agent_steps_sampled_lifetime"]
    drawn_keys = {key_of(t) for t in tags}
    assert not drawn_keys & set(old_names), sorted(drawn_keys & set(old_names))
    assert "hist_stats/episode_reward" not in ea.Tags()["histograms"]
    assert "env_runners/hist_stats/episode_reward" in ea.Tags()["histograms"]


def test_throughput_and_timers_are_scalars(default_run):
    results, ea = default_run
    tags = ea.Tags()["scalars"]
    for key in ("env_runners/num_env_steps_sampled_lifetime_throughput", "num_env_steps_trained_lifetime_throughput",
                "num_learner_updates_throughput", "timers/env_runner_sampling_timer", "timers/learner_update_timer",
                "timers/synch_weights", "timers/training_step", "timers/training_iteration"):
        assert series(ea, tag_of(tags, key)) == expected_series(results, key), key
    for r in results:
        # Env steps per second of the iteration; PPO updates its learner once per iteration.
        assert r["env_runners"]["num_env_steps_sampled_lifetime_throughput"] == pytest.approx(
            r["num_env_steps_sampled_this_iter"] / r["time_this_iter_s"], rel=0.05)
        assert r["num_learner_updates_throughput"] == pytest.approx(1 / r["time_this_iter_s"], rel=0.05)
        assert 0 < r["timers"]["env_runner_sampling_timer"] < r["timers"]["training_step"]


def test_return_and_episode_length_are_the_first_cards(default_run):
    _, ea = default_run
    tags = sorted(ea.Tags()["scalars"])
    assert tags[0] == "1_return/" + RETURN
    assert tags[1] == "2_episode_len/" + LENGTH
    assert tags[2].startswith("3_throughput/")


def test_legacy_keys_option_writes_every_key_in_ray_tunes_layout(tmp_path):
    results = train_ppo(tmp_path, iterations=1, tensorboard_legacy_keys=True)
    ea = read_events(tmp_path)
    tags = set(ea.Tags()["scalars"])
    flat = flatten_result(results[0])
    for key in (RETURN, *RETURN_ALIASES, "info/learner/default_policy/learner_stats/total_loss", "timesteps_total",
                "env_runners/num_env_steps_sampled_lifetime_throughput"):
        assert series(ea, "ray/tune/" + key) == pytest.approx([float(flat[key])], rel=1e-5), key
    assert all(t.startswith("ray/tune/") for t in tags)
    assert "ray/tune/hist_stats/episode_reward" in ea.Tags()["histograms"]


def test_several_agents_returns_and_evaluation_are_drawn(tmp_path):
    """Per-agent returns are drawn when there are several agents (each its own value); the
    evaluation return joins the training return in the first group."""
    logger = TBXLogger({}, tmp_path)
    logger.on_result({
        "training_iteration": 1, "num_env_steps_sampled_lifetime": 10,
        "env_runners": {"episode_return_mean": 3.0, "agent_episode_returns_mean": {"a0": 1.0, "a1": 2.0},
                        "module_episode_returns_mean": {"p": 3.0}},
        "evaluation": {"env_runners": {"episode_return_mean": 4.0}, "episode_reward_mean": 4.0},
    })
    logger.close()
    tags = sorted(read_events(tmp_path).Tags()["scalars"])
    assert tags == ["1_return/env_runners/episode_return_mean", "1_return/evaluation/env_runners/episode_return_mean",
                    "env_runners/agent_episode_returns_mean/a0", "env_runners/agent_episode_returns_mean/a1",
                    "run/num_env_steps_sampled_lifetime"]


def test_legacy_keys_option_must_be_a_bool(tmp_path):
    with pytest.raises(ConfigError, match="tensorboard_legacy_keys.*True or False"):
        TBXLogger({}, tmp_path, logger_config={"tensorboard_legacy_keys": "yes"})
