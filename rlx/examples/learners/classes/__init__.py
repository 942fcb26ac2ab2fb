"""Custom Learner classes of the learner examples."""
