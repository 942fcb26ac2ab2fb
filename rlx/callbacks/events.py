"""The callback events: their names, the keyword arguments the library passes to each, and the
old names (of events and keywords) that are still understood or pointed at."""
from __future__ import annotations

from rlx.utils.errors import ConfigError, did_you_mean

ALGORITHM_EVENTS: tuple[str, ...] = (
    "on_algorithm_init",
    "on_train_result",
    "on_evaluate_start",
    "on_evaluate_end",
    "on_env_runners_recreated",
    "on_checkpoint_loaded",
)
EPISODE_EVENTS: tuple[str, ...] = (
    "on_episode_created",
    "on_episode_start",
    "on_episode_step",
    "on_episode_end",
)
ENV_RUNNER_EVENTS: tuple[str, ...] = (
    "on_environment_created",
    "on_sub_environment_created",
    *EPISODE_EVENTS,
    "on_sample_end",
)
OLD_API_EVENTS: tuple[str, ...] = ("on_postprocess_trajectory", "on_learn_on_batch")
CALLBACK_EVENTS: tuple[str, ...] = ALGORITHM_EVENTS + ENV_RUNNER_EVENTS + OLD_API_EVENTS

_EPISODE_KWARGS = (
    "episode", "env_runner", "metrics_logger", "env", "env_index", "rl_module",
    "worker", "base_env", "policies",
)
#: The keyword arguments the library passes to each event; handlers may name any subset of them.
EVENT_KWARGS: dict[str, tuple[str, ...]] = {
    "on_algorithm_init": ("algorithm", "metrics_logger"),
    "on_train_result": ("algorithm", "metrics_logger", "result"),
    "on_evaluate_start": ("algorithm", "metrics_logger"),
    "on_evaluate_end": ("algorithm", "metrics_logger", "evaluation_metrics"),
    "on_env_runners_recreated": (
        "algorithm", "env_runner_group", "env_runner_indices", "is_evaluation", "worker_set", "worker_ids",
    ),
    "on_checkpoint_loaded": ("algorithm",),
    "on_environment_created": ("env_runner", "metrics_logger", "env", "env_context"),
    "on_sub_environment_created": ("worker", "sub_environment", "env_context", "env_index"),
    **{event: _EPISODE_KWARGS for event in EPISODE_EVENTS},
    # The earlier chunks of the ending episode (RLlib 2.60); a handler that names it gets None
    # by its default where the runner does not pass it.
    "on_episode_end": _EPISODE_KWARGS + ("prev_episode_chunks",),
    "on_sample_end": ("env_runner", "metrics_logger", "samples", "worker"),
    "on_postprocess_trajectory": (
        "worker", "episode", "agent_id", "policy_id", "policies", "postprocessed_batch",
        "original_batches", "env_runner", "metrics_logger",
    ),
    "on_learn_on_batch": ("policy", "train_batch", "result"),
}

#: Keyword arguments an event passes only where the component has them (RLlib's default: None).
OPTIONAL_EVENT_KWARGS = frozenset({"prev_episode_chunks"})

# Old event names whose handlers would otherwise never run.
RENAMED_EVENTS = {
    "on_trainer_init": "on_algorithm_init",
    "on_workers_recreated": "on_env_runners_recreated",
}
# Old keyword names a handler may still declare; it gets the value of the current name.
KWARG_ALIASES = {"trainer": "algorithm"}
# Event names of the oldest dict form ({"on_postprocess_traj": fn(info)}) and their current names.
DICT_EVENT_ALIASES = {"on_postprocess_traj": "on_postprocess_trajectory"}


def check_event_name(name: str, where: str) -> None:
    """Raise ConfigError when `name` is not a callback event."""
    if name in EVENT_KWARGS:
        return
    raise ConfigError(f"{where}: '{name}' is not a callback event.{event_hint(name)}")


def event_hint(name: str) -> str:
    """What to tell a user who named `name`, which is not an event: its new name, or a guess."""
    if name in RENAMED_EVENTS:
        return f" It was renamed to '{RENAMED_EVENTS[name]}'."
    hint = did_you_mean(name, CALLBACK_EVENTS)
    return hint or " Valid events: " + ", ".join(CALLBACK_EVENTS) + "."
