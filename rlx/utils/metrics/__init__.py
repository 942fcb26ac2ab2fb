"""Metrics logging (RLlib's ``ray.rllib.utils.metrics``): :class:`MetricsLogger`, :class:`Stats`,
and the names of the result keys rlx reports, for code that reads results by constant."""
from rlx.utils.metrics.metrics_logger import MetricsLogger, Stats

# Sections of a result dict.
ENV_RUNNER_RESULTS = "env_runners"
EVALUATION_RESULTS = "evaluation"
LEARNER_RESULTS = "learners"
FAULT_TOLERANCE_STATS = "fault_tolerance"

# Top-level result keys.
TRAINING_ITERATION = "training_iteration"
TIME_THIS_ITER_S = "time_this_iter_s"
TIME_TOTAL_S = "time_total_s"

# Counters.
NUM_ENV_STEPS_SAMPLED = "num_env_steps_sampled"
NUM_ENV_STEPS_SAMPLED_LIFETIME = "num_env_steps_sampled_lifetime"
NUM_ENV_STEPS_SAMPLED_THIS_ITER = "num_env_steps_sampled_this_iter"
NUM_ENV_STEPS_TRAINED = "num_env_steps_trained"
NUM_ENV_STEPS_TRAINED_LIFETIME = "num_env_steps_trained_lifetime"
NUM_ENV_STEPS_TRAINED_THIS_ITER = "num_env_steps_trained_this_iter"
NUM_AGENT_STEPS_SAMPLED = "num_agent_steps_sampled"
NUM_AGENT_STEPS_SAMPLED_LIFETIME = "num_agent_steps_sampled_lifetime"
NUM_AGENT_STEPS_SAMPLED_THIS_ITER = "num_agent_steps_sampled_this_iter"
NUM_AGENT_STEPS_TRAINED_LIFETIME = "num_agent_steps_trained_lifetime"
NUM_AGENT_STEPS_TRAINED_THIS_ITER = "num_agent_steps_trained_this_iter"
NUM_EPISODES = "num_episodes"
NUM_EPISODES_LIFETIME = "num_episodes_lifetime"

# Episode statistics (under env_runners).
EPISODE_RETURN_MEAN = "episode_return_mean"
EPISODE_RETURN_MIN = "episode_return_min"
EPISODE_RETURN_MAX = "episode_return_max"
EPISODE_LEN_MEAN = "episode_len_mean"
EPISODE_LEN_MIN = "episode_len_min"
EPISODE_LEN_MAX = "episode_len_max"
AGENT_EPISODE_RETURNS_MEAN = "agent_episode_returns_mean"
MODULE_EPISODE_RETURNS_MEAN = "module_episode_returns_mean"

# The rest of RLlib 2.60's result-key names.
from rlx.utils.metrics.result_keys import *  # noqa: E402,F401,F403

__all__ = ["MetricsLogger", "Stats"] + [name for name in dir() if name.isupper()]
