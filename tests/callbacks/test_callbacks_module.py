"""Callback classes, per-event callables and the CallbackDispatcher (no Algorithm involved)."""
from __future__ import annotations

import functools
import inspect
import warnings

import pytest

from rlx.callbacks.callbacks import (
    CALLBACK_EVENTS,
    EVENT_KWARGS,
    CallbackDispatcher,
    DefaultCallbacks,
    MultiCallbacks,
    RLlibCallback,
    make_multi_callbacks,
    normalize_callbacks_class,
    normalize_event_callables,
)
from rlx.utils.errors import ConfigError

ALGO = object()


def train_result_kwargs(result=None):
    return dict(algorithm=ALGO, metrics_logger=None, result=result if result is not None else {})


class RecordA(RLlibCallback):
    def on_train_result(self, *, algorithm, metrics_logger=None, result, **kwargs):
        result.setdefault("order", []).append("A")


class RecordB(RLlibCallback):
    def on_train_result(self, *, algorithm, metrics_logger=None, result, **kwargs):
        result.setdefault("order", []).append("B")


class Counter(RLlibCallback):
    def __init__(self, step=1):
        super().__init__()
        self.count = 0
        self.step = step

    def on_episode_end(self, *, episode, **kwargs):
        self.count += self.step


# -- resolution order -------------------------------------------------------------------------


def test_classes_in_list_order_then_callables_in_list_order():
    d = CallbackDispatcher(
        callbacks_class=[RecordA, RecordB],
        event_callables={
            "on_train_result": [
                lambda algorithm, result, **kw: result["order"].append("fn1"),
                lambda result: result["order"].append("fn2"),
            ]
        },
    )
    result = {}
    assert d.get("on_train_result")(**train_result_kwargs(result)) is None
    assert result["order"] == ["A", "B", "fn1", "fn2"]


def test_reversed_class_list_reverses_order():
    d = CallbackDispatcher(callbacks_class=[RecordB, RecordA])
    result = {}
    d.fire("on_train_result", **train_result_kwargs(result))
    assert result["order"] == ["B", "A"]


def test_single_callable_not_in_a_list():
    seen = []
    d = CallbackDispatcher(event_callables={"on_checkpoint_loaded": lambda algorithm: seen.append(algorithm)})
    d.fire("on_checkpoint_loaded", algorithm=ALGO)
    assert seen == [ALGO]


# -- zero cost --------------------------------------------------------------------------------


def test_unhandled_events_resolve_to_none():
    d = CallbackDispatcher(callbacks_class=RecordA)
    assert d.get("on_train_result") is not None
    for event in CALLBACK_EVENTS:
        if event != "on_train_result":
            assert d.get(event) is None, event
            assert not d.has(event)
    assert d.handled_events == {"on_train_result"}


def test_class_not_overriding_contributes_nothing():
    d = CallbackDispatcher(callbacks_class=[RLlibCallback, DefaultCallbacks])
    assert len(d.instances) == 2
    assert all(d.get(event) is None for event in CALLBACK_EVENTS)
    d.fire("on_train_result", **train_result_kwargs())  # no-op, no error


def test_empty_dispatcher():
    d = CallbackDispatcher()
    assert d.instances == []
    assert not d.has_any(CALLBACK_EVENTS)


def test_unknown_event_on_get_has_fire():
    d = CallbackDispatcher()
    for call in (d.get, d.has, d.fire):
        with pytest.raises(ConfigError, match="Did you mean( one of:)? 'on_episode_end'"):
            call("on_episode_ends")


# -- keyword filtering ------------------------------------------------------------------------


def test_lambda_gets_only_the_keywords_it_names():
    got = []
    d = CallbackDispatcher(event_callables={"on_episode_end": lambda episode: got.append(episode)})
    d.fire("on_episode_end", episode="ep", env_runner="r", metrics_logger=None, env=None, env_index=0,
           rl_module=None, worker=None, base_env=None, policies=None)
    assert got == ["ep"]


def test_method_without_var_kwargs_is_filtered():
    class Narrow(RLlibCallback):
        def on_train_result(self, *, algorithm, result):
            result["algo"] = algorithm

    result = {}
    CallbackDispatcher(callbacks_class=Narrow).fire("on_train_result", **train_result_kwargs(result))
    assert result["algo"] is ALGO


def test_var_kwargs_handler_gets_everything():
    got = {}
    d = CallbackDispatcher(event_callables={"on_train_result": lambda **kw: got.update(kw)})
    d.fire("on_train_result", **train_result_kwargs())
    assert set(got) == {"algorithm", "metrics_logger", "result"}


def test_old_trainer_keyword_receives_algorithm():
    class Old(RLlibCallback):
        def on_train_result(self, *, trainer, result, **kwargs):
            result["trainer"] = trainer
            result["also_algorithm"] = kwargs.get("algorithm")

    result = {}
    CallbackDispatcher(callbacks_class=Old).fire("on_train_result", **train_result_kwargs(result))
    assert result["trainer"] is ALGO and result["also_algorithm"] is ALGO


def test_required_parameter_the_event_does_not_pass():
    with pytest.raises(ConfigError, match="requires 'info'.*on_train_result"):
        CallbackDispatcher(event_callables={"on_train_result": lambda info: None})


def test_positional_only_handler_rejected():
    def handler(result, /):
        pass

    with pytest.raises(ConfigError, match="handler.*positional-only"):
        CallbackDispatcher(event_callables={"on_train_result": handler})


def test_handler_exceptions_propagate_unchanged():
    class Boom(Exception):
        pass

    def explode(**kw):
        raise Boom("x")

    d = CallbackDispatcher(event_callables={"on_train_result": explode})
    with pytest.raises(Boom):
        d.fire("on_train_result", **train_result_kwargs())


def test_handler_return_value_is_dropped():
    d = CallbackDispatcher(event_callables={"on_train_result": [lambda **kw: 1, lambda **kw: 2]})
    assert d.get("on_train_result")(**train_result_kwargs()) is None


# -- chaining ---------------------------------------------------------------------------------


def test_multicallbacks_instance_called_like_a_factory():
    multi = MultiCallbacks([RecordA, RecordB])
    assert multi() is multi
    result = {}
    multi.on_train_result(**train_result_kwargs(result))
    assert result["order"] == ["A", "B"]
    first = multi._callback_list
    multi()
    assert multi._callback_list is not first and all(a is not b for a, b in zip(first, multi._callback_list))


def test_dispatcher_sees_through_multicallbacks():
    d = CallbackDispatcher(callbacks_class=MultiCallbacks([RecordB, RecordA, Counter]))
    assert [type(i) for i in d.instances] == [RecordB, RecordA, Counter]
    assert d.get("on_episode_start") is None  # MultiCallbacks forwards every event, yet costs nothing
    result = {}
    d.fire("on_train_result", **train_result_kwargs(result))
    assert result["order"] == ["B", "A"]


def test_make_multi_callbacks_chains_in_order():
    cls = make_multi_callbacks([RecordB, RecordA])
    assert issubclass(cls, RLlibCallback)
    result = {}
    cls().on_train_result(**train_result_kwargs(result))
    assert result["order"] == ["B", "A"]
    d = CallbackDispatcher(callbacks_class=[cls, Counter])
    assert [type(i) for i in d.instances] == [RecordB, RecordA, Counter]
    assert d.get("on_evaluate_start") is None


def test_multicallbacks_rejects_bad_items():
    with pytest.raises(ConfigError, match="callbacks_class"):
        MultiCallbacks([RecordA, "RecordB"])


# -- old dict form ----------------------------------------------------------------------------


def test_old_dict_form_passes_info_dict():
    infos = []
    d = CallbackDispatcher(callbacks_class={"on_train_result": infos.append})
    d.fire("on_train_result", **train_result_kwargs({"x": 1}))
    (info,) = infos
    assert info["trainer"] is ALGO and info["algorithm"] is ALGO
    assert info["result"] == {"x": 1}


def test_old_dict_form_episode_and_postprocess_aliases():
    infos = []
    d = CallbackDispatcher(callbacks_class={"on_episode_end": infos.append, "on_postprocess_trajectory": infos.append})
    d.fire("on_episode_end", episode="ep", env_index=0, base_env="base", env="env", policies={"p": "pol"})
    assert infos[0]["env"] == "base" and infos[0]["policy"] == {"p": "pol"} and infos[0]["episode"] == "ep"
    d.fire("on_postprocess_trajectory", episode="ep", agent_id=0, policy_id="p", policies={"p": "pol"},
           postprocessed_batch="post", original_batches={0: ("pol", "pre")})
    assert infos[1]["post_batch"] == "post"
    assert infos[1]["pre_batch"] == ("pol", "pre")
    assert infos[1]["all_pre_batches"] == {0: ("pol", "pre")}


def test_old_dict_form_rejects_unknown_event():
    with pytest.raises(ConfigError, match="Did you mean 'on_train_result'"):
        normalize_callbacks_class({"on_train_results": print})
    with pytest.raises(ConfigError, match="Valid events: on_algorithm_init"):
        normalize_callbacks_class({"when_done": print})


def test_old_dict_form_rejects_non_callable():
    with pytest.raises(ConfigError, match="on_train_result"):
        normalize_callbacks_class({"on_train_result": 3})


# -- validation -------------------------------------------------------------------------------


def test_typo_method_on_subclass_raises():
    class MyCallbacks(RLlibCallback):
        def on_episode_ends(self, **kwargs):
            pass

    with pytest.raises(ConfigError) as err:
        normalize_callbacks_class(MyCallbacks)
    # did_you_mean lists the closest first; several episode events are close to this typo.
    assert str(err.value).startswith("MyCallbacks.on_episode_ends is not a callback event. Did you mean")
    assert "'on_episode_end'" in str(err.value)


def test_renamed_event_method_raises():
    class OldStyle(RLlibCallback):
        def on_trainer_init(self, *, trainer, **kwargs):
            pass

    with pytest.raises(ConfigError, match="renamed to 'on_algorithm_init'"):
        CallbackDispatcher(callbacks_class=OldStyle)


def test_unrelated_on_method_only_warns():
    class Helpers(RLlibCallback):
        def on_xyz(self):
            pass

    with pytest.warns(UserWarning, match="Helpers.on_xyz is not a callback event"):
        assert normalize_callbacks_class(Helpers) == [Helpers]


def test_non_callable_event_value_raises():
    with pytest.raises(ConfigError, match="on_train_result.*callable"):
        normalize_event_callables("on_train_result", 42)
    with pytest.raises(ConfigError, match="on_train_result.*callable"):
        CallbackDispatcher(event_callables={"on_train_result": [print, "not a function"]})


def test_unknown_event_callable_name_raises():
    with pytest.raises(ConfigError, match="Did you mean( one of:)? 'on_sample_end'"):
        normalize_event_callables("on_samples_end", print)


def test_event_callables_none_and_class_value():
    assert normalize_event_callables("on_train_result", None) == []
    with pytest.raises(ConfigError, match="callbacks_class"):
        normalize_event_callables("on_train_result", RecordA)


@pytest.mark.parametrize("bad", ["MyCallbacks", 3, object()])
def test_bad_callbacks_class_values_name_the_option(bad):
    with pytest.raises(ConfigError, match="callbacks_class.*Accepted"):
        normalize_callbacks_class(bad)


def test_non_rllibcallback_class_rejected():
    class NotACallback:
        def on_train_result(self, **kwargs):
            pass

    with pytest.raises(ConfigError, match="NotACallback does not subclass RLlibCallback"):
        normalize_callbacks_class([RecordA, NotACallback])


def test_instance_instead_of_class_rejected():
    with pytest.raises(ConfigError, match="pass the class itself"):
        normalize_callbacks_class(RecordA())


def test_class_needing_constructor_args_rejected():
    class NeedsArg(RLlibCallback):
        def __init__(self, path):
            super().__init__()

    with pytest.raises(ConfigError, match="functools.partial"):
        normalize_callbacks_class(NeedsArg)


def test_none_gives_no_items():
    assert normalize_callbacks_class(None) == []


def test_factory_returning_wrong_type_rejected_at_construction():
    with pytest.raises(ConfigError, match="not an RLlibCallback"):
        CallbackDispatcher(callbacks_class=lambda: object())


# -- instances --------------------------------------------------------------------------------


def test_fresh_instances_per_dispatcher():
    d1 = CallbackDispatcher(callbacks_class=Counter)
    d2 = CallbackDispatcher(callbacks_class=Counter)
    assert d1.instances[0] is not d2.instances[0]
    d1.fire("on_episode_end", episode=None, env_index=0)
    d1.fire("on_episode_end", episode=None, env_index=0)
    d2.fire("on_episode_end", episode=None, env_index=0)
    assert (d1.instances[0].count, d2.instances[0].count) == (2, 1)


def test_fresh_instances_per_dispatcher_from_one_multicallbacks():
    multi = MultiCallbacks([Counter])
    d1, d2 = CallbackDispatcher(callbacks_class=multi), CallbackDispatcher(callbacks_class=multi)
    d1.fire("on_episode_end", episode=None, env_index=0)
    assert (d1.instances[0].count, d2.instances[0].count) == (1, 0)


def test_partial_factory():
    d = CallbackDispatcher(callbacks_class=functools.partial(Counter, step=5))
    d.fire("on_episode_end", episode=None, env_index=0)
    assert d.instances[0].count == 5


def test_factory_class_is_checked_for_typos():
    class Typo(RLlibCallback):
        def on_sample_ends(self, **kwargs):
            pass

    with pytest.raises(ConfigError, match="Did you mean( one of:)? 'on_sample_end'"):
        normalize_callbacks_class(functools.partial(Typo))
    with pytest.raises(ConfigError, match="Did you mean( one of:)? 'on_sample_end'"):
        CallbackDispatcher(callbacks_class=lambda: Typo())


# -- API surface ------------------------------------------------------------------------------


def test_old_import_paths_are_the_same_class():
    import rlx.agents.callbacks as agents_cb
    import rlx.algorithms.callbacks as algorithms_cb

    assert algorithms_cb.DefaultCallbacks is RLlibCallback
    assert agents_cb.DefaultCallbacks is RLlibCallback
    assert agents_cb.MultiCallbacks is MultiCallbacks
    assert algorithms_cb.make_multi_callbacks is make_multi_callbacks


def test_event_methods_are_keyword_only_and_match_event_kwargs():
    assert set(EVENT_KWARGS) == set(CALLBACK_EVENTS) and len(CALLBACK_EVENTS) == len(set(CALLBACK_EVENTS))
    for event in CALLBACK_EVENTS:
        params = list(inspect.signature(getattr(RLlibCallback, event)).parameters.values())[1:]
        named = [p for p in params if p.kind is not p.VAR_KEYWORD]
        assert named and all(p.kind is p.KEYWORD_ONLY for p in named), event
        assert params[-1].kind is params[-1].VAR_KEYWORD, event
        assert {p.name for p in named} <= set(EVENT_KWARGS[event]), event


def test_import_is_light():
    import subprocess
    import sys

    code = "import sys, rlx.callbacks.callbacks; print('torch' in sys.modules or 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_no_warning_for_plain_subclass():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        normalize_callbacks_class([RecordA, Counter])


def test_factory_returning_a_chain_is_seen_through():
    d = CallbackDispatcher(callbacks_class=lambda: make_multi_callbacks([RecordA, Counter])())
    assert [type(i) for i in d.instances] == [RecordA, Counter]
    assert d.get("on_episode_start") is None
