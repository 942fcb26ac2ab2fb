"""Exception types that rlx raises for user mistakes, each naming the problem and the fix."""
from __future__ import annotations

import difflib
from typing import Iterable

from rlx.utils import install_hints


class RLXError(Exception):
    """Base class of every error rlx raises on purpose."""


class ConfigError(RLXError, ValueError):
    """A configuration value is unknown, of the wrong type, or out of range."""


class NotSupportedYetError(ConfigError):
    """An option is accepted by the API but its feature is not built yet."""

    def __init__(self, option: str, detail: str = "", fix: str = "Leave it at its default for now."):
        msg = f"not supported yet: {option}"
        if detail:
            msg += f" ({detail})"
        msg += f". {fix}"
        super().__init__(msg)
        self.option = option


class EnvError(RLXError, ValueError):
    """An environment cannot be created or does not follow the Gymnasium API."""


class EnvOutputError(EnvError):
    """An env returned something rlx cannot train on: a NaN, infinite or None reward or
    observation, an observation of the wrong shape, a reward that is not a number, an info
    that is not a dict."""


class StepFailedRecreateEnvError(RLXError):
    """Raised by an env's ``step()`` to say the step failed and the env must be recreated
    (RLlib's ``ray.rllib.env.env_errors.StepFailedRecreateEnvError``): with
    ``fault_tolerance(restart_failed_sub_environments=True)`` the EnvRunner recreates the env
    and resets it, as for any step error, without logging the error."""


class UnsupportedSpaceException(RLXError, ValueError):
    """An observation or action space a component cannot handle (RLlib's
    ``ray.rllib.utils.error.UnsupportedSpaceException``)."""


class MultiAgentEnvError(EnvError):
    """A multi-agent env broke the MultiAgentEnv API (e.g. returned data of unknown agents)."""


class NotSerializableError(RLXError, TypeError):
    """An object that must be sent to another process cannot be pickled (RLlib's NotSerializable)."""


class LearnerError(RLXError, RuntimeError):
    """A Learner cannot apply an update (e.g. its loss or gradients are not finite)."""


class NonFiniteUpdateError(LearnerError, FloatingPointError):
    """A loss or gradient norm is NaN or infinite; the optimizer step was not taken."""


class CheckpointError(RLXError, ValueError):
    """A checkpoint directory is missing, corrupt, or of an unknown format version."""


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """Return ' Did you mean X?' for the closest candidate, or '' when none is close."""
    matches = difflib.get_close_matches(word, list(candidates), n=3, cutoff=0.6)
    if not matches:
        return ""
    if len(matches) == 1:
        return f" Did you mean '{matches[0]}'?"
    return " Did you mean one of: " + ", ".join(f"'{m}'" for m in matches) + "?"


def install_hint(extra: str) -> str:
    """The command that installs one of rlx's optional extras ('tune', 'plot', 'video', ...), as fits
    how rlx was installed: from a checkout (with constraints.txt's pins) or as the rlx-torch wheel."""
    return install_hints.install_hint(extra)
