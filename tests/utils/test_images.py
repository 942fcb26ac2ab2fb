"""rlx.utils.images: resizing by area averaging and RGB-to-gray luma, checked on hand-made images."""
from __future__ import annotations

import numpy as np
import pytest

from rlx.utils.images import resize, rgb2gray


def block_means(img: np.ndarray, factor: int) -> np.ndarray:
    """The mean of every `factor` x `factor` block of a 2-D image (area averaging by hand)."""
    h, w = img.shape
    return img.reshape(h // factor, factor, w // factor, factor).astype(np.float64).mean(axis=(1, 3))


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_resize_by_a_whole_factor_averages_each_block(dtype):
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (8, 12)).astype(dtype)
    out = resize(img, 4, 6)
    assert out.shape == (4, 6) and out.dtype == dtype
    expected = block_means(img, 2)
    if dtype == np.uint8:
        assert np.abs(out.astype(np.int64) - expected).max() <= 1  # Pillow averages in fixed point
    else:
        np.testing.assert_allclose(out, expected, rtol=1e-5)


def test_resized_uint8_frames_are_fresh_writable_arrays():
    img = np.full((210, 160), 7, np.uint8)
    out = resize(img, 84, 84)
    assert out.shape == (84, 84) and (out == 7).all()
    out[0, 0] = 1  # observations may be changed in place by wrappers downstream
    assert img[0, 0] == 7


def test_resize_keeps_the_channels_of_a_color_image():
    img = np.zeros((4, 4, 3), np.uint8)
    img[..., 1] = 200
    img[:2, :2, 2] = 100
    out = resize(img, 2, 2)
    assert out.shape == (2, 2, 3)
    assert (out[..., 0] == 0).all() and (out[..., 1] == 200).all()
    assert out[0, 0, 2] == 100 and out[1, 1, 2] == 0


def test_resize_rejects_a_batch_of_images():
    with pytest.raises(ValueError, match="shaped \\[h, w\\] or \\[h, w, c\\]"):
        resize(np.zeros((2, 4, 4, 3), np.uint8), 2, 2)


def test_rgb2gray_weights_the_channels_by_luma():
    img = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 255]]], np.uint8)
    assert rgb2gray(img).tolist() == [[76, 150, 29, 255]]  # 0.299, 0.587, 0.114 of 255, rounded


def test_rgb2gray_of_8_bit_frames_matches_the_float_luma_within_rounding():
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (21, 16, 3), dtype=np.uint8)
    exact = frame[..., 0] * 0.299 + frame[..., 1] * 0.587 + frame[..., 2] * 0.114
    gray = rgb2gray(frame)
    assert gray.dtype == np.uint8 and gray.shape == (21, 16)
    assert np.abs(gray.astype(float) - exact).max() <= 1.0
    float_gray = rgb2gray(frame.astype(np.float32))
    assert float_gray.dtype == np.float32 and np.allclose(float_gray, exact, atol=1e-4)
