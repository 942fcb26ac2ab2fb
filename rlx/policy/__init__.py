"""The Policy view of the old API."""
from rlx.policy.policy import Policy

__all__ = ["Policy"]
