"""Ray Tune integration: rlx algorithms run in Tune like RLlib's.

    from ray import tune
    from rlx.algorithms.ppo import PPO, PPOConfig

    config = PPOConfig().environment("CartPole-v1").training(lr=tune.grid_search([1e-2, 1e-3, 1e-4]))
    results = tune.Tuner(
        "PPO",  # or PPO, the class
        param_space=config,  # or config.to_dict()
        run_config=tune.RunConfig(stop={"training_iteration": 20},
                                  checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True)),
    ).fit()
    best = results.get_best_result(metric="env_runners/episode_return_mean", mode="max")
    algo = PPO.from_checkpoint(best.checkpoint)

`tune.run("PPO", config={"env": ..., "lr": tune.grid_search([...])}, stop={...})` works as
well. Importing this module imports Ray (the `tune` extra: from an rlx checkout,
pip install -c constraints.txt -e '.[tune]') and
registers "PPO", "DQN", ... with Tune. It need not be imported by hand: once any
`rlx.algorithms` module and `ray.tune` are both imported, in either order, rlx imports it
(rlx/_tune_autoregister.py). Nothing else in rlx imports Ray. See docs/tune.md.
"""
from __future__ import annotations

from rlx.utils.errors import install_hint

try:
    import ray.tune  # noqa: F401
except ImportError as _err:  # pragma: no cover - exercised with ray missing
    raise ImportError(
        "rlx.tune runs rlx algorithms with Ray Tune, which is not installed: " + install_hint("tune")
    ) from _err

from rlx.tune.registration import (
    install_algorithm_class_hook,
    install_reinit_hook,
    install_rllib_fallback_guard,
    register_algorithms,
    register_config_class,
    register_envs,
)
from rlx.tune.trainable import AlgorithmTrainable, trainable

register_algorithms()
register_envs()
install_reinit_hook()
install_algorithm_class_hook()
install_rllib_fallback_guard()
register_config_class()

__all__ = ["AlgorithmTrainable", "register_algorithms", "register_envs", "trainable"]
