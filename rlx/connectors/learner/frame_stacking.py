"""FrameStackingLearner: frame stacking in the learner pipeline."""
from __future__ import annotations

from functools import partial

from rlx.connectors.common.frame_stacking import _FrameStacking

#: Frame stacking in the learner pipeline (see _FrameStacking: rlx's batches already hold the
#: stacked frames the module saw, which this piece keeps).
FrameStackingLearner = partial(_FrameStacking, as_learner_connector=True)

__all__ = ["FrameStackingLearner"]
