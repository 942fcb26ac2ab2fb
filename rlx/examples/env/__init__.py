"""RLlib's old example-env path `ray.rllib.examples.env` (now `rlx.examples.envs.classes`)."""
