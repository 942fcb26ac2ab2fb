"""`rlx train` and `rlx evaluate` with a registered multi-agent env and an experiment file's
old `multiagent` config section."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

from cli_helpers import run_rlx

ENV_MODULE = textwrap.dedent('''
    from rlx import register_env
    from rlx.examples.envs.classes.multi_agent import MultiAgentCartPole

    register_env("ma_cartpole_cli", lambda cfg: MultiAgentCartPole({"num_agents": 2}))


    def mapping(agent_id, episode, **kwargs):
        return f"p{agent_id % 2}"
''')

EXPERIMENT = textwrap.dedent('''
    ma-cartpole:
        env: ma_cartpole_cli
        run: PPO
        stop:
            training_iteration: 2
        config:
            train_batch_size: 500
            minibatch_size: 128
            multiagent:
                policies: [p0, p1]
                policy_mapping_fn: "ma_cli_envs:mapping"
                policies_to_train: [p0]
''')


def test_train_file_with_multiagent_section_then_evaluate_the_checkpoint(tmp_path):
    (tmp_path / "ma_cli_envs.py").write_text(ENV_MODULE)
    (tmp_path / "exp.yaml").write_text(EXPERIMENT)
    env = {"PYTHONPATH": str(tmp_path)}
    results = tmp_path / "results"
    train = run_rlx("train", "file", "exp.yaml", "--import", "ma_cli_envs", "--no-progress",
                    results_dir=results, cwd=tmp_path, env=env)
    assert train.returncode == 0, train.stderr
    checkpoints = sorted(results.glob("ma-cartpole/*/checkpoint_000002"))
    assert len(checkpoints) == 1, train.stdout
    checkpoint = checkpoints[0]
    assert sorted(p.name for p in (checkpoint / "policies").iterdir()) == ["p0", "p1"]
    meta = json.loads((checkpoint / "rlx_checkpoint.json").read_text())
    assert meta["policy_ids"] == ["p0", "p1"]
    trial = checkpoint.parent
    rows = [json.loads(line) for line in (trial / "result.json").read_text().splitlines()]
    assert set(rows[-1]["learners"]) == {"p0"}  # policies_to_train
    assert set(rows[-1]["env_runners"]["agent_episode_returns_mean"]) == {"0", "1"}

    out = tmp_path / "episodes.json"
    evaluate = run_rlx("evaluate", str(checkpoint), "--episodes", "2", "--out", str(out), cwd=tmp_path, env=env)
    assert evaluate.returncode == 0, evaluate.stderr
    assert "Episode #2" in evaluate.stdout
    episodes = json.loads(out.read_text())["episodes"]
    assert len(episodes) == 2 and all(e["complete"] for e in episodes)
    # Every step acts for the agents still in the episode, each with its own policy's action.
    first_actions = episodes[0]["actions"][0]
    assert set(first_actions) == {"0", "1"}
    # The episode's reward is the sum over both agents: at least one per step of the longer-lived agent.
    assert episodes[0]["reward"] >= episodes[0]["length"]


def test_train_with_a_multiagent_env_needs_no_multi_agent_config(tmp_path):
    (tmp_path / "ma_cli_envs.py").write_text(ENV_MODULE)
    results = tmp_path / "results"
    train = run_rlx("train", "--algo", "PPO", "--env", "ma_cartpole_cli", "--import", "ma_cli_envs",
                    "--stop", '{"training_iteration": 1}', "--config", '{"train_batch_size": 400}', "--no-progress",
                    results_dir=results, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert train.returncode == 0, train.stderr
    trial = next(Path(results).glob("*/PPO_*"))
    row = json.loads((trial / "result.json").read_text().splitlines()[-1])
    assert set(row["learners"]) == {"default_policy"}
    assert set(row["env_runners"]["module_episode_returns_mean"]) == {"default_policy"}
