"""Bad config values are clear errors that name the key: a fuzz over every algorithm's options.

For each option whose kind of value is clear from its default (numbers, booleans, choices,
dicts, schedules), values that can never be valid for that kind (NaN, infinities where the
option has no use for them, strings for numbers, numbers for booleans, ...) are set through
the option's own section method. Each must raise a ConfigError whose message names the key;
nothing else (a TypeError from deep inside, or silence) passes.
"""
from __future__ import annotations

import math
import random

import pytest

from rlx.algorithms.ddpg import DDPGConfig
from rlx.algorithms.dqn import DQNConfig
from rlx.algorithms.ppo import PPOConfig
from rlx.algorithms.sac import SACConfig
from rlx.algorithms.td3 import TD3Config
from rlx.utils.errors import ConfigError

CONFIGS = [PPOConfig, DQNConfig, SACConfig, DDPGConfig, TD3Config]
NAN, INF = float("nan"), float("inf")

#: Options whose value is a free-form dict or list the option passes on (checked where it is used).
FREE_FORM = {"env_config", "custom_resources_per_env_runner", "evaluation_config", "optimizer", "input_config",
             "output_config", "off_policy_estimation_methods", "logger_config", "algorithm_config_overrides_per_module",
             "optimization_config", "exploration_config", "replay_buffer_config", "model"}


def _bad_values(opt) -> list:
    default = opt.default
    if opt.name in FREE_FORM or opt.later or opt.tf_only:
        return []
    if isinstance(default, bool):
        return ["yes", 2, 1.5, [True]]
    if isinstance(default, (int, float)):
        # No option takes infinity: timeouts use None or 0 for "no limit".
        return [NAN, INF, -INF, "fast", {"value": 1}, [1, "x"], [[0, NAN]]]
    # SAC's target_entropy: "auto" or a number; input_: "sampler" or any path (checked when read);
    # action_mask_key: any key name of a Dict observation.
    if isinstance(default, str) and opt.name not in ("target_entropy", "input_", "action_mask_key"):
        return ["definitely-not-a-valid-choice-42", 3.5, NAN]
    if isinstance(default, dict):
        return ["not-a-dict", 3, [1, 2]]
    return []


def _cases() -> list[tuple[type, str, object]]:
    cases = []
    for config_cls in CONFIGS:
        for opt in config_cls._table.options.values():
            if not opt.sections:
                continue
            for value in _bad_values(opt):
                cases.append((config_cls, opt.name, value))
    # Range errors that need to know the option: negative or NaN schedule values and rates.
    for config_cls, name in [(PPOConfig, "lr"), (PPOConfig, "entropy_coeff"), (SACConfig, "actor_lr"),
                             (SACConfig, "critic_lr"), (SACConfig, "alpha_lr"), (DDPGConfig, "actor_lr"),
                             (DQNConfig, "lr")]:
        cases += [(config_cls, name, [[0, -1.0]]), (config_cls, name, [[0, 1e-3], [100, NAN]]),
                  (config_cls, name, [[0, 1e-3], [100, INF]]), (config_cls, name, -1e-3)]
    for name in ("q_model_config", "policy_model_config"):
        cases += [(SACConfig, name, {"fcnet_hiddens": "wide"}), (SACConfig, name, {"fcnet_activation": "bogus"}),
                  (SACConfig, name, {"fcnet_hidens": [64]}), (SACConfig, name, "not-a-dict")]
    return cases


def _section_of(config_cls: type, name: str) -> str:
    return config_cls._table.options[name].sections[0]


def test_hundreds_of_bad_values_are_clear_errors_naming_the_key():
    cases = _cases()
    random.Random(0).shuffle(cases)
    assert len(cases) >= 300
    problems = []
    for config_cls, name, value in cases:
        config = config_cls()
        section = getattr(config, _section_of(config_cls, name))
        try:
            section(**{name: value})
        except ConfigError as err:
            if name not in str(err):
                problems.append(f"{config_cls.__name__}.{name}={value!r}: error does not name the key: {err}")
        except Exception as err:  # noqa: BLE001 - what the test looks for
            problems.append(f"{config_cls.__name__}.{name}={value!r}: {type(err).__name__}: {err}")
        else:
            problems.append(f"{config_cls.__name__}.{name}={value!r}: accepted")
    assert not problems, f"{len(problems)} of {len(cases)} bad values:\n" + "\n".join(problems)


@pytest.mark.parametrize("kwargs, key", [
    ({"v_min": 10.0, "v_max": -10.0}, "v_min"),
    ({"v_min": 1.0, "v_max": 1.0, "num_atoms": 51}, "v_min"),
])
def test_dqn_value_range_must_be_ordered(kwargs, key):
    config = DQNConfig().environment("CartPole-v1").training(**kwargs)
    with pytest.raises(ConfigError, match=key):
        config.validate()


def test_legacy_prioritized_replay_must_be_a_bool():
    with pytest.raises(ConfigError, match="prioritized_replay"):
        DQNConfig.from_dict({"prioritized_replay": "yes"})


@pytest.mark.parametrize("optimizer, key", [
    ({"type": "sgd", "momentum": -1.0}, "momentum"),
    ({"type": "adam", "eps": float("nan")}, "eps"),
    ({"type": "adam", "betas": (1.5, 0.999)}, "betas"),
    ({"type": "adam", "weight_decay": -0.1}, "weight_decay"),
])
def test_optimizer_settings_are_range_checked(optimizer, key):
    config = PPOConfig().environment("CartPole-v1").training(optimizer=optimizer, train_batch_size=64)
    with pytest.raises(ConfigError, match=key):
        config.build()


def test_nan_never_reaches_a_built_algorithm():
    config = PPOConfig().environment("CartPole-v1")
    for key in ("gamma", "lr", "clip_param", "kl_target", "vf_loss_coeff"):
        with pytest.raises(ConfigError, match=key):
            config.training(**{key: NAN})
    assert not math.isnan(config.gamma)


# ---------------------------------------------------------------- end to end: no hang, no raw error

def _probe_module():
    """benchmarks/config_fuzz_probe.py, the fuzz harness (its cases, bad values and the forked,
    time-bounded build-and-train of one case)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "config_fuzz_probe.py"
    spec = importlib.util.spec_from_file_location("config_fuzz_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _configure_within(probe, case, seconds: float = 60.0) -> tuple[str, str]:
    """Stage 1 of the probe (set the value, validate) on a thread: ('hang', ...) past `seconds`
    (generous: a first check of a torch.compile backend imports torch._dynamo, ~10 s on a busy
    machine)."""
    import threading

    out: list = []
    thread = threading.Thread(target=lambda: out.append(probe.configure_only(case)), daemon=True)
    thread.start()
    thread.join(seconds)
    return out[0] if out else ("hang", f"validate() gave no answer within {seconds} s")


def _fuzz(algos: list[str], sample: int, trained: int, seed: int = 0) -> list[str]:
    """Set a fixed-seed sample of bad values (wrong types, NaN, inf, negatives, huge) and validate;
    build and train one tiny iteration (forked, time-bounded) for `trained` of the huge values
    that validation accepts. Returns the cases that hung or ended in an error not naming the key."""
    probe = _probe_module()
    cases = probe.cases(algos)
    rng = random.Random(seed)
    if sample < len(cases):
        cases = rng.sample(cases, sample)
    problems, accepted_huge = [], []
    for case in cases:
        outcome, detail = _configure_within(probe, case)
        if outcome in ("raw", "hang"):
            problems.append(f"{case[0]}.{case[1]}={probe.show_value(case[2])}: {outcome}: {detail}")
        elif outcome == "ran" and case[2] in (1e308, 2 ** 70, 10 ** 12) and case[1] not in probe.RUN_LENGTH_OPTIONS \
                and case[0] in probe.BASES:
            accepted_huge.append(case)
    for case in rng.sample(accepted_huge, min(trained, len(accepted_huge))):
        outcome, detail, _ = probe.probe(case, 2, timeout=60.0)
        if outcome in ("raw", "hang"):
            problems.append(f"{case[0]}.{case[1]}={probe.show_value(case[2])} (built): {outcome}: {detail}")
    return problems


def test_fuzzed_config_values_end_in_an_error_naming_the_key_or_run():
    """A fixed-seed sample over seven algorithms' options; the whole surface is the slow test below."""
    problems = _fuzz(["PPO", "DQN", "SAC", "IMPALA", "APPO", "A2C", "DDPG"], sample=800, trained=2)
    assert not problems, f"{len(problems)} bad values hung or ended in a raw error:\n" + "\n".join(problems)


@pytest.mark.slow
def test_fuzzed_config_values_of_every_algorithm_end_in_an_error_naming_the_key_or_run():
    from rlx.algorithms.registry import ALGORITHMS

    # A fixed-seed eighth of every algorithm's options x bad values; benchmarks/config_fuzz_probe.py
    # runs the whole surface (about 35,000 cases) when asked.
    problems = _fuzz(list(ALGORITHMS), sample=4500, trained=4)
    assert not problems, f"{len(problems)} bad values hung or ended in a raw error:\n" + "\n".join(problems)
