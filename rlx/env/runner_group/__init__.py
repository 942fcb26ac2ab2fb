"""The parts of EnvRunnerGroup, one job per module.

Users import the group from its public module, `rlx.env.env_runner_group`; these modules hold
what it delegates to:

- `backends`: where remote runners live (worker processes, Ray actors, threads), building and
  retiring their handles, and calling every handle at once.
- `calls`: the calls shipped to remote runners (module-level classes, so they pickle by reference).
- `sampling`: synchronous sampling across the remote runners.
- `async_sampling`: asynchronous sampling (IMPALA, APPO): requests kept in flight per runner.
- `weight_sync`: the weights and observation filters the runners get.
- `stuck_runners`: what the group does about a runner that does not answer in time.
- `replacement`: building a new runner for a failed or retired one and bringing it up to date.
- `foreach`: calling a function on every runner (foreach_env_runner and its old names).
"""
