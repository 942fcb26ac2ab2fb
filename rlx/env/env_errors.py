"""RLlib's `ray.rllib.env.env_errors` path: StepFailedRecreateEnvError, which an env's step()
raises to have its EnvRunner recreate it (defined in rlx.utils.errors)."""
from rlx.utils.errors import StepFailedRecreateEnvError

__all__ = ["StepFailedRecreateEnvError"]
