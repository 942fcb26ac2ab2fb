"""Observation preprocessors at RLlib's path (`ray.rllib.models.preprocessors`).

They live in the core layer, `rlx.core.preprocessors`; these are the same objects.
"""
from rlx.core.preprocessors import (ATARI_OBS_SHAPE, ATARI_RAM_OBS_SHAPE, AtariRAMPreprocessor,
                                    DictFlatteningPreprocessor, GenericPixelPreprocessor, MultiBinaryPreprocessor,
                                    NoPreprocessor, OneHotPreprocessor, Preprocessor, TupleFlatteningPreprocessor,
                                    get_preprocessor)

__all__ = ["ATARI_OBS_SHAPE", "ATARI_RAM_OBS_SHAPE", "AtariRAMPreprocessor", "DictFlatteningPreprocessor",
           "GenericPixelPreprocessor", "MultiBinaryPreprocessor", "NoPreprocessor", "OneHotPreprocessor",
           "Preprocessor", "TupleFlatteningPreprocessor", "get_preprocessor"]
