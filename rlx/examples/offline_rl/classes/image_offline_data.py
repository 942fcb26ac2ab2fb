"""ImageOfflineData: an OfflineData whose rows are decoded images (RLlib's
`examples/offline_rl/classes/image_offline_data.py`, written against rlx's OfflineData).

It reads every file under `config.input_` as raw bytes, decodes each into a NumPy array with
Pillow and serves rows `{"array": image}`: with Ray installed through
`ray.data.read_binary_files(...).map(...)` (any filesystem Ray reads, e.g. RLlib's
`s3://anonymous@ray-example-data/batoidea/JPEGImages/`), else from local files in this
process. Turning the images into episodes is the prelearner's job
(`config.offline_data(prelearner_class=ImageOfflinePreLearner)`).
"""
from __future__ import annotations

import io
import os
from typing import Any

import numpy as np

from rlx.offline import offline_data as offline_data_module
from rlx.offline.files import strip_local_scheme, uri_scheme, LOCAL_SCHEMES
from rlx.offline.local_dataset import LocalDataset
from rlx.offline.offline_data import OfflineData
from rlx.offline.spaces import OfflineDataError

#: The column the decoded images are served in.
IMAGE_COLUMN = "array"


def decode_image(data: bytes) -> np.ndarray:
    """The pixels of an encoded image (JPEG, PNG, ...) as an array ([H, W] or [H, W, C])."""
    try:
        from PIL import Image  # noqa: PLC0415 (optional: only image data needs it)
    except ImportError:
        raise OfflineDataError("ImageOfflineData decodes images with Pillow: pip install pillow.") from None
    with Image.open(io.BytesIO(data)) as image:
        return np.array(image)


def _to_array_row(row: dict[str, Any]) -> dict[str, Any]:
    """A `read_binary_files` row ({"bytes": ...}) as the row of its decoded image."""
    return {IMAGE_COLUMN: decode_image(row["bytes"])}


class ImageOfflineData(OfflineData):
    """OfflineData over a folder (or list) of image files: one row `{"array": image}` per file.

    Built like any OfflineData (`ImageOfflineData(config)`, or as
    `config.offline_data(offline_data_class=ImageOfflineData)`); `sample()` maps the rows with
    the config's `prelearner_class`.
    """

    def _read(self) -> Any:
        data_module = offline_data_module.ray_data()
        if data_module is not None:
            return data_module.read_binary_files(self.path, **self.data_read_method_kwargs).map(_to_array_row)
        return LocalDataset({IMAGE_COLUMN: _stack([decode_image(_read_bytes(p)) for p in self._local_files()])})

    def _local_files(self) -> list[str]:
        """The files under the input paths, in name order (without Ray: local paths only)."""
        paths = self.path if isinstance(self.path, list) else [self.path]
        files: list[str] = []
        for path in map(os.fspath, paths):
            scheme = uri_scheme(path)
            if scheme and scheme not in LOCAL_SCHEMES:
                raise OfflineDataError(f"ImageOfflineData reads {path!r} ({scheme}://) through Ray Data; without Ray "
                                       "it reads local files only: install 'ray[data]' or copy the images locally.")
            path = strip_local_scheme(path)
            if os.path.isdir(path):
                files.extend(sorted(os.path.join(path, name) for name in os.listdir(path)
                                    if os.path.isfile(os.path.join(path, name))))
            elif os.path.isfile(path):
                files.append(path)
            else:
                raise OfflineDataError(f"ImageOfflineData: {path!r} is neither an image file nor a folder of them.")
        if not files:
            raise OfflineDataError(f"ImageOfflineData: no image files under {self.path!r}.")
        return files


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _stack(images: list[np.ndarray]) -> np.ndarray:
    """Images of one shape as one array; of several shapes as an object array of them."""
    if len({image.shape for image in images}) == 1:
        return np.stack(images)
    out = np.empty(len(images), dtype=object)
    out[:] = images
    return out
