"""The `rlx` command line: train, train file, evaluate (rollout), list, plot."""
