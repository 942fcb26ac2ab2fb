"""The callbacks surface RLlib 2.60 users see: `algo.callbacks` as the list of callback
instances, and every keyword argument RLlib passes to `on_episode_end`, including
`prev_episode_chunks`."""
from rlx.algorithms.ppo import PPOConfig
from rlx.callbacks.callbacks import RLlibCallback


def _config() -> PPOConfig:
    return (PPOConfig().environment("CartPole-v1")
            .training(train_batch_size=128, minibatch_size=64, num_epochs=1).debugging(seed=0))


def test_algo_callbacks_is_the_list_of_instances():
    class CountResults(RLlibCallback):
        def __init__(self):
            super().__init__()
            self.results = 0

        def on_train_result(self, *, algorithm, metrics_logger=None, result, **kwargs):
            self.results += 1

    class Other(RLlibCallback):
        pass

    algo = _config().callbacks([CountResults, Other]).build()
    try:
        assert isinstance(algo.callbacks, list)
        assert [type(cb) for cb in algo.callbacks] == [CountResults, Other]
        algo.train()
        assert algo.callbacks[0].results == 1
    finally:
        algo.stop()


def test_single_callbacks_class_reads_as_a_one_element_list_and_as_the_instance():
    class Counter(RLlibCallback):
        def __init__(self):
            super().__init__()
            self.inits = 0

        def on_algorithm_init(self, *, algorithm, metrics_logger=None, **kwargs):
            self.inits += 1

    algo = _config().callbacks(Counter).build()
    try:
        assert len(algo.callbacks) == 1 and isinstance(algo.callbacks[0], Counter)
        # Old API stack code reads its callbacks object's attributes directly.
        assert algo.callbacks.inits == 1
    finally:
        algo.stop()


def test_on_episode_end_accepts_rllib_signature_with_prev_episode_chunks():
    seen = []

    class EpisodeEnd(RLlibCallback):
        def on_episode_end(self, *, episode, prev_episode_chunks=None, env_runner=None, metrics_logger=None,
                           env=None, env_index, rl_module=None, **kwargs):
            chunks = prev_episode_chunks or []
            total = episode.get_return() + sum(chunk.get_return() for chunk in chunks)
            metrics_logger.log_value("full_return", total, reduce="max")
            seen.append((env_index, prev_episode_chunks))

    algo = _config().callbacks(EpisodeEnd).build()
    try:
        result = algo.train()
        assert seen and all(isinstance(index, int) for index, _ in seen)
        assert all(chunks is None or isinstance(chunks, list) for _, chunks in seen)
        assert result["env_runners"]["full_return"] > 0
    finally:
        algo.stop()


def test_on_episode_end_callable_may_require_prev_episode_chunks():
    calls = []

    def on_episode_end(episode, prev_episode_chunks, metrics_logger):
        calls.append(prev_episode_chunks)
        metrics_logger.log_value("episode_len_with_chunks",
                                 len(episode) + sum(len(c) for c in prev_episode_chunks or []), reduce="max")

    algo = _config().callbacks(on_episode_end=on_episode_end).build()
    try:
        result = algo.train()
        assert calls and result["env_runners"]["episode_len_with_chunks"] >= 1
    finally:
        algo.stop()
