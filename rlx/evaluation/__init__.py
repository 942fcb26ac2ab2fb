"""Old import path of RLlib's evaluation package (`ray.rllib.evaluation`)."""
