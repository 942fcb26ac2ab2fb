"""`compress_observations`: sampled observations travel compressed from remote EnvRunners.

A remote EnvRunner packs the observation columns (`obs`, `new_obs`) of each batch it returns
with rlx.utils.compression (LZ4 when installed, else zlib; one block per column, RLlib's
"bulk" form) and the EnvRunnerGroup unpacks them as the batch arrives, so everything after
it (learners, replay buffers, offline output, callbacks) sees the very arrays the runner
sampled. Worth it when observations are large and compress well (images) and batches cross
a slow link (Ray actors on other machines); batches of small float vectors barely shrink.
"""
from __future__ import annotations

from typing import Any

from rlx.core.columns import Columns
from rlx.core.sample_batch import map_modules
from rlx.utils.compression import is_compressed, pack, unpack

#: The columns that travel compressed (RLlib's SampleBatch.compress default).
COMPRESSED_COLUMNS = (Columns.OBS, Columns.NEXT_OBS)


def compress_observations(batch: Any) -> Any:
    """The batch (a dict of arrays or a MultiAgentBatch) with its observation columns packed."""
    return map_modules(batch, lambda columns: {k: pack(v) if k in COMPRESSED_COLUMNS else v
                                               for k, v in columns.items()})


def decompress_observations(batch: Any) -> Any:
    """The batch with the columns `compress_observations` packed unpacked again (others untouched)."""
    return map_modules(batch, lambda columns: {k: unpack(v) if k in COMPRESSED_COLUMNS and is_compressed(v) else v
                                               for k, v in columns.items()})
