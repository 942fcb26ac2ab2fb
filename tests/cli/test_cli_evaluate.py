"""`rlx evaluate` / `rlx rollout`, run through the real console script on a small PPO checkpoint."""
from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from cli_helpers import run_rlx
from conftest import small_config

EPISODE_LINE = re.compile(r"^Episode #(\d+): reward: (-?\d+\.\d+), length: (\d+)( \(cut short\))?$")
SUMMARY_MEAN = re.compile(r"reward mean (-?\d+\.\d+), min (-?\d+\.\d+), max (-?\d+\.\d+); length mean (\d+\.\d+)")

#: Envs the subprocess imports as 'evalenvs:...' (PYTHONPATH points at their directory). They
#: fit a CartPole checkpoint: Box(4) observations, Discrete(2) actions, 5-step episodes.
EVAL_ENVS = textwrap.dedent('''
    import gymnasium as gym
    import numpy as np


    class FiveStepEnv(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, config=None):
            self.config = dict(config or {})
            self.render_mode = self.config.get("render_mode")
            self.t = 0

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(4, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.full(4, 0.1 * self.t, np.float32), 1.0, self.t >= 5, False, {}

        def render(self):
            log = self.config.get("render_log")
            if log:
                with open(log, "a") as f:
                    f.write(f"{self.t}\\n")
            if self.render_mode == "rgb_array":
                return np.full((32, 32, 3), 40 * self.t, np.uint8)
            return None


    class BrokenRenderEnv(FiveStepEnv):
        def render(self):
            raise RuntimeError("cannot open display :0")
''')


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PPO checkpoint after 3 small training iterations on CartPole."""
    root = tmp_path_factory.mktemp("evaluate")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLX_RESULTS_DIR", str(root / "results"))
        algo = small_config().build()
        for _ in range(3):
            algo.train()
        path = Path(algo.save(str(root / "ckpt")))
        algo.stop()
    return path


@pytest.fixture
def env_module(tmp_path: Path) -> dict[str, str]:
    """Env vars that make the test envs importable in the subprocess as 'evalenvs:...'."""
    (tmp_path / "evalenvs.py").write_text(EVAL_ENVS)
    return {"PYTHONPATH": str(tmp_path)}


def episode_lines(stdout: str) -> list[tuple[int, float, int, bool]]:
    """(number, reward, length, cut_short) of every episode line."""
    rows = []
    for line in stdout.splitlines():
        match = EPISODE_LINE.match(line)
        if match:
            rows.append((int(match[1]), float(match[2]), int(match[3]), match[4] is not None))
    return rows


def summary_stats(stdout: str) -> tuple[float, float, float, float]:
    """(reward mean, min, max, length mean) of the summary line."""
    summary = [line for line in stdout.splitlines() if line.startswith("Summary")]
    assert len(summary) == 1, stdout
    match = SUMMARY_MEAN.search(summary[0])
    assert match, summary[0]
    return tuple(float(match[i]) for i in range(1, 5))


def assert_one_line_error(proc, *fragments: str) -> None:
    """The command failed with a single `rlx: error:` line naming every fragment."""
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("rlx: error: ")
    for fragment in fragments:
        assert fragment in lines[0]


def test_prints_one_line_per_episode_and_a_summary(checkpoint, results_dir):
    proc = run_rlx("evaluate", str(checkpoint), "--episodes", "3", results_dir=results_dir)
    assert proc.returncode == 0, proc.stderr
    rows = episode_lines(proc.stdout)
    assert [n for n, *_ in rows] == [1, 2, 3]
    assert not any(cut for *_, cut in rows)
    # CartPole pays 1 per step, so an episode's return is its length.
    assert all(reward == length for _, reward, length, _ in rows)
    rewards = [r for _, r, _, _ in rows]
    mean, low, high, length_mean = summary_stats(proc.stdout)
    assert mean == pytest.approx(sum(rewards) / 3, abs=1e-3)
    assert (low, high) == (min(rewards), max(rewards))
    assert length_mean == pytest.approx(sum(n for _, _, n, _ in rows) / 3, abs=1e-3)
    assert "3 complete episodes" in proc.stdout


def test_runs_ten_episodes_by_default(checkpoint, results_dir):
    proc = run_rlx("evaluate", str(checkpoint), results_dir=results_dir)
    assert proc.returncode == 0, proc.stderr
    assert len(episode_lines(proc.stdout)) == 10


def test_rollout_is_an_alias(checkpoint, results_dir):
    proc = run_rlx("rollout", str(checkpoint), "--episodes", "2", results_dir=results_dir)
    assert proc.returncode == 0, proc.stderr
    assert [n for n, *_ in episode_lines(proc.stdout)] == [1, 2]


def test_steps_limits_the_total_length_and_leaves_cut_episodes_out_of_the_summary(checkpoint, results_dir):
    proc = run_rlx("evaluate", str(checkpoint), "--steps", "137", "--seed", "0", results_dir=results_dir)
    assert proc.returncode == 0, proc.stderr
    rows = episode_lines(proc.stdout)
    assert sum(length for _, _, length, _ in rows) == 137
    assert not any(cut for *_, cut in rows[:-1])
    complete = [r for _, r, _, cut in rows if not cut]
    if rows[-1][3]:
        assert "1 cut short" in proc.stdout and "not counted" in proc.stdout
    if complete:
        assert summary_stats(proc.stdout)[0] == pytest.approx(sum(complete) / len(complete), abs=1e-3)
    else:
        assert "no complete episode" in proc.stdout


def test_out_writes_json_consistent_with_the_printed_lines(checkpoint, results_dir, tmp_path):
    out = tmp_path / "sub" / "episodes.json"
    proc = run_rlx("evaluate", str(checkpoint), "--steps", "60", "--seed", "1", "--out", str(out),
                   results_dir=results_dir)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["checkpoint"] == str(checkpoint)
    assert (data["algo"], data["env"], data["explore"]) == ("PPO", "CartPole-v1", False)
    printed = episode_lines(proc.stdout)
    assert [(e["episode"], e["reward"], e["length"], not e["complete"]) for e in data["episodes"]] == printed
    for episode in data["episodes"]:
        n = episode["length"]
        assert len(episode["observations"]) == len(episode["actions"]) == len(episode["rewards"]) == n
        assert all(len(obs) == 4 for obs in episode["observations"])
        assert set(episode["actions"]) <= {0, 1}
        assert sum(episode["rewards"]) == pytest.approx(episode["reward"])
    complete = [e["reward"] for e in data["episodes"] if e["complete"]]
    summary = data["summary"]
    assert summary["episodes"] == len(complete)
    assert summary["steps"] == 60
    if complete:
        assert summary["reward_mean"] == pytest.approx(sum(complete) / len(complete))


@pytest.mark.slow
def test_same_seed_gives_the_same_output_and_another_seed_other_episodes(checkpoint, results_dir, tmp_path):
    def run(seed: str, name: str, *extra: str) -> tuple[str, dict]:
        out = tmp_path / name
        proc = run_rlx("evaluate", str(checkpoint), "--episodes", "3", "--seed", seed, "--out", str(out), *extra,
                       results_dir=results_dir)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.replace(str(out), "OUT"), json.loads(out.read_text())

    first_out, first = run("7", "a.json")
    again_out, again = run("7", "b.json")
    assert first_out == again_out
    assert first["episodes"] == again["episodes"]
    _, other = run("8", "c.json")
    assert other["episodes"][0]["observations"][0] != first["episodes"][0]["observations"][0]
    # Without a seed in the config, --seed alone must fix the sampled actions too.
    unseeded = ("--explore", "--config", '{"seed": null}')
    explore_out, explore = run("7", "d.json", *unseeded)
    explore_again_out, explore_again = run("7", "e.json", *unseeded)
    assert explore_out == explore_again_out
    assert explore["explore"] is True


def test_algo_mismatch_is_a_one_line_error(checkpoint, results_dir):
    proc = run_rlx("evaluate", str(checkpoint), "--algo", "DQN", results_dir=results_dir)
    assert_one_line_error(proc, "DQN", "PPO")
    assert proc.stdout == ""


def test_algo_matching_the_checkpoint_is_accepted_in_any_case(checkpoint, results_dir):
    proc = run_rlx("evaluate", str(checkpoint), "--algo", "ppo", "--episodes", "1", results_dir=results_dir)
    assert proc.returncode == 0, proc.stderr
    assert len(episode_lines(proc.stdout)) == 1


def test_missing_checkpoint_is_a_one_line_error_and_vv_shows_the_traceback(tmp_path, results_dir):
    missing = tmp_path / "no_such_checkpoint"
    proc = run_rlx("evaluate", str(missing), results_dir=results_dir)
    assert_one_line_error(proc, str(missing), "does not exist")
    proc = run_rlx("evaluate", str(missing), "-vv", results_dir=results_dir)
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "CheckpointError" in proc.stderr


def test_directory_that_is_not_a_checkpoint_names_the_checkpoints_inside(checkpoint, results_dir):
    proc = run_rlx("evaluate", str(checkpoint.parent), results_dir=results_dir)
    assert_one_line_error(proc, "is not an rlx checkpoint", str(checkpoint))


def test_env_override_to_an_incompatible_env_is_a_clear_error(checkpoint, results_dir):
    proc = run_rlx("evaluate", str(checkpoint), "--env", "Pendulum-v1", results_dir=results_dir)
    assert_one_line_error(proc, "--env Pendulum-v1", "CartPole-v1", "observation or action spaces differ",
                          "module.safetensors")


def test_env_and_config_overrides_reach_the_env(checkpoint, results_dir, env_module):
    proc = run_rlx("evaluate", str(checkpoint), "--env", "evalenvs:FiveStepEnv", "--episodes", "2",
                   results_dir=results_dir, env=env_module)
    assert proc.returncode == 0, proc.stderr
    assert [(r, n) for _, r, n, _ in episode_lines(proc.stdout)] == [(5.0, 5), (5.0, 5)]


def test_unknown_config_key_is_a_one_line_error(checkpoint, results_dir):
    proc = run_rlx("evaluate", str(checkpoint), "--config", '{"lrr": 0.1}', results_dir=results_dir)
    assert_one_line_error(proc, "--config", "lrr", "Did you mean 'lr'")


def test_help_lists_every_option(results_dir):
    for command in ("evaluate", "rollout"):
        proc = run_rlx(command, "--help", results_dir=results_dir)
        assert proc.returncode == 0
        for option in ("--episodes", "--steps", "--explore", "--no-explore", "--render", "--video-dir", "--out",
                       "--seed", "--env", "--algo", "--config", "CHECKPOINT"):
            assert option in proc.stdout, option


def test_render_renders_a_custom_env_after_every_reset_and_step(checkpoint, results_dir, env_module, tmp_path):
    log = tmp_path / "renders.txt"
    config = json.dumps({"env_config": {"render_log": str(log)}})
    proc = run_rlx("evaluate", str(checkpoint), "--env", "evalenvs:FiveStepEnv", "--config", config,
                   "--episodes", "2", "--render", results_dir=results_dir, env=env_module)
    assert proc.returncode == 0, proc.stderr
    # Each episode: one render after the reset (t=0) and one after each of its 5 steps.
    assert log.read_text().split() == ["0", "1", "2", "3", "4", "5"] * 2


def test_render_failure_is_a_clear_error(checkpoint, results_dir, env_module):
    proc = run_rlx("evaluate", str(checkpoint), "--env", "evalenvs:BrokenRenderEnv", "--render",
                   results_dir=results_dir, env=env_module)
    assert_one_line_error(proc, "--render", "cannot open display", "--video-dir")


def test_video_dir_records_every_episode(checkpoint, results_dir, tmp_path):
    videos = tmp_path / "videos"
    proc = run_rlx("evaluate", str(checkpoint), "--episodes", "3", "--video-dir", str(videos),
                   results_dir=results_dir)
    assert proc.returncode == 0, proc.stderr
    assert len(episode_lines(proc.stdout)) == 3
    mp4s = sorted(p.name for p in videos.glob("*.mp4"))
    assert len(mp4s) == 3
    assert all((videos / name).stat().st_size > 0 for name in mp4s)


def test_video_dir_records_a_custom_rgb_array_env(checkpoint, results_dir, env_module, tmp_path):
    videos = tmp_path / "videos"
    config = json.dumps({"env_config": {"render_mode": "rgb_array"}})
    proc = run_rlx("evaluate", str(checkpoint), "--env", "evalenvs:FiveStepEnv", "--config", config,
                   "--episodes", "2", "--video-dir", str(videos), results_dir=results_dir, env=env_module)
    assert proc.returncode == 0, proc.stderr
    assert len(list(videos.glob("*.mp4"))) == 2


def test_video_dir_needs_an_rgb_array_custom_env(checkpoint, results_dir, env_module, tmp_path):
    proc = run_rlx("evaluate", str(checkpoint), "--env", "evalenvs:FiveStepEnv", "--video-dir",
                   str(tmp_path / "videos"), results_dir=results_dir, env=env_module)
    assert_one_line_error(proc, "--video-dir", "render_mode='rgb_array'", "env_config")


def test_video_dir_without_moviepy_names_the_fix(checkpoint, results_dir, tmp_path):
    blocker = tmp_path / "blocker" / "moviepy"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('moviepy is blocked for this test')\n")
    proc = run_rlx("evaluate", str(checkpoint), "--video-dir", str(tmp_path / "videos"), results_dir=results_dir,
                   env={"PYTHONPATH": str(blocker.parent)})
    assert_one_line_error(proc, "--video-dir", "moviepy", "pip install -c constraints.txt -e '.[video]'")
    assert not (tmp_path / "videos").exists()
