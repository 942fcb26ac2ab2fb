"""RLlib's FlexDict: a gymnasium Dict space whose keys can be added after construction."""
from __future__ import annotations

from typing import Any

import gymnasium as gym


class FlexDict(gym.spaces.Dict):
    """A Dict space that accepts new keys after construction: ``space["key"] = Box(...)``.

    Keys keep their insertion order (gymnasium's Dict sorts keys given as a plain dict
    only when they are sortable; a FlexDict never re-sorts).
    """

    def __init__(self, spaces: dict | None = None, **spaces_kwargs: gym.Space):
        """Create the space from a dict of spaces or from keyword arguments (not both)."""
        if spaces is not None and spaces_kwargs:
            raise ValueError("FlexDict takes either a dict of spaces or keyword arguments, not both: "
                             "FlexDict({'a': space}) or FlexDict(a=space).")
        spaces = dict(spaces_kwargs if spaces is None else spaces)
        for key, space in spaces.items():
            _check_space(key, space)
        super().__init__(spaces={})
        self.spaces.update(spaces)

    def sample(self, mask: Any = None, probability: Any = None) -> dict:
        """A dict with one sample of every sub-space."""
        return {key: space.sample() for key, space in self.spaces.items()}

    def __getitem__(self, key: Any) -> gym.Space:
        return self.spaces[key]

    def __setitem__(self, key: Any, space: gym.Space) -> None:
        _check_space(key, space)
        self.spaces[key] = space

    def __repr__(self) -> str:
        return "FlexDict(" + ", ".join(f"{k}:{s}" for k, s in self.spaces.items()) + ")"


def _check_space(key: Any, space: Any) -> None:
    if not isinstance(space, gym.Space):
        raise TypeError(f"FlexDict values must be gymnasium spaces; key {key!r} got {space!r}.")
