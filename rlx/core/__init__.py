"""Core building blocks: batch columns, RLModule, default models, distributions, Learner."""
