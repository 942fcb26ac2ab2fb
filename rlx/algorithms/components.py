"""Building an Algorithm's parts: its EnvRunnerGroups (training and evaluation), the learner
container that trains the local EnvRunner's modules, with the checks that they fit, and the
learner connector pipeline.

`Algorithm.setup` calls these; a subclass's setup that builds its parts differently (DDPPO's
learner group, ES's inference-only modules) overrides setup or the spec hook and calls them too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym

from rlx.connectors.learner.learner_connector_pipeline import build_learner_connector as build_pipeline
from rlx.algorithms.module_specs import with_policy_class_modules
from rlx.core.learner.async_updates import LOCAL_ASYNC_UPDATE_ERROR, RL_MODULE_STATE_AFTER_UPDATE, state_for_result
from rlx.core.learner.build import build_learner
from rlx.core.learner.container import module_learners
from rlx.core.rl_module.multi_rl_module import MultiRLModule
from rlx.env.env_runner import MultiAgentEnvFoundError, SingleAgentEnvRunner
from rlx.env.env_runner_group import EnvRunnerGroup
from rlx.env.multi_agent_env_runner import MultiAgentEnvRunner
from rlx.utils.errors import NotSupportedYetError

if TYPE_CHECKING:
    from rlx.algorithms.algorithm import Algorithm
    from rlx.algorithms.algorithm_config import AlgorithmConfig


def env_runner_cls(algo: "Algorithm") -> type:
    """The EnvRunner class: the config's env_runner_cls, else the multi- or single-agent runner."""
    if algo.config.env_runner_cls is not None:
        return algo.config.env_runner_cls
    return MultiAgentEnvRunner if algo.config.is_multi_agent else SingleAgentEnvRunner


def make_env_runner_group(algo: "Algorithm", config: "AlgorithmConfig", **kwargs: Any) -> EnvRunnerGroup:
    """An EnvRunnerGroup of `config` running `algo`'s modules (training or evaluation)."""
    spec = with_policy_class_modules(algo, config, algo._module_spec())
    return EnvRunnerGroup(config, module_spec=spec, runner_cls=env_runner_cls(algo), **kwargs)


def build_env_runner_group(algo: "Algorithm", config: "AlgorithmConfig") -> EnvRunnerGroup:
    """The training EnvRunnerGroup; a config whose env creator turns out to return a
    MultiAgentEnv is marked so (config.mark_env_multi_agent) and gets multi-agent runners."""
    try:
        group = make_env_runner_group(algo, config, remote_backend=None)
    except MultiAgentEnvFoundError:
        # An env creator returned a MultiAgentEnv: known only once one was built.
        if env_runner_cls(algo) is not SingleAgentEnvRunner:
            raise
        algo.config.mark_env_multi_agent()
        group = make_env_runner_group(algo, config, remote_backend=None)
    # The runners resolved rlx's adaptive sub-env default (AlgorithmConfig.
    # resolve_num_envs_per_env_runner); the frozen config reports what they use.
    config._values["num_envs_per_env_runner"] = group.num_envs_per_env_runner
    return group


def build_learner_container(algo: "Algorithm", config: "AlgorithmConfig") -> Any:
    """The learner container training the local EnvRunner's module(s): per module, a Learner
    here or a group of num_learners learner processes."""
    local = algo.env_runner_group.local_env_runner
    if local is None:
        raise RuntimeError("The Algorithm's EnvRunnerGroup has no local EnvRunner; the learners are built for the "
                           "module(s) of that runner.")
    module = local.module
    learner_cls = algo._resolved_learner_class()
    check_recurrent_support(module, learner_cls)
    # (build_learner gives a GPU or compiled Learner its own copy of each module it trains.)
    return build_learner(config, learner_cls, module)


def build_learner_connector(algo: "Algorithm") -> Any:
    """The config's learner connector pipeline (None when unset), built with the spaces of the
    train batches (what the modules see: a Dict of them by module id in multi-agent runs)."""
    if algo.config.learner_connector is None:
        return None
    runner = algo.env_runner
    if algo.learners.sole_module_id is None:  # several modules (the single-agent runner's are its own spaces)
        obs_space = gym.spaces.Dict({pid: s.module_observation_space for pid, s in runner.slots.items()})
        act_space = gym.spaces.Dict({pid: s.action_space for pid, s in runner.slots.items()})
    else:
        obs_space, act_space = runner.module_observation_space, runner.action_space
    return build_pipeline(algo.config, obs_space, act_space)


def check_recurrent_support(module: Any, learner_cls: type) -> None:
    """NotSupportedYetError when a recurrent (stateful) module meets a Learner that cannot train it."""
    modules = [module[mid] for mid in module.keys()] if isinstance(module, MultiRLModule) else [module]
    if not any(getattr(m, "is_stateful", lambda: False)() for m in modules):
        return
    if not getattr(learner_cls, "supports_recurrent_modules", False):
        raise NotSupportedYetError(f"a recurrent (stateful) RLModule with {learner_cls.__name__}",
                                   "recurrent modules train with the Learners of PPO, IMPALA and APPO (and "
                                   "others that set supports_recurrent_modules = True)")


class LearnerGroupView:
    """RLlib's LearnerGroup as `algo.learner_group` hands it out: the Algorithm's learners (the
    driver's Learner, a learner container, or a group of learner processes) as `_learner`, their
    methods forwarded, and `update()` answering RLlib's shapes (a list of results)."""

    def __init__(self, learner: Any):
        self._learner = learner

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_learner":
            raise AttributeError(name)
        return getattr(self._learner, name)

    @property
    def is_local(self) -> bool:
        """RLlib's `LearnerGroup.is_local`: whether every Learner lives in this process."""
        return getattr(self._learner, "is_local", True) is not False

    @property
    def is_remote(self) -> bool:
        """RLlib's `LearnerGroup.is_remote`: whether some Learner is a process of its own."""
        return not self.is_local

    def foreach_learner(self, func: Any, **kwargs: Any) -> list[Any]:
        """RLlib's `LearnerGroup.foreach_learner`: [func(learner)] for the local Learner (a learner
        container or a group of learner processes runs it on each of its learners)."""
        inner = getattr(self._learner, "foreach_learner", None)
        return inner(func) if callable(inner) else [func(self._learner)]

    def update(self, batch: Any = None, episodes: list[Any] | None = None, timesteps: dict[str, Any] | None = None,
               async_update: bool = False, return_state: bool = False, **kwargs: Any) -> list[dict[str, Any]]:
        """RLlib's `LearnerGroup.update`: update on `batch` or `episodes` (with `num_epochs`,
        `minibatch_size`, `shuffle_batch_per_epoch`); a list with the update's results
        ({module_id: metrics}), for `MetricsLogger.aggregate`. With `return_state=True` the results
        also hold "_rl_module_state_after_update": {"rl_module": {module_id: weights},
        "extra_state": {module_id: extra state}} after the update (an ObjectRef to it while Ray is
        initialised, as RLlib's). `async_update=True` (learner processes only: ValueError for a local
        group, as RLlib's) queues the update and returns the results of earlier async updates that
        finished since the last call."""
        if self.is_remote:  # a group or container of learner processes: it answers both itself
            result = self._learner.update(batch=batch, episodes=episodes, timesteps=timesteps,
                                          async_update=async_update, return_state=return_state, **kwargs)
            return result if async_update else [result]
        if async_update:
            raise ValueError(LOCAL_ASYNC_UPDATE_ERROR)
        result = self._learner.update(batch=batch, episodes=episodes, timesteps=timesteps, **kwargs)
        if return_state:
            state = module_learners(self._learner).get_state()["learner"]
            result = {**result, RL_MODULE_STATE_AFTER_UPDATE: state_for_result(state)}
        return [result]

