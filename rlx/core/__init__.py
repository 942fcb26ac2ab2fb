"""Core building blocks: batch columns, RLModule, default models, distributions, Learner.

The ids and state-component names below are RLlib's (`ray.rllib.core`).
"""
from rlx.core.columns import Columns

#: The agent id of a single-agent env (in multi-agent terms).
DEFAULT_AGENT_ID = "default_agent"
#: The id of a single-agent algorithm's only policy (module).
DEFAULT_POLICY_ID = "default_policy"
DEFAULT_MODULE_ID = DEFAULT_POLICY_ID
#: The key of metrics that cover all modules together.
ALL_MODULES = "__all_modules__"

# Names of the components of an Algorithm's state (`algo.set_state({COMPONENT_LEARNER_GROUP: ...})`).
COMPONENT_ENV_RUNNER = "env_runner"
COMPONENT_ENV_TO_MODULE_CONNECTOR = "env_to_module_connector"
COMPONENT_EVAL_ENV_RUNNER = "eval_env_runner"
COMPONENT_LEARNER = "learner"
COMPONENT_LEARNER_GROUP = "learner_group"
COMPONENT_METRICS_LOGGER = "metrics_logger"
COMPONENT_MODULE_TO_ENV_CONNECTOR = "module_to_env_connector"
COMPONENT_OPTIMIZER = "optimizer"
COMPONENT_RL_MODULE = "rl_module"

__all__ = [
    "ALL_MODULES", "Columns", "COMPONENT_ENV_RUNNER", "COMPONENT_ENV_TO_MODULE_CONNECTOR", "COMPONENT_EVAL_ENV_RUNNER",
    "COMPONENT_LEARNER", "COMPONENT_LEARNER_GROUP", "COMPONENT_METRICS_LOGGER", "COMPONENT_MODULE_TO_ENV_CONNECTOR",
    "COMPONENT_OPTIMIZER", "COMPONENT_RL_MODULE", "DEFAULT_AGENT_ID", "DEFAULT_MODULE_ID", "DEFAULT_POLICY_ID",
]
