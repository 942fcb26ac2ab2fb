"""DD-PPO (Wijmans et al., 2020): decentralized distributed PPO.

Design: each DD-PPO worker is a rank of rlx's LearnerGroup (rlx.core.learner_group) that owns
an EnvRunner. With `num_env_runners=N` (N >= 1) the Algorithm starts N learners (no separate
EnvRunners): learner processes on this machine, or, with Ray initialised (or
`learner_backend="ray"`), Ray actors in one placement group whose bundles take
`num_cpus_per_env_runner`, `num_gpus_per_env_runner` and `custom_resources_per_env_runner`, spread
over the cluster's nodes as `placement_strategy` says (each worker then samples on its own node).
Every training step, each rank samples one fragment per
sub-env with the EnvRunner living in its own process (built on first use, sharing that rank's
module, so its weights are always the rank's current ones), then runs PPO's update on that
batch. The gradients are all-reduced among the ranks (gloo on CPU) by the LearnerGroup's own
mechanism (`LearnerGroup.update_from_own_batches`, the same all-reduce `update_from_batch`
uses), so all ranks take identical optimizer steps and keep identical weights. Only metrics,
step counts and episode statistics travel to the driver; the batches never do.

`keep_local_weights_in_sync=True` copies rank 0's weights into the driver's module after every
update (what `compute_single_action`, evaluation and checkpoints read); with False they are
copied once per `train()` (before evaluation and at its end).

Per-worker sizes follow RLlib's: each rank's batch is `rollout_fragment_length *
num_envs_per_env_runner` steps (`train_batch_size` must be left unset) and `minibatch_size`
(`sgd_minibatch_size`) is per rank; N ranks together step on N * minibatch_size samples.
With `num_env_runners=0` the driver is the only worker: PPO's training step on its local runner.
"""
from __future__ import annotations

from typing import Any

from rlx.algorithms.algorithm_config import AlgorithmConfig
from rlx.algorithms.config_options import Option, boolean, choice
from rlx.algorithms.ppo.ppo import PPO, PPOConfig
from rlx.utils.errors import ConfigError, NotSupportedYetError

T = ("training",)


class DDPPOConfig(PPOConfig):
    """Config of DD-PPO: PPOConfig with DD-PPO's options and RLlib's DD-PPO defaults (2 workers
    with 5 sub-envs each, fragments of 100 steps, minibatches of 50 per worker, 10 epochs, no
    KL penalty).

    Example:
        >>> config = DDPPOConfig().environment("CartPole-v1").env_runners(num_env_runners=2)
        >>> algo = config.build()
    """

    _extra_options = [
        Option("keep_local_weights_in_sync", True, T, boolean,
               doc="Copy the workers' weights into the driver's module after every update (False: once per "
                   "train() call)."),
        Option("torch_distributed_backend", "gloo", T, choice("gloo", "nccl"),
               doc="torch.distributed backend of the workers' all-reduce: 'gloo' (CPU); 'nccl' needs "
                   "num_gpus_per_env_runner > 0."),
    ]
    _default_overrides = {
        "num_env_runners": 2,
        "num_envs_per_env_runner": 5,
        "rollout_fragment_length": 100,
        "minibatch_size": 50,
        "num_epochs": 10,
        "kl_coeff": 0.0,
        "kl_target": 0.0,
        "lr": 5e-4,
    }

    def __init__(self, algo_class: Any = None):
        super().__init__(algo_class=algo_class or DDPPO)

    def _adapt_unset_defaults(self) -> None:
        super()._adapt_unset_defaults()
        v = self._values
        if not self.is_user_set("minibatch_size"):
            v["minibatch_size"] = self._table.options["minibatch_size"].default
        fragment = v["rollout_fragment_length"]
        if fragment != "auto" and not self.is_user_set("train_batch_size"):
            v["train_batch_size"] = int(fragment) * int(v["num_envs_per_env_runner"])

    def _validate_algorithm_settings(self) -> None:
        v = self._values
        if v["rollout_fragment_length"] == "auto":
            raise ConfigError("DD-PPO's workers each train on rollout_fragment_length * num_envs_per_env_runner "
                              "steps: set rollout_fragment_length to an int (e.g. 100).")
        per_worker = int(v["rollout_fragment_length"]) * int(v["num_envs_per_env_runner"])
        if self.is_user_set("train_batch_size") and v["train_batch_size"] != per_worker:
            raise ConfigError(
                f"DD-PPO's workers each train on their own rollout_fragment_length * num_envs_per_env_runner "
                f"= {per_worker} steps; train_batch_size={v['train_batch_size']} cannot be honoured. Leave "
                "train_batch_size unset and set rollout_fragment_length instead.")
        if v["num_learners"] > 0:
            raise ConfigError("DD-PPO's workers are its learners: set num_env_runners (the number of workers), "
                              "not num_learners.")
        if v["batch_mode"] != "truncate_episodes":
            raise ConfigError("DD-PPO samples fixed-size fragments: use batch_mode='truncate_episodes'.")
        if v["num_gpus_per_env_runner"] and v["torch_distributed_backend"] != "nccl":
            raise ConfigError("num_gpus_per_env_runner > 0 trains the DD-PPO workers on GPUs: set "
                              "torch_distributed_backend='nccl'.")
        if v["torch_distributed_backend"] == "nccl" and not v["num_gpus_per_env_runner"]:
            raise ConfigError("torch_distributed_backend='nccl' needs GPUs: set num_gpus_per_env_runner=1, or "
                              "use 'gloo' on CPU.")
        if v["num_env_runners"] > 0 and v["observation_filter"] != "NoFilter":
            raise NotSupportedYetError(f"observation_filter={v['observation_filter']!r} with DD-PPO workers",
                                       "the workers' filter statistics are not merged",
                                       fix="Use observation_filter='NoFilter' or num_env_runners=0.")
        super()._validate_algorithm_settings()


class _SampleOwnBatch:
    """Runs in a DD-PPO worker (a learner process): its own EnvRunner, built on first use
    around the worker's module, samples one fragment per sub-env; returns (batch, (env steps,
    the runner's metrics))."""

    def __init__(self, config: AlgorithmConfig, num_workers: int, timestep: int):
        self.config, self.num_workers, self.timestep = config, num_workers, timestep

    def runner(self, learner: Any, rank: int) -> Any:
        """The worker's EnvRunner (built on first use around the worker's module). Also what a
        replacement worker runs before it joins (LearnerGroup.prepare_replacement)."""
        from rlx.env.env_runner import SingleAgentEnvRunner

        runner = getattr(learner, "_ddppo_env_runner", None)
        if runner is None:
            module = getattr(learner.module, "unwrapped_module", learner.module)
            runner = SingleAgentEnvRunner(config=self.config, worker_index=rank + 1, num_workers=self.num_workers,
                                          module=module)
            learner._ddppo_env_runner = runner
        return runner

    def __call__(self, learner: Any, rank: int) -> tuple[Any, tuple[int, Any]]:
        from rlx.env.env_runner_group import num_sampled_steps

        runner = self.runner(learner, rank)
        runner.num_env_steps_sampled_lifetime = int(self.timestep)
        batch = runner.sample()
        return batch, (num_sampled_steps(batch, self.config.count_steps_by), runner.get_metrics())


class DDPPO(PPO):
    """Decentralized distributed PPO: workers that each sample and train, with gradients
    all-reduced among them (see the module docstring for the design)."""

    _config_class = DDPPOConfig

    def setup(self, config: AlgorithmConfig) -> None:
        """The driver's runner and Learner (num_env_runners=0 for them), then the workers: a
        LearnerGroup of num_env_runners ranks."""
        self.num_workers = int(config.num_env_runners)
        if self.num_workers == 0:
            super().setup(config)
            return
        driver_config = config.copy(copy_frozen=False)
        driver_config.env_runners(num_env_runners=0)
        driver_config.freeze()
        super().setup(driver_config)
        from rlx.core.learner.learner_group import LearnerGroup  # torch: only with workers

        # LearnerGroup gives each of its N ranks minibatch_size // N: hand it N per-worker minibatches.
        group_config = config.copy(copy_frozen=False)
        group_config.training(minibatch_size=config.minibatch_size * self.num_workers,
                              train_batch_size=config.train_batch_size * self.num_workers)
        group_config.learners(num_cpus_per_learner=config.num_cpus_per_env_runner,
                              num_gpus_per_learner=config.num_gpus_per_env_runner)
        group_config.freeze()
        driver_learner = self.learner
        self.learner = LearnerGroup(group_config, self._resolved_learner_class(), driver_learner.module,
                                    num_learners=self.num_workers,
                                    custom_resources=dict(config.custom_resources_per_env_runner or {}))
        # A worker that replaces a lost one (Ray) builds its EnvRunner before it joins the others.
        self.learner.prepare_replacement = _SampleOwnBatch(config, self.num_workers, 0).runner
        self._worker_config = config

    def training_step(self) -> dict[str, Any]:
        """Every worker samples its own batch and trains on it, gradients all-reduced."""
        if self.num_workers == 0:
            return self.sample_and_learn()
        timestep = self._counters["num_env_steps_sampled_lifetime"]
        metrics, infos = self.learner.update_from_own_batches(
            _SampleOwnBatch(self._worker_config, self.num_workers, timestep), timestep,
            fetch_weights=self.config.keep_local_weights_in_sync)
        self.weights_version += 1
        steps = sum(int(s) for s, _ in infos)
        for key in ("num_env_steps_sampled_lifetime", "num_agent_steps_sampled_lifetime",
                    "num_env_steps_trained_lifetime", "num_agent_steps_trained_lifetime"):
            self._counters[key] += steps
        self.metrics.merge_and_log_n_dicts([m for _, m in infos], key="env_runners")
        return self.module_results(metrics)

    def _pull_worker_weights(self) -> None:
        if self.num_workers and not self.config.keep_local_weights_in_sync:
            self.learner.pull_weights()

    def evaluate(self) -> dict[str, Any]:
        """Evaluate the workers' current weights."""
        self._pull_worker_weights()
        return super().evaluate()

    def train(self) -> dict[str, Any]:
        """One iteration; without keep_local_weights_in_sync the driver gets the weights at its end."""
        result = super().train()
        self._pull_worker_weights()
        return result


# Old names (Trainer era).
DDPPOTrainer = DDPPO
DEFAULT_CONFIG = DDPPOConfig().to_dict()
