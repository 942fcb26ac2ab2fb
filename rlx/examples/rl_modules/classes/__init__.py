"""Example RLModule classes (RLlib's `ray.rllib.examples.rl_modules.classes`)."""
from rlx.examples.rl_modules.classes.random_rlm import RandomRLModule
from rlx.examples.rl_modules.classes.rock_paper_scissors_heuristic_rlm import (
    AlwaysSameHeuristicRLM, BeatLastHeuristicRLM)

__all__ = ["AlwaysSameHeuristicRLM", "BeatLastHeuristicRLM", "RandomRLModule"]
