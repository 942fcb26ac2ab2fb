"""Custom-Learner examples (RLlib's `ray.rllib.examples.learners`); the Learner classes the
example scripts plug in with `config.training(learner_class=...)` are in `classes/`."""
