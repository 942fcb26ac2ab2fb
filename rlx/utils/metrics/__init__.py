"""Metrics logging (RLlib's ``ray.rllib.utils.metrics``): :class:`MetricsLogger` and :class:`Stats`."""
from rlx.utils.metrics.metrics_logger import MetricsLogger, Stats

__all__ = ["MetricsLogger", "Stats"]
