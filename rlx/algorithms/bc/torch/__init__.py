"""BC's torch modules (RLlib's `ray.rllib.algorithms.bc.torch`)."""
