"""Old import path (`ray.rllib.agents`) kept for code written against the Trainer-era docs."""
