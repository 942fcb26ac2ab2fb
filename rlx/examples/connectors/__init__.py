"""Example connector pieces (RLlib's `ray.rllib.examples.connectors`), written for rlx."""
