"""Off-policy estimation during evaluation: the estimates under result["evaluation"]["off_policy_estimator"].

When the evaluation config's `off_policy_estimation_methods` (or the old `input_evaluation`)
is set, every evaluation reads offline data from the evaluation config's `input_` (for an
offline algorithm that is its training input, unless `evaluation_config` names another),
trains the estimators that have a model (DM, DR) on it, and reports each estimator's
`estimate()` of the current policy under its name. The env evaluation runs as before.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlx.core.columns import Columns
from rlx.offline.concat import concat_flat, num_rows
from rlx.offline.episode_rows import AGENT_INDEX, EPS_ID
from rlx.offline.estimators.methods import build_estimators, configured_methods
from rlx.offline.input_factory import input_mentions_sampler, make_input_reader
from rlx.offline.io_context import IOContext
from rlx.offline.spaces import check_batch, policy_batches, spaces_of
from rlx.offline.training_batch import _flat_columns
from rlx.core.sample_batch import SampleBatch, as_multi_agent
from rlx.utils.errors import ConfigError, NotSupportedYetError


class OffPolicyEvaluation:
    """The estimators of one Algorithm and the reader of their data."""

    def __init__(self, algorithm: Any, methods: dict[str, dict]):
        eval_config = algorithm.evaluation_config
        if input_mentions_sampler(eval_config.input_):
            raise ConfigError(
                "off_policy_estimation_methods estimates the policy from offline data, but evaluation reads "
                f"input_={eval_config.input_!r}. Point evaluation at the files: config.evaluation(evaluation_config="
                "{'input_': '/path/to/data'}), or train from offline input (input_=...), which evaluation inherits.")
        runner = algorithm.env_runner
        self._spaces = spaces_of(runner)
        if len(self._spaces) != 1 or algorithm.learners.sole_module_id is None:
            raise NotSupportedYetError("off_policy_estimation_methods with several policies",
                                       fix="Estimate a single-agent policy.")
        self._config = eval_config
        self._policy_id = next(iter(self._spaces))
        self._algorithm = algorithm
        self._split_by_episode = bool(eval_config.ope_split_batch_by_episode)
        self._reader = make_input_reader(IOContext(log_dir=lambda: algorithm.logdir, config=eval_config,
                                                   worker_index=0, worker=runner, sampler=None))
        self.estimators = build_estimators(methods, algorithm.get_policy(), float(eval_config.gamma))

    def _read(self) -> SampleBatch:
        """Flat rows covering `evaluation_duration` episodes or timesteps (one reader batch for 'auto')."""
        cfg = self._config
        duration, unit = cfg.evaluation_duration, cfg.evaluation_duration_unit
        batches, count = [], 0
        while not batches or (duration != "auto" and count < int(duration)):
            batch = self._reader.next()
            where = f"a batch of the evaluation input {type(self._reader).__name__}"
            check_batch(batch, self._spaces, where)
            batches.append(batch)
            if unit == "timesteps":
                count += num_rows(batch, cfg.count_steps_by)
            else:
                columns = policy_batches(batch, self._spaces, where)[self._policy_id]
                count += int(np.sum(np.asarray(columns[Columns.TERMINATEDS], bool)
                                    | np.asarray(columns.get(Columns.TRUNCATEDS, False), bool)))
        batch = concat_flat(batches)
        columns = as_multi_agent(batch, self._policy_id)[self._policy_id]
        return self._module_rows(columns)

    def _module_rows(self, columns: Any) -> SampleBatch:
        """The rows as the policy's module reads them (Box actions normalized as for training),
        with their episode ids and behaviour probabilities."""
        cfg = self._config
        normalize = bool(cfg.normalize_actions) and not cfg.actions_in_input_normalized
        out = SampleBatch(_flat_columns(columns, self._spaces[self._policy_id].actions, normalize, False))
        for key in (EPS_ID, AGENT_INDEX):
            if key in columns:
                out[key] = np.asarray(columns[key])
        return out

    def run(self) -> dict[str, dict[str, float]]:
        """{estimator name: its estimates} on a fresh read of the evaluation data."""
        batch = self._read()
        results = {}
        for name, estimator in self.estimators.items():
            train_metrics = estimator.train(batch)
            estimates = estimator.estimate(batch, split_batch_by_episode=self._split_by_episode)
            results[name] = {**estimates, **{k: float(v) for k, v in (train_metrics or {}).items()}}
        return results


def off_policy_estimates(algorithm: Any) -> dict[str, dict[str, float]] | None:
    """The `off_policy_estimator` section of an evaluation result, or None when the evaluation
    config asks for no estimators. The estimators are built on first use and kept (DM/DR keep
    training their Q-models over evaluations)."""
    ope = getattr(algorithm, "_off_policy_evaluation", None)
    if ope is None:
        methods = configured_methods(algorithm.evaluation_config)
        if not methods:
            return None
        ope = OffPolicyEvaluation(algorithm, methods)
        algorithm._off_policy_evaluation = ope
    return ope.run()

