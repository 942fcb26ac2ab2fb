"""FrameStackingEnvToModule: the module acts on the last `num_frames` frames."""
from __future__ import annotations

from functools import partial

from rlx.connectors.common.frame_stacking import _FrameStacking

#: Frame stacking in the env-to-module pipeline (see _FrameStacking).
FrameStackingEnvToModule = partial(_FrameStacking, as_learner_connector=False)

__all__ = ["FrameStackingEnvToModule"]
