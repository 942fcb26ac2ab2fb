"""Objects made at run time, stored in a checkpoint as the rlx factory call that made them.

A class made by `make_multi_agent("CartPole-v1")` is defined inside a function, so it has no
import path; rlx's factories mark what they make with the call that made it (`set_recipe`),
and `config.json` stores that call as data:

    "env": {"__recipe__": "make_multi_agent", "args": ["CartPole-v1"]}

Loading calls only the factories listed in RECIPES, each only in the config fields it makes
values for, with arguments decoded under the same trust rules as the field itself
(rlx.utils.checkpoint_trust): a checkpoint can make rlx call `make_multi_agent` with an env
name or an env class/creator it may name there, and nothing else.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rlx.utils.checkpoint_trust import check_string_paths
from rlx.utils.errors import CheckpointError

#: The attribute holding `(recipe name, args)` on what a factory made (a class's own, or an instance's).
RECIPE_ATTR = "__rlx_recipe__"
#: The JSON key of a stored recipe.
RECIPE_KEY = "__recipe__"


@dataclass(frozen=True)
class Recipe:
    """A factory a checkpoint may call: its import path inside rlx, the config fields it makes
    values for (matched as the last part of the field's dot-separated path), and a check of
    its decoded arguments run before it is called."""

    factory: str
    fields: tuple[str, ...]
    check_args: Callable[[list, str, "str | Path"], None] | None = None


def _check_env_args(args: list, field: str, source: str | Path) -> None:
    """make_multi_agent takes one env specifier: a string is checked as the `env` field's import
    paths are (it is resolved as an env when the env is built); classes and functions were
    checked as they were decoded."""
    if len(args) != 1:
        raise CheckpointError(f"{source}: field '{field}' calls make_multi_agent with {len(args)} arguments; "
                              "it takes one (an env name, class or creator).")
    if isinstance(args[0], str):
        check_string_paths({"env": args[0]}, source)


#: Name -> the factory a stored recipe may call. Only rlx's own factories are listed here.
RECIPES: dict[str, Recipe] = {
    "make_multi_agent": Recipe("rlx.env.multi_agent_env:make_multi_agent", ("env",), _check_env_args),
    "policy_mapping_table": Recipe("rlx.algorithms.policy_mapping_table:PolicyMappingTable",
                                   ("policy_mapping_fn",)),
}


def set_recipe(obj: Any, name: str, *args: Any) -> None:
    """Mark `obj` (a class or an instance a factory made) as made by recipe `name` with `args`."""
    if name not in RECIPES:
        raise KeyError(f"{name!r} is not a checkpoint recipe; known: {', '.join(sorted(RECIPES))}.")
    setattr(obj, RECIPE_ATTR, (name, tuple(args)))


def recipe_of(value: Any) -> tuple[str, tuple] | None:
    """`(recipe name, args)` that made `value`, or None. A class's recipe must be its own: a
    subclass of a made class is not made by the recipe."""
    try:
        recipe = vars(value).get(RECIPE_ATTR)
    except TypeError:  # no __dict__ (builtins, slotted objects): nothing made it
        return None
    if isinstance(recipe, tuple) and len(recipe) == 2 and recipe[0] in RECIPES:
        return recipe
    return None


def make_from_recipe(name: Any, args: Any, field: str, source: str | Path,
                     decode: Callable[[Any, str, "str | Path"], Any]) -> Any:
    """Call the factory of recipe `name` for config field `field` of `source`, with `args`
    decoded by `decode(value, field, source)`; a CheckpointError naming the field otherwise."""
    recipe = RECIPES.get(name) if isinstance(name, str) else None
    if recipe is None:
        raise CheckpointError(f"{source}: field '{field}' names the recipe {name!r:.80}; a checkpoint may call only "
                              f"rlx's factories {', '.join(sorted(RECIPES))}.")
    if field.split(".")[-1] not in recipe.fields:
        raise CheckpointError(f"{source}: field '{field}' holds a {name} recipe, which makes values only for "
                              f"{', '.join(recipe.fields)}.")
    if not isinstance(args, list):
        raise CheckpointError(f"{source}: field '{field}' holds a {name} recipe whose 'args' is not a list.")
    decoded = [decode(arg, field, source) for arg in args]
    if recipe.check_args is not None:
        recipe.check_args(decoded, field, source)
    module_name, _, attr = recipe.factory.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    try:
        return factory(*decoded)
    except CheckpointError:
        raise
    except Exception as err:
        raise CheckpointError(f"{source}: field '{field}': rebuilding it with {name}(...) failed: "
                              f"{type(err).__name__}: {err}.") from err
