"""The EnvRunner: steps sub-environments with RLModules and returns what they experienced.

One runner (`EnvRunner`, rlx.env.runner.runner), of which `SingleAgentEnvRunner` (a vector of
Gymnasium envs, one module, lockstep) and `MultiAgentEnvRunner` (MultiAgentEnvs, one module
per policy) are the two cases; one module->action path (`ModuleSlot`) that sampling, the
Policy view and server-side inference share. Modules:

- module_slot, actions: acting with one module (preprocess, filter, act, adapt the action);
- runner: the shared EnvRunner (sample(), metrics, weights, state, policy views, stop);
- sub_envs: building, checking, restarting and reaching the sub-envs;
- episode_events: callbacks and the metrics of finished episodes;
- lockstep, env_checks: the single-agent sampling loop and its checks of env outputs;
- agent_steps: the multi-agent sampling loop;
- trajectories: on_postprocess_trajectory on time-major batches;
- current: get_global_worker().
"""
from typing import Any

__all__ = ["EnvRunner", "ModuleSlot", "MultiAgentEnvRunner", "SingleAgentEnvRunner"]

_LAZY = {
    "EnvRunner": "rlx.env.runner.runner",
    "ModuleSlot": "rlx.env.runner.module_slot",
    "MultiAgentEnvRunner": "rlx.env.runner.multi_agent",
    "SingleAgentEnvRunner": "rlx.env.runner.single_agent",
}


def __getattr__(name: str) -> Any:
    # Imported on first use: the runners import torch and gymnasium.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlx.env.runner' has no attribute {name!r}")
