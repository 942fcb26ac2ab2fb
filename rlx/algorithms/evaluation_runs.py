"""An Algorithm's evaluations: its evaluation EnvRunnerGroup, giving that group the current
weights, running one evaluation (the config's custom_evaluation_function, or the schedule of
rlx.algorithms.evaluation), after the training step or on a thread beside it
(`evaluation_parallel_to_training`), and compiling what it collected into the results train()
reports under `result["evaluation"]`.

The evaluation runners live where the training runners do: Ray actors when those are Ray
actors (on any node of the cluster, with their own placement group, or their own bundles of a
Tune trial's), else threads of the driver. Failed evaluation runners are restarted as the
fault-tolerance settings say (restart_failed_env_runners, ...): a thread at once, a Ray actor in
the background, joining the next evaluation once it is built.
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, wait as wait_futures
from typing import TYPE_CHECKING, Any, Sequence

from rlx.algorithms.evaluation import EvaluationPlan, add_off_policy_estimates, run_evaluation
from rlx.algorithms.results import summarize_runner_metrics
from rlx.offline.runner_output import close_runner_output

if TYPE_CHECKING:
    from rlx.algorithms.algorithm import Algorithm
    from rlx.algorithms.algorithm_config import AlgorithmConfig

logger = logging.getLogger("rlx")


def evaluation_config(algo: "Algorithm") -> "AlgorithmConfig":
    """The frozen config of `algo`'s evaluation EnvRunners (`evaluation_config` applied to its
    config, `in_evaluation=True`), made once."""
    eval_config = getattr(algo, "_evaluation_config", None)
    if eval_config is None:
        eval_config = algo.config.get_evaluation_config_object()
        eval_config.validate()
        eval_config.freeze()
        setattr(algo, "_evaluation_config", eval_config)  # cached on the Algorithm, made once
    return eval_config


def evaluation_backend(algo: "Algorithm") -> str:
    """Where `algo`'s evaluation runners live: "ray" (Ray actors) when its training runners are
    Ray actors, else "thread" (threads of the driver)."""
    training = getattr(algo.env_runner_group, "backend", None)
    return "ray" if training == "ray" else "thread"


def eval_env_runner_group(algo: "Algorithm") -> Any:
    """`algo`'s evaluation EnvRunnerGroup, built on first use (a local runner when
    evaluation_num_env_runners is 0; remote ones on `evaluation_backend`)."""
    if algo.eval_env_runner_group is None:
        from rlx.algorithms.components import make_env_runner_group  # runner groups load torch

        eval_config = evaluation_config(algo)
        algo.eval_env_runner_group = make_env_runner_group(
            algo, eval_config, local_env_runner=eval_config.num_env_runners == 0,
            remote_backend=evaluation_backend(algo),
            # In a Tune trial's placement group, the evaluation runners' bundles follow the training runners'.
            placement_bundle_offset=int(algo.config.num_env_runners or 0))
    return algo.eval_env_runner_group


class EvaluationSync:
    """The call giving one evaluation runner the weights to evaluate (version `seq_no`; a Ray
    ObjectRef for Ray actors, read by each from the object store), the training runners'
    observation filter, and their exploration state when the runner explores the same way."""

    def __init__(self, weights: Any, seq_no: int, filter_state: Any, exploration: Any):
        self.weights, self.seq_no, self.filter_state = weights, seq_no, filter_state
        self.exploration_cls, self.exploration_state = type(exploration), exploration.get_state()

    def __call__(self, runner: Any) -> None:
        from rlx.env.runner_group.calls import shared_value

        runner.set_weights(shared_value(self.weights), weights_seq_no=self.seq_no)
        runner.filter.set_state(self.filter_state)
        if type(runner.exploration) is self.exploration_cls:
            runner.exploration.set_state(self.exploration_state)


def sync_evaluation_runners(algo: "Algorithm") -> list[Any]:
    """Give every idle evaluation runner in service the current weights (version = iteration),
    observation filter and exploration state of the training runners; return the handles
    of the runners synced.

    A runner still busy (stuck in an earlier, timed-out evaluation; the driver's own
    evaluation runner included) is left alone: its weights must not change under a
    running episode. It is synced again once it is free, at the next evaluation. Restarted
    runners that were built since the last evaluation join here (on_env_runners_recreated
    fires for them). A Ray runner that does not take the weights within
    evaluation_sample_timeout_s is left out of this evaluation.
    """
    from rlx.env.runner_group.weight_sync import shared_payload  # runner groups load torch
    from rlx.env.threaded_env_runner import ThreadedEnvRunner

    group = eval_env_runner_group(algo)
    handles = [h for h in group.runners_in_service() if not h.busy]
    _report_recreated(algo, group, group.take_restarted_indices())
    if not handles:
        return []
    source = algo.env_runner
    call = EvaluationSync(algo.learner.get_weights(), algo.iteration, source.filter.get_state(), source.exploration)
    synced = [h for h in handles if isinstance(h, ThreadedEnvRunner)]
    for handle in synced:
        call(handle.runner)
    remote = [h for h in handles if not isinstance(h, ThreadedEnvRunner)]
    if remote:
        call.weights = shared_payload(group, call.weights)
        futures = [(h, h.submit(call)) for h in remote]
        wait_futures([f for _, f in futures], timeout=float(algo.config.evaluation_sample_timeout_s))
        synced.extend(h for h, f in futures if f.done() and f.exception() is None)
    return synced


def evaluate(algo: "Algorithm") -> dict[str, Any]:
    """One evaluation of `algo`'s current weights, now (see Algorithm.evaluate)."""
    algo.callbacks.fire("on_evaluate_start", algorithm=algo, metrics_logger=algo.metrics)
    synced = sync_evaluation_runners(algo)
    return finish_evaluation(algo, *evaluation_results(algo, synced))


def start_parallel_evaluation(algo: "Algorithm", training_done: threading.Event) -> Future:
    """Sync the evaluation runners now (so they evaluate the weights from before the training
    step) and run the evaluation on a thread; the Future holds `evaluation_results`' result,
    to be passed to `finish_evaluation` once the training step is over.

    Callbacks stay on the caller's thread (on_evaluate_end fires in `finish_evaluation`), so
    they can use the Algorithm's MetricsLogger while nothing else does.
    """
    algo.callbacks.fire("on_evaluate_start", algorithm=algo, metrics_logger=algo.metrics)
    synced = sync_evaluation_runners(algo)
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(evaluation_results(algo, synced, training_done))
        except BaseException as err:  # re-raised in train() by future.result()
            future.set_exception(err)

    threading.Thread(target=run, name="rlx-parallel-evaluation", daemon=True).start()
    return future


def evaluation_results(algo: "Algorithm", synced: list[Any], training_done: threading.Event | None = None,
                       ) -> tuple[dict[str, Any], list[int], list[int]]:
    """(results, indices of runners that failed, indices of runners that finished work) of one
    evaluation on the `synced` runners."""
    cfg = algo.config
    group = eval_env_runner_group(algo)
    custom = cfg.custom_evaluation_function
    if custom is not None:
        logger.info("Running custom eval function %s", custom)
        results = custom(algo, group)
        if not isinstance(results, dict):
            raise TypeError(
                f"custom_evaluation_function {getattr(custom, '__qualname__', custom)} returned "
                f"{type(results).__name__}; it must return a dict of metrics."
            )
        return results, [], []
    eval_cfg = evaluation_config(algo)
    plan = EvaluationPlan(
        duration=cfg.evaluation_duration,
        unit=cfg.evaluation_duration_unit,
        num_envs_per_runner=int(eval_cfg.num_envs_per_env_runner),
        auto_timesteps_per_unit=int(eval_cfg.get_rollout_fragment_length()) * int(eval_cfg.num_envs_per_env_runner),
        timeout_s=float(cfg.evaluation_sample_timeout_s),
        asynchronous=bool(cfg.enable_async_evaluation),
        tolerate_failures=bool(cfg.ignore_env_runner_failures or cfg.restart_failed_env_runners),
        stop_event=training_done,
        output_log_dir=algo.logdir if eval_cfg.output == "logdir" else None,
    )
    outcome = run_evaluation(synced, plan)
    results = compile_eval_results(algo, outcome.metrics)
    add_off_policy_estimates(algo, results)
    return results, outcome.failed_runner_indices, outcome.delivered_runner_indices


def close_evaluation_output(algo: "Algorithm") -> None:
    """Complete the offline output files `algo`'s evaluation runners wrote (`output`; with
    output_write_remaining_data, the rows they still buffer too)."""
    group = getattr(algo, "eval_env_runner_group", None)
    if group is not None and evaluation_config(algo).output is not None:
        group.foreach_env_runner(close_runner_output)


def finish_evaluation(algo: "Algorithm", results: dict[str, Any], failed_runner_indices: list[int],
                      delivered_runner_indices: Sequence[int] = ()) -> dict[str, Any]:
    """Restart failed runners (if configured), fire on_evaluate_end and remember the results."""
    group = algo.eval_env_runner_group
    for index in delivered_runner_indices:
        if index > 0:  # a remote runner that worked: its next failure is a first one again
            group.runner_delivered(index)
    if failed_runner_indices and algo.config.restart_failed_env_runners:
        restart_eval_runners(algo, failed_runner_indices)
    algo.callbacks.fire("on_evaluate_end", algorithm=algo, metrics_logger=algo.metrics,
                        evaluation_metrics=results)
    algo._last_eval_results = results
    return results


def compile_eval_results(algo: "Algorithm", runner_metrics: list[dict]) -> dict[str, Any]:
    """The evaluation results of the evaluation runners' metrics (none: an empty evaluation)."""
    results = summarize_runner_metrics(runner_metrics, algo.config.keep_per_episode_custom_metrics)
    results["num_healthy_workers"] = eval_env_runner_group(algo).num_healthy_remote_workers()
    return results


def restart_eval_runners(algo: "Algorithm", indices: list[int]) -> None:
    """Restart the evaluation runners at `indices` (they failed) and tell the callbacks once
    they are back. Threads (and the driver's own runner, index 0) are rebuilt now; Ray actors
    start in the background (training does not wait for them) and join a later evaluation."""
    group = algo.eval_env_runner_group
    if 0 in indices:
        group.recreate_runner(0)
        _report_recreated(algo, group, [0])
    if not any(index > 0 for index in indices):
        return
    group.restart_failed_runners()
    if group.backend == "thread":  # built in milliseconds: back before train() returns
        group.probe_unhealthy_env_runners()
    _report_recreated(algo, group, group.take_restarted_indices())


def _report_recreated(algo: "Algorithm", group: Any, indices: list[int]) -> None:
    """Fire on_env_runners_recreated (is_evaluation=True) for the evaluation runners `indices`."""
    if not indices:
        return
    algo.callbacks.fire(
        "on_env_runners_recreated", algorithm=algo, env_runner_group=group, env_runner_indices=list(indices),
        is_evaluation=True, worker_set=group, worker_ids=list(indices),
    )
