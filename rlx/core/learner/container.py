"""The learner container: module id -> the Learner of that module, in this process or a group
of data-parallel learner processes.

How a module trains is decided per module, from its config (`config.get_config_for_module`):
`num_learners == 0` builds its Learner here, in the driver; `num_learners > 0` builds a
LearnerGroup of that many processes (rlx.core.learner.learner_group) on the module. Every module
with `num_learners > 0` gets its own group: the group needs nothing but the module it trains,
its weights, its config and its Learner class, so the one tested data-parallel mechanism
(sharding, gradient all-reduce, restarts, checkpoints through `optimizers`) serves several
modules unchanged, and modules' groups update at the same time. The price is processes:
P modules with N learners each run P * N learner processes (RLlib's learners each hold the
whole MultiRLModule instead). `group_factory` builds the groups, so a module's group can be
swapped for another kind (e.g. Ray actors) with the same surface.

A user's MultiRLModule subclass whose forward couples its modules (`runs_modules_jointly()`,
e.g. RLlib's shared-encoder example) cannot train module by module: `build_learner`
(rlx.core.learner.build) gives it a `JointLearnerContainer` (rlx.core.learner.joint_container),
one Learner of the whole MultiRLModule behind the same per-module faces.

A single-agent run is the one-module case: `build_learner` gives it that module's Learner (or
group) itself, as `algo.learner` (RLlib code and rlx's own treat it as one Learner), and
`module_learners(learner)` views it as a one-module container (`Algorithm.learners`), which the
core path uses for every run. Such a view's `sole_module_id` is set; its few presentation
methods (`per_module`, `learner_result`, `get_module`, `module_in`, `user_module_id`) are the one
place that turns the container's `{module_id: ...}` into what a single-agent run shows its users.
"""
from __future__ import annotations

import collections
import concurrent.futures as cf
from typing import Any, Callable, Iterator, Mapping

from rlx.core.config_view import ResolvedConfig
from rlx.core.learner.learner import building_learner_for, unwrap_module
from rlx.core.learner.async_updates import LOCAL_ASYNC_UPDATE_ERROR, RL_MODULE_STATE_AFTER_UPDATE, \
    state_for_result, update_options
from rlx.core.learner.learner_group import LearnerGroup
from rlx.core.learner.ray_learners import is_object_ref
from rlx.core.rl_module.multi_rl_module import MultiRLModule
from rlx.core.rl_module.agent_mapping import DEFAULT_POLICY_ID, is_trainable
from rlx.core.sample_batch import SampleBatch

__all__ = ["LearnerContainer", "build_module_learner", "merge_update_results", "module_learners"]

#: Builds a module's group of learner processes: `(config, learner_class, module, module_id)`.
GroupFactory = Callable[[ResolvedConfig, type, Any, str], Any]


def _learner_group(config: ResolvedConfig, learner_class: type, module: Any, module_id: str) -> Any:
    return LearnerGroup(config, learner_class, module, module_id=module_id)


def build_module_learner(config: ResolvedConfig, learner_class: type, module: Any, module_id: str = DEFAULT_POLICY_ID,
                         group_factory: GroupFactory | None = None) -> Any:
    """The Learner of one module: built in this process when `config.num_learners` is 0, else a
    group of `num_learners` learner processes (`group_factory`, by default a LearnerGroup)."""
    if int(config.num_learners or 0) > 0:
        return (group_factory or _learner_group)(config, learner_class, module, module_id)
    with building_learner_for(module_id):  # the Learner's module_id (RLlib's self.module[module_id])
        return learner_class(config, module)


def module_learners(learner: Any) -> "LearnerContainer":
    """`learner` as a container: itself when it is one, else a one-module container (module id
    'default_policy') over the single-agent Learner or group."""
    if isinstance(learner, LearnerContainer):
        return learner
    return LearnerContainer.of_one(learner)


def merge_update_results(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One result of the modules' results of the same update: {module_id: metrics} together, and
    their RL_MODULE_STATE_AFTER_UPDATE states merged into one (an ObjectRef again when they were)."""
    merged: dict[str, Any] = {}
    states = []
    for result in results:
        result = dict(result)
        if RL_MODULE_STATE_AFTER_UPDATE in result:
            states.append(result.pop(RL_MODULE_STATE_AFTER_UPDATE))
        merged.update(result)
    if states:
        if any(is_object_ref(state) for state in states):
            import ray

            states = [ray.get(state) if is_object_ref(state) else state for state in states]
        state: dict[str, Any] = {}
        for part in states:
            for key, value in part.items():
                state.setdefault(key, {}).update(value)
        merged[RL_MODULE_STATE_AFTER_UPDATE] = state_for_result(state)
    return merged


def _is_group(learner: Any) -> bool:
    """Whether `learner` is a group of learner processes (it says `is_local = False`)."""
    return getattr(learner, "is_local", True) is False


class LearnerContainer:
    """{module_id: Learner} for the modules of `module`: each a Learner in this process or a
    group of learner processes, as that module's config says (see the module docstring).

    `update_from_batch` takes a MultiAgentBatch (or {module_id: batch}) and updates each
    trainable module on its batch (modules outside `policies_to_train` are skipped), returning
    `{module_id: metrics}`. Weights and state travel as `{module_id: ...}`.

    Args:
        config: the Algorithm's frozen config (per-module configs come from
            `config.get_config_for_module`).
        learner_class: the algorithm's Learner class.
        module: the MultiRLModule (shared with the local EnvRunner).
        group_factory: builds a module's group of learner processes (default: LearnerGroup).
    """

    def __init__(self, config: ResolvedConfig, learner_class: type, module: MultiRLModule,
                 group_factory: GroupFactory | None = None):
        self.config = config
        self.learner_class = learner_class
        self.module = module
        self.group_factory = group_factory
        #: The module id of the one Learner this container views (`of_one`), else None.
        self.sole_module_id: str | None = None
        self.learners: dict[str, Any] = {}
        self._cache_attached: Any = None
        self.policies_to_train = config.policies_to_train
        # policy_map_capacity: a Learner's optimizer state and target networks swap with its module.
        module.set_policy_map_capacity(config.policy_map_capacity, config.policy_states_are_swappable)
        try:
            for module_id in module.keys():
                self.add_module(module_id)
        except BaseException:
            self.stop()  # learner processes of the modules built so far
            raise

    @classmethod
    def of_one(cls, learner: Any, module_id: str = DEFAULT_POLICY_ID) -> "LearnerContainer":
        """A one-module container over an existing Learner (or group): the single-agent case."""
        view = cls.__new__(cls)
        view.config = learner.config
        view.learner_class = type(learner)
        view.module = unwrap_module(learner.module)
        view.group_factory = None
        view.sole_module_id = module_id
        view.learners = {module_id: learner}
        view._cache_attached = None
        view.policies_to_train = None
        return view

    # ------------------------------------------------------------ modules

    def add_module(self, module_id: str, config: ResolvedConfig | None = None) -> Any:
        """Build the Learner (or group) of `module[module_id]` with its per-module config."""
        if self.sole_module_id is not None:
            raise TypeError("A single-agent Algorithm trains one module: add modules to a multi-agent one "
                            "(config.multi_agent(policies=...)).")
        module_config = config if config is not None else self.config.get_config_for_module(module_id)
        # (in memory: indexing the MultiRLModule brings a swapped-out module back)
        learner = build_module_learner(module_config, self.learner_class, self.module[module_id], module_id,
                                       self.group_factory)
        self.learners[module_id] = learner
        self._attach_learners()
        return learner

    def _attach_learners(self) -> None:
        """Let the module cache (policy_map_capacity), once the MultiRLModule swaps modules, swap
        each local Learner's tensors (optimizer state, target networks) with its module's. A group
        keeps those in its processes."""
        cache = getattr(self.module, "module_cache", None)
        if cache is not None:
            for module_id, learner in self.learners.items():
                if not _is_group(learner):
                    cache.attach(module_id, learner)
        self._cache_attached = cache

    def remove_module(self, module_id: str) -> None:
        """Forget the Learner of `module_id` (a group's learner processes stop)."""
        learner = self.learners.pop(module_id, None)
        if learner is None:
            return
        if _is_group(learner):
            learner.stop()
        elif getattr(self.module, "module_cache", None) is not None and module_id in self.module:
            self.module.module_cache.detach(module_id, learner)

    # ------------------------------------------------------------ what users see

    def per_module(self, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """{module_id: metrics} from what the learner reports: a sole Learner's metrics under its
        module id, a container's as they are."""
        return dict(metrics) if self.sole_module_id is None else {self.sole_module_id: metrics}

    def learner_result(self, metrics: Mapping[str, Any]) -> Any:
        """The inverse of `per_module`: a sole Learner reports its one module's metrics (an
        empty dict when it did not train), a container {module_id: metrics}."""
        if self.sole_module_id is None:
            return dict(metrics)
        return metrics.get(self.sole_module_id, {})

    def get_module(self, module_id: str) -> Any:
        """The RLModule of `module_id` that its Learner trains (indexing a MultiRLModule brings a
        swapped-out module back into memory)."""
        if self.sole_module_id is None:
            return self.module[module_id]
        self._learner(module_id)  # KeyError naming the one module
        return self.module

    def module_in(self, modules: Any, module_id: str) -> Any:
        """`modules[module_id]` of the same run's modules held elsewhere (an EnvRunner's); a
        single-agent run's are its one module itself."""
        return modules if self.sole_module_id is not None else modules[module_id]

    def user_module_id(self, module_id: str) -> str | None:
        """The module id RLlib's single-agent code sees: None for the sole Learner of a
        single-agent run (its episodes carry no module id), else `module_id`."""
        return None if self.sole_module_id is not None else module_id

    def is_trainable(self, module_id: str, batch: Any = None) -> bool:
        """Whether `module_id` trains (policies_to_train)."""
        return is_trainable(self.policies_to_train, module_id, batch)

    def by_module(self) -> dict[str, Any]:
        """{module_id: Learner or group}."""
        return dict(self.learners)

    def keys(self) -> list[str]:
        """The module ids."""
        return list(self.learners)

    def __iter__(self) -> Iterator[str]:
        return iter(self.learners)

    def __contains__(self, module_id: object) -> bool:
        return module_id in self.learners

    def _learner(self, module_id: str) -> Any:
        try:
            return self.learners[module_id]
        except KeyError:
            raise KeyError(f"No learner trains module {module_id!r}; the modules are: "
                           f"{', '.join(map(repr, self.learners))}.") from None

    @property
    def is_local(self) -> bool:
        """Whether every module's Learner lives in this process (no learner processes)."""
        return not any(_is_group(learner) for learner in self.learners.values())

    @property
    def is_remote(self) -> bool:
        """Whether some module trains in learner processes."""
        return not self.is_local

    # ------------------------------------------------------------ updates

    def update_from_batch(self, batch: Any, timestep: int) -> dict[str, dict[str, Any]]:
        """Update every trainable module on its batch; {module_id: metrics} in the batch's order.

        Modules trained by groups of learner processes update at the same time (each group in a
        thread of its own that waits on its processes); Learners in this process one after another.
        """
        if getattr(self.module, "module_cache", None) is not self._cache_attached:  # modules started swapping
            self._attach_learners()
        work = []
        for module_id, module_batch in batch.items():
            learner = self.learners.get(module_id)
            if learner is None:
                continue
            if callable(self.policies_to_train):
                module_batch = SampleBatch(module_batch)  # what RLlib's predicate receives
            if self.is_trainable(module_id, module_batch):
                work.append((module_id, learner, module_batch))
        groups = [item for item in work if _is_group(item[1])]
        if len(groups) < 2 or getattr(self.module, "module_cache", None) is not None:
            return {module_id: self._update_one(module_id, learner, module_batch, timestep)
                    for module_id, learner, module_batch in work}
        with cf.ThreadPoolExecutor(max_workers=len(groups), thread_name_prefix="rlx-learner-group") as pool:
            futures = {module_id: pool.submit(self._update_one, module_id, learner, module_batch, timestep)
                       for module_id, learner, module_batch in groups}
            results = {module_id: self._update_one(module_id, learner, module_batch, timestep)
                       for module_id, learner, module_batch in work if module_id not in futures}
            cf.wait(list(futures.values()))
        for future in futures.values():  # every group finished: a failure of one does not orphan another
            future.result()
        return {module_id: futures[module_id].result() if module_id in futures else results[module_id]
                for module_id, _, _ in work}

    def _update_one(self, module_id: str, learner: Any, batch: Any, timestep: int) -> dict[str, Any]:
        # policy_map_capacity: the module, its optimizer state and target networks stay in memory meanwhile.
        using = getattr(self.module, "using_module", None)
        if using is None:
            return learner.run_update(batch, timestep=timestep)
        with using(module_id):
            return learner.run_update(batch, timestep=timestep)

    def update(self, batch: Any = None, episodes: list[Any] | None = None, timesteps: dict[str, Any] | None = None,
               async_update: bool = False, return_state: bool = False, **kwargs: Any) -> Any:
        """RLlib's `LearnerGroup.update` over every trainable module: each module's Learner (or
        group) updates on its part of `batch` or of `episodes` (`kwargs`: num_epochs=,
        minibatch_size=, shuffle_batch_per_epoch=); {module_id: metrics}.

        `return_state=True` adds RL_MODULE_STATE_AFTER_UPDATE: {"rl_module": {module_id: weights},
        "extra_state": {module_id: extra state}} of every module after the update (an ObjectRef
        while Ray is initialised). `async_update=True` (every trainable module trains in a group of
        learner processes) queues the update in each module's group and returns at once a list of
        the results ({module_id: metrics}, one per earlier async call) whose every module finished."""
        module_ids = [module_id for module_id in list(self.learners) if self.is_trainable(module_id)]
        if async_update:
            return self._update_async(module_ids, batch, episodes, timesteps, return_state, kwargs)
        results: dict[str, Any] = {}
        for module_id in module_ids:
            results.update(self._learner(module_id).update(batch=batch, episodes=episodes, timesteps=timesteps,
                                                           **kwargs))
        if return_state:
            results[RL_MODULE_STATE_AFTER_UPDATE] = state_for_result(self.get_state()["learner"])
        return results

    def _update_async(self, module_ids: list[str], batch: Any, episodes: list[Any] | None,
                      timesteps: dict[str, Any] | None, return_state: bool, kwargs: dict[str, Any]) -> list[Any]:
        """Queue one update in every module's group; the finished earlier calls' merged results."""
        local = [module_id for module_id in module_ids if not _is_group(self.learners[module_id])]
        if local:
            raise ValueError(f"{LOCAL_ASYNC_UPDATE_ERROR} (modules {local} train in this process.)")
        try:
            options = update_options(**kwargs)
        except TypeError:
            raise TypeError(f"update() got unsupported arguments {sorted(kwargs)}; it takes batch=, episodes=, "
                            "timesteps=, async_update=, return_state=, num_epochs=, minibatch_size=, "
                            "shuffle_batch_per_epoch=.") from None
        # Every job is checked before any is queued, so that a bad call queues nothing.
        jobs = {module_id: self.learners[module_id].update_job(batch, episodes, timesteps, return_state, options)
                for module_id in module_ids}
        calls, ready = self._async_queues()
        # The finished calls first: never this call's own result.
        while calls and all(future.done() for future in calls[0].values()):
            futures = calls.popleft()
            failed = next((f.exception() for f in futures.values() if f.exception() is not None), None)
            if failed is not None:
                raise failed  # (this call is not queued; the results finished before it stay for the next)
            ready.append(merge_update_results([future.result() for future in futures.values()]))
        calls.append({module_id: self.learners[module_id].submit_update(job) for module_id, job in jobs.items()})
        out = list(ready)
        ready.clear()
        return out

    def _async_queues(self) -> tuple[collections.deque, list[Any]]:
        """(the async calls in flight: {module_id: Future} each, in order; merged results not handed out)."""
        queues = self.__dict__.get("_async_update_queues")
        if queues is None:  # (also for views made by of_one, which skip __init__)
            queues = self.__dict__["_async_update_queues"] = (collections.deque(), [])
        return queues

    def run_update(self, batch: Any, timestep: int) -> dict[str, dict[str, Any]]:
        """`update_from_batch` (each module's Learner applies its own precision and compilation)."""
        return self.update_from_batch(batch, timestep)

    # ------------------------------------------------------------ weights and state

    def get_weights(self, module_ids: list[str] | None = None) -> dict[str, Any]:
        """{module_id: weights} of every module (or of `module_ids`)."""
        ids = list(self.learners) if module_ids is None else list(module_ids)
        return {module_id: self._learner(module_id).get_weights() for module_id in ids}

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """Load {module_id: weights} (into every learner process of a module's group too);
        modules not given keep theirs."""
        for module_id, module_weights in weights.items():
            self._learner(module_id).set_weights(module_weights)

    def get_extra_state(self) -> dict[str, Any]:
        """{module_id: learner extra state}."""
        return {module_id: learner.get_extra_state() for module_id, learner in self.learners.items()}

    def set_extra_state(self, state: Mapping[str, Any]) -> None:
        """Restore {module_id: learner extra state} (modules not given keep theirs)."""
        for module_id, value in state.items():
            if module_id in self.learners:
                self.learners[module_id].set_extra_state(value)

    def get_state(self) -> dict[str, Any]:
        """RLlib's LearnerGroup state: {"learner": {"rl_module": {module_id: weights},
        "extra_state": {module_id: learner extra state}}}."""
        return {"learner": {"rl_module": self.get_weights(), "extra_state": self.get_extra_state()}}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Load a `get_state()` (either part may be missing, and so may modules)."""
        learner_state = state.get("learner", {})
        if "rl_module" in learner_state:
            self.set_weights(learner_state["rl_module"])
        if "extra_state" in learner_state:
            self.set_extra_state(learner_state["extra_state"])

    def foreach_learner(self, fn: Callable[[Any], Any]) -> list[Any]:
        """Run `fn` on the learners: [fn(self)] when every module trains in this process (this
        container is then the one local learner, holding every module, as RLlib's local one is);
        else fn on each module's Learner and on every learner process of each group (fn travels
        to them with cloudpickle), concatenated in module order."""
        if self.is_local:
            return [fn(self)]
        results: list[Any] = []
        for learner in self.learners.values():
            results.extend(learner.foreach_learner(fn) if _is_group(learner) else [fn(learner)])
        return results

    def stop(self) -> None:
        """Stop the learner processes of every module's group (idempotent)."""
        errors = []
        for learner in list(self.learners.values()):
            if _is_group(learner):
                try:
                    learner.stop()
                except Exception as err:  # stop the others all the same
                    errors.append(err)
        if errors:
            raise errors[0]

    def __repr__(self) -> str:
        inner = ", ".join(f"{m}: {l!r}" if _is_group(l) else f"{m}: {type(l).__name__}"
                          for m, l in self.learners.items())
        return f"LearnerContainer({inner})"
