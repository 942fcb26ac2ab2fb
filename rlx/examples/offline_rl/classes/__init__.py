"""Classes RLlib's offline RL examples import (`ray.rllib.examples.offline_rl.classes`): an
OfflineData that reads image files and an OfflinePreLearner that maps them to episodes."""
