"""The Policy view of the old API, and PolicySpec for multi-agent configs."""
from rlx.policy.policy import Policy, PolicySpec

__all__ = ["Policy", "PolicySpec"]
