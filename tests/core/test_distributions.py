"""Action distributions in rlx.core.distributions, checked against torch.distributions."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Categorical as TorchCategorical
from torch.distributions import Independent, Normal, kl_divergence

from rlx.core.distributions import (
    BoundDistribution,
    Categorical,
    DiagGaussian,
    MultiCategorical,
    SquashedGaussian,
    dist_class_for_space,
)
from rlx.utils.errors import NotSupportedYetError

ATOL = 1e-5


def _gen(seed: int = 0) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def _randn(*shape, seed=0, scale=1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed)) * scale


# =========================================================================== Categorical


def test_categorical_logp_matches_torch():
    logits = _randn(16, 5, seed=1, scale=2.0)
    actions = torch.randint(0, 5, (16,), generator=_gen(2))
    ref = TorchCategorical(logits=logits)
    torch.testing.assert_close(Categorical(logits).logp(actions), ref.log_prob(actions), atol=ATOL, rtol=0)


def test_categorical_entropy_matches_torch():
    logits = _randn(16, 5, seed=3, scale=2.0)
    torch.testing.assert_close(
        Categorical(logits).entropy(), TorchCategorical(logits=logits).entropy(), atol=ATOL, rtol=0
    )


def test_categorical_kl_matches_torch():
    a, b = _randn(16, 5, seed=4, scale=2.0), _randn(16, 5, seed=5, scale=2.0)
    expected = kl_divergence(TorchCategorical(logits=a), TorchCategorical(logits=b))
    torch.testing.assert_close(Categorical(a).kl(Categorical(b)), expected, atol=ATOL, rtol=0)


def test_categorical_kl_of_a_distribution_with_itself_is_zero():
    logits = _randn(8, 4, seed=6)
    torch.testing.assert_close(Categorical(logits).kl(Categorical(logits)), torch.zeros(8), atol=ATOL, rtol=0)


def test_categorical_is_invariant_to_a_logit_shift():
    logits = _randn(4, 3, seed=7)
    actions = torch.tensor([0, 1, 2, 1])
    torch.testing.assert_close(Categorical(logits + 100.0).logp(actions), Categorical(logits).logp(actions))


def test_categorical_sample_shape_and_dtype():
    dist = Categorical(_randn(7, 4, seed=8))
    sample = dist.sample(_gen(9))
    assert sample.shape == (7,)
    assert sample.dtype == torch.long
    assert sample.min() >= 0 and sample.max() < 4


def test_categorical_sample_frequencies_match_softmax():
    n = 20_000
    logits = torch.tensor([1.0, -0.5, 0.3, 2.0])
    dist = Categorical(logits.expand(n, 4))
    samples = dist.sample(_gen(10))
    freqs = torch.bincount(samples, minlength=4).float() / n
    # Binomial std of a frequency is at most 0.5/sqrt(n) ~= 0.0035.
    torch.testing.assert_close(freqs, torch.softmax(logits, -1), atol=0.015, rtol=0)


def test_categorical_sampling_is_reproducible_with_a_seeded_generator():
    dist = Categorical(_randn(50, 6, seed=11))
    assert torch.equal(dist.sample(_gen(12)), dist.sample(_gen(12)))


def test_categorical_deterministic_sample_is_argmax():
    logits = _randn(10, 6, seed=13)
    assert torch.equal(Categorical(logits).deterministic_sample(), logits.argmax(-1))


def test_categorical_sampled_action_logp_is_logp_of_last_sample():
    dist = Categorical(_randn(10, 3, seed=14))
    actions = dist.sample(_gen(15))
    torch.testing.assert_close(dist.sampled_action_logp(), dist.logp(actions))


def test_categorical_temperature_scales_the_logits():
    logits = _randn(6, 4, seed=16)
    actions = torch.tensor([0, 1, 2, 3, 0, 1])
    expected = TorchCategorical(logits=logits / 2.0).log_prob(actions)
    torch.testing.assert_close(Categorical(logits, temperature=2.0).logp(actions), expected, atol=ATOL, rtol=0)


def test_old_api_call_style_with_a_list_of_actions():
    """`dist = Categorical(logits, None); dist.logp([1])` as in the old Policy API."""
    logits = torch.tensor([[0.2, 1.5, -0.3]])
    dist = Categorical(logits, None)
    logp = dist.logp([1])
    assert logp.shape == (1,)
    torch.testing.assert_close(logp, torch.log_softmax(logits, -1)[:, 1], atol=ATOL, rtol=0)


def test_categorical_accepts_numpy_inputs():
    logits = np.array([[0.1, 0.9], [2.0, -1.0]], dtype=np.float32)
    expected = TorchCategorical(logits=torch.from_numpy(logits)).log_prob(torch.tensor([1, 0]))
    torch.testing.assert_close(Categorical(logits).logp(np.array([1, 0])), expected, atol=ATOL, rtol=0)


# =========================================================================== MultiCategorical


NVEC = [3, 2, 4]


def _torch_multi(logits: torch.Tensor) -> list[TorchCategorical]:
    return [TorchCategorical(logits=chunk) for chunk in torch.split(logits, NVEC, dim=-1)]


def test_multi_categorical_logp_entropy_kl_match_torch():
    a, b = _randn(12, sum(NVEC), seed=20, scale=2.0), _randn(12, sum(NVEC), seed=21, scale=2.0)
    actions = torch.stack([torch.randint(0, n, (12,), generator=_gen(22 + i)) for i, n in enumerate(NVEC)], -1)
    dist_a, dist_b = MultiCategorical(a, input_lens=NVEC), MultiCategorical(b, input_lens=NVEC)
    ref_a, ref_b = _torch_multi(a), _torch_multi(b)
    expected_logp = sum(c.log_prob(actions[:, i]) for i, c in enumerate(ref_a))
    expected_entropy = sum(c.entropy() for c in ref_a)
    expected_kl = sum(kl_divergence(p, q) for p, q in zip(ref_a, ref_b))
    torch.testing.assert_close(dist_a.logp(actions), expected_logp, atol=ATOL, rtol=0)
    torch.testing.assert_close(dist_a.entropy(), expected_entropy, atol=ATOL, rtol=0)
    torch.testing.assert_close(dist_a.kl(dist_b), expected_kl, atol=ATOL, rtol=0)


def test_multi_categorical_samples_have_one_column_per_sub_space():
    dist = MultiCategorical(_randn(9, sum(NVEC), seed=25), input_lens=NVEC)
    sample = dist.sample(_gen(26))
    assert sample.shape == (9, len(NVEC))
    for i, n in enumerate(NVEC):
        assert sample[:, i].min() >= 0 and sample[:, i].max() < n


def test_multi_categorical_deterministic_sample_is_per_block_argmax():
    logits = _randn(5, sum(NVEC), seed=27)
    expected = torch.stack([chunk.argmax(-1) for chunk in torch.split(logits, NVEC, dim=-1)], -1)
    assert torch.equal(MultiCategorical(logits, input_lens=NVEC).deterministic_sample(), expected)


def test_multi_categorical_requires_input_lens():
    with pytest.raises(ValueError, match="input_lens"):
        MultiCategorical(_randn(2, 5))


# =========================================================================== DiagGaussian


def _gaussian_inputs(batch=16, dim=3, seed=30):
    mean = _randn(batch, dim, seed=seed)
    log_std = _randn(batch, dim, seed=seed + 1, scale=0.5)
    return mean, log_std, torch.cat([mean, log_std], -1)


def _torch_gaussian(mean, log_std):
    return Independent(Normal(mean, log_std.exp()), 1)


def test_diag_gaussian_logp_matches_torch():
    mean, log_std, inputs = _gaussian_inputs()
    actions = _randn(16, 3, seed=40, scale=2.0)
    expected = _torch_gaussian(mean, log_std).log_prob(actions)
    torch.testing.assert_close(DiagGaussian(inputs).logp(actions), expected, atol=ATOL, rtol=0)


def test_diag_gaussian_entropy_matches_torch():
    mean, log_std, inputs = _gaussian_inputs(seed=41)
    expected = _torch_gaussian(mean, log_std).entropy()
    torch.testing.assert_close(DiagGaussian(inputs).entropy(), expected, atol=ATOL, rtol=0)


def test_diag_gaussian_kl_matches_torch():
    mean_a, log_std_a, a = _gaussian_inputs(seed=42)
    mean_b, log_std_b, b = _gaussian_inputs(seed=44)
    expected = kl_divergence(_torch_gaussian(mean_a, log_std_a), _torch_gaussian(mean_b, log_std_b))
    torch.testing.assert_close(DiagGaussian(a).kl(DiagGaussian(b)), expected, atol=ATOL, rtol=0)


def test_diag_gaussian_deterministic_sample_is_the_mean():
    mean, _, inputs = _gaussian_inputs(seed=46)
    torch.testing.assert_close(DiagGaussian(inputs).deterministic_sample(), mean)


def test_diag_gaussian_samples_have_the_right_shape_and_moments():
    n = 20_000
    mean = torch.tensor([1.0, -2.0])
    log_std = torch.tensor([0.0, -1.0])
    inputs = torch.cat([mean, log_std]).expand(n, 4)
    samples = DiagGaussian(inputs).sample(_gen(47))
    assert samples.shape == (n, 2)
    torch.testing.assert_close(samples.mean(0), mean, atol=0.05, rtol=0)
    torch.testing.assert_close(samples.std(0), log_std.exp(), atol=0.03, rtol=0)


def test_diag_gaussian_clips_log_std():
    inputs = torch.tensor([[0.0, 50.0]])
    dist = DiagGaussian(inputs, log_std_clip=2.0)
    torch.testing.assert_close(dist.log_std, torch.tensor([[2.0]]))


# =========================================================================== SquashedGaussian


def test_squashed_gaussian_samples_lie_in_open_unit_interval():
    mean = _randn(5000, 2, seed=50)
    log_std = torch.zeros(5000, 2)
    dist = SquashedGaussian(torch.cat([mean, log_std], -1))
    samples = dist.sample(_gen(51))
    assert samples.shape == (5000, 2)
    assert samples.abs().max() < 1.0
    # Not simply clipped: the samples spread over the interval.
    assert samples.min() < -0.9 and samples.max() > 0.9


def test_squashed_gaussian_saturated_samples_stay_in_bounds_with_finite_logp():
    """Far-out pre-squash values round to +-1 in float32; they must not escape the
    bounds or make the log-likelihood infinite."""
    mean = _randn(2000, 2, seed=52, scale=20.0)
    dist = SquashedGaussian(torch.cat([mean, torch.ones(2000, 2)], -1))
    samples = dist.sample(_gen(53))
    assert samples.abs().max() <= 1.0
    assert torch.isfinite(dist.sampled_action_logp()).all()


def test_squashed_gaussian_logp_matches_change_of_variables():
    """log p(a) = log N(atanh(a); mean, std) - sum log(1 - a^2) for a = tanh(u)."""
    mean, log_std, inputs = _gaussian_inputs(batch=32, dim=2, seed=52)
    actions = torch.tanh(_randn(32, 2, seed=54))  # well inside (-1, 1)
    pre = torch.atanh(actions)
    expected = Normal(mean, log_std.exp()).log_prob(pre).sum(-1) - torch.log(1.0 - actions.pow(2)).sum(-1)
    torch.testing.assert_close(SquashedGaussian(inputs).logp(actions), expected, atol=1e-4, rtol=0)


def test_squashed_gaussian_deterministic_sample_is_tanh_of_mean():
    mean, _, inputs = _gaussian_inputs(seed=55)
    torch.testing.assert_close(SquashedGaussian(inputs).deterministic_sample(), torch.tanh(mean))


def test_squashed_gaussian_logp_is_finite_at_the_bounds():
    inputs = torch.zeros(1, 2)
    assert torch.isfinite(SquashedGaussian(inputs).logp(torch.tensor([1.0]).reshape(1, 1))).all()


# =========================================================================== dist_class_for_space


def test_dist_class_for_discrete_is_categorical():
    cls, kwargs = dist_class_for_space(gym.spaces.Discrete(4))
    assert cls is Categorical
    assert kwargs == {}
    assert cls.required_input_dim(gym.spaces.Discrete(4)) == 4


def test_dist_class_for_multi_discrete_is_multi_categorical_with_nvec():
    space = gym.spaces.MultiDiscrete([3, 2, 4])
    cls, kwargs = dist_class_for_space(space)
    assert cls is MultiCategorical
    assert kwargs == {"input_lens": [3, 2, 4]}
    assert cls.required_input_dim(space) == 9


def test_dist_class_for_box_is_diag_gaussian_with_the_model_clip():
    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    cls, kwargs = dist_class_for_space(space, {"log_std_clip_param": 5.0})
    assert cls is DiagGaussian
    assert kwargs == {"log_std_clip": 5.0}
    assert cls.required_input_dim(space) == 6


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Tuple((gym.spaces.MultiBinary(2),)),
        gym.spaces.Text(5),
    ],
)
def test_dist_class_for_unsupported_spaces_is_not_supported_yet(space):
    with pytest.raises(NotSupportedYetError, match="not supported yet"):
        dist_class_for_space(space)


def test_bound_distribution_passes_its_kwargs():
    space = gym.spaces.MultiDiscrete([3, 2, 4])
    cls, kwargs = dist_class_for_space(space)
    bound = BoundDistribution(cls, **kwargs)
    dist = bound(_randn(2, 9, seed=60), None)
    assert isinstance(dist, MultiCategorical)
    assert dist.input_lens == [3, 2, 4]
