"""Image helpers (RLlib's `ray.rllib.utils.images`): resize and RGB-to-gray without OpenCV.

Pillow does the resizing when it is installed (area-averaging, like OpenCV's INTER_AREA
that RLlib uses); otherwise NumPy does a nearest-neighbour resize.
"""
from __future__ import annotations

import importlib.util

import numpy as np

__all__ = ["resize", "rgb2gray"]


def resize(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """`img` [h, w] or [h, w, c] resized to [height, width(, c)], in its own dtype."""
    img = np.asarray(img)
    if img.ndim not in (2, 3):
        raise ValueError(f"resize() takes an image shaped [h, w] or [h, w, c], got shape {img.shape}.")
    if img.shape[:2] == (height, width):
        return img.copy()
    try:
        from PIL import Image
    except ImportError:
        rows = np.minimum(np.arange(height) * img.shape[0] // height, img.shape[0] - 1)
        cols = np.minimum(np.arange(width) * img.shape[1] // width, img.shape[1] - 1)
        return np.ascontiguousarray(img[rows][:, cols])
    if img.dtype == np.uint8 and img.ndim == 2:  # the Atari case: one 8-bit plane, no conversions
        return np.array(Image.fromarray(np.ascontiguousarray(img)).resize((width, height), Image.BOX))
    channels = img.shape[2] if img.ndim == 3 else 0
    planes = [img] if channels == 0 else [img[..., c] for c in range(channels)]
    # uint8 planes resize as 8-bit images ("L"), the rest as 32-bit float ones ("F").
    as_bytes = img.dtype == np.uint8
    out = [np.asarray(Image.fromarray(np.ascontiguousarray(p) if as_bytes else p.astype(np.float32))
                      .resize((width, height), Image.BOX)) for p in planes]
    result = out[0] if channels == 0 else np.stack(out, axis=-1)
    if np.issubdtype(img.dtype, np.integer):
        info = np.iinfo(img.dtype)
        result = np.clip(np.rint(result), info.min, info.max)
    return result.astype(img.dtype)


def rgb2gray(img: np.ndarray) -> np.ndarray:
    """An RGB image [h, w, 3] as grayscale [h, w] (ITU-R 601 luma, as OpenCV), in its dtype."""
    img = np.asarray(img)
    if img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3 and importlib.util.find_spec("PIL"):
        from PIL import Image  # an Atari frame: the same luma in fixed point (may differ by 1), 3x faster

        return np.array(Image.fromarray(np.ascontiguousarray(img)).convert("L"))
    gray = img[..., 0] * 0.299 + img[..., 1] * 0.587 + img[..., 2] * 0.114
    if np.issubdtype(img.dtype, np.integer):
        gray = np.rint(gray)
    return gray.astype(img.dtype)
