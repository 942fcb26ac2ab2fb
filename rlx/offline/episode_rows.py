"""Sampled time-major batches as RLlib's flat SampleBatches, with episode ids and step indices.

The conversion lives with the EnvRunner (rlx.env.runner.flat_rows), whose old-API worker view
returns these rows too; offline writers and readers import it from here.
"""
from __future__ import annotations

from rlx.env.runner.flat_rows import (ACTION_PROB, AGENT_INDEX, EPS_ID, T, UNROLL_ID, EpisodeTracker,
                                      to_sample_batch)

__all__ = ["ACTION_PROB", "AGENT_INDEX", "EPS_ID", "T", "UNROLL_ID", "EpisodeTracker", "to_sample_batch"]
