"""`rlx evaluate CHECKPOINT` (old name `rlx rollout`): run a checkpoint's policy in its env.

Prints one line per episode, `Episode #N: reward: R, length: L`, then a summary. The
policy acts through `algo.compute_single_action` in a fresh env created here, so the
Algorithm's own EnvRunners never step (and need no remote or evaluation runners).
"""
from __future__ import annotations

import argparse
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rlx.algorithms.algorithm import Algorithm
from rlx.algorithms.checkpointing import checkpoint_algorithm_class
from rlx.cli.env_source import import_modules, rebuild_env_source, resolve_gymnasium_id
from rlx.core.rl_module.agent_mapping import AgentMapper
from rlx.env.multi_agent_env import MultiAgentEnv
from rlx.env.multi_agent_episode import MultiAgentEpisode
from rlx.env.video import HUMAN, RGB_ARRAY, always, gymnasium_id, make_env, record_videos, require_moviepy
from rlx.loggers.logger import json_safe
from rlx.utils.checkpoints import METADATA_FILE, UnstorableSettingError, read_json, read_metadata
from rlx.utils.errors import CheckpointError, ConfigError, EnvError, RLXError

logger = logging.getLogger("rlx")

DEFAULT_EPISODES = 10

#: Settings that only cost start-up time when evaluating: no remote, evaluation or extra
#: sampling envs, and no training videos (applied where the checkpoint's config has them).
EVALUATION_OVERRIDES: dict[str, Any] = {
    "num_env_runners": 0,
    "num_envs_per_env_runner": 1,
    "evaluation_interval": None,
    "render_env": False,
}


@dataclass
class Episode:
    """One evaluation episode; the per-step lists are filled only when they are kept (--out).

    `observations[i]` is the observation the policy saw before taking `actions[i]`.
    """

    number: int
    reward: float = 0.0
    length: int = 0
    complete: bool = False
    observations: list[Any] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)


# ---------------------------------------------------------------------------- command


def run_evaluate_command(args: argparse.Namespace) -> int:
    """Run `rlx evaluate` / `rlx rollout` with parsed arguments; returns the exit status."""
    _check_output_options(args)
    meta = read_checkpoint_metadata(args.checkpoint)
    _prepare_env(args, meta)
    algo_class = _checkpoint_algorithm_class(args.checkpoint, meta)
    _check_algo(args.algo, algo_class.__name__)
    _check_config_overrides(algo_class, args.config)
    algo = _load_algorithm(args, meta)
    try:
        episodes = _evaluate(algo, args)
        summary = summarize(episodes)
        for line in summary_lines(summary):
            print(line)
        if args.out:
            _write_out(args, algo, episodes, summary)
    finally:
        algo.stop()
    return 0


def _check_output_options(args: argparse.Namespace) -> None:
    if args.render and args.video_dir:
        raise ConfigError("--render and --video-dir cannot be combined: an env renders either to a window or to "
                          "video frames. Pick one.")
    if args.video_dir:
        require_moviepy("--video-dir")


def _prepare_env(args: argparse.Namespace, meta: dict[str, Any]) -> None:
    """Make the checkpoint's env (or --env) resolvable here: import the --import modules, then
    what the checkpoint records (modules, the experiment file), and resolve a Gymnasium
    plugin's 'module:NS/Name-vN' id."""
    import_modules(list(getattr(args, "imports", None) or []))
    rebuild_env_source(meta, args.checkpoint)
    if args.env is not None:
        args.env, _ = resolve_gymnasium_id(args.env)


def read_checkpoint_metadata(path: str) -> dict[str, Any]:
    """The checkpoint's metadata; a directory that is not a checkpoint gets a CheckpointError
    naming the checkpoints inside it, if any (a trial directory holds several)."""
    root = Path(path).expanduser()
    if root.is_dir() and not (root / METADATA_FILE).is_file():
        inside = sorted(p.parent.name for p in root.glob(f"*/{METADATA_FILE}"))
        hint = f" Checkpoints inside it: {', '.join(inside)}; pass one, e.g. {root / inside[-1]}." \
            if inside else " Give a directory written by rlx train or algo.save()."
        raise CheckpointError(f"{root} is not an rlx checkpoint (it has no {METADATA_FILE}).{hint}")
    return read_metadata(root)


def _checkpoint_algorithm_class(path: str, meta: dict[str, Any]) -> type:
    return checkpoint_algorithm_class(Path(path).expanduser(), meta)


def _check_algo(requested: str | None, recorded: str) -> None:
    """--algo is optional; when given it must name the checkpoint's algorithm."""
    if requested is not None and requested.lower() != recorded.lower():
        raise ConfigError(
            f"--algo {requested} does not match the checkpoint, which holds a {recorded} algorithm. "
            f"Leave --algo out or pass --algo {recorded}."
        )


def _check_config_overrides(algo_class: type, overrides: dict[str, Any] | None) -> None:
    """Report a bad --config key or value as the user's mistake, not as a broken checkpoint."""
    if not overrides:
        return
    try:
        algo_class.get_default_config().update_from_dict(dict(overrides))
    except ConfigError as err:
        raise ConfigError(f"--config: {err}") from err


def config_overrides(args: argparse.Namespace, stored_keys: set[str]) -> dict[str, Any]:
    """The config_overrides for Algorithm.from_checkpoint: fast-start settings (for keys the
    checkpoint's config has), then --config, --seed and --env, the later ones winning."""
    overrides = {key: value for key, value in EVALUATION_OVERRIDES.items() if key in stored_keys}
    overrides.update(args.config or {})
    if args.seed is not None:
        overrides["seed"] = args.seed  # seeds the policy's sampling too, for --explore
    if args.env is not None:
        overrides["env"] = args.env
    return overrides


def _load_algorithm(args: argparse.Namespace, meta: dict[str, Any]) -> Any:
    stored = read_json(Path(args.checkpoint).expanduser() / "config.json")
    overrides = config_overrides(args, set(stored))
    try:
        algo = Algorithm.from_checkpoint(args.checkpoint, config_overrides=overrides)
    except CheckpointError as err:
        if args.env is None or isinstance(err, UnstorableSettingError):
            raise  # a setting the checkpoint could not store: its message says what to pass
        trained_on = meta.get("env") or "another env"
        raise EnvError(
            f"The checkpoint cannot be loaded with --env {args.env} (it was trained on {trained_on}): most likely "
            f"the observation or action spaces differ, so its policy does not fit. Evaluate it in a compatible env. "
            f"({err})"
        ) from err
    logger.info("Loaded %s from %s (iteration %s)", type(algo).__name__, args.checkpoint, algo.iteration)
    return algo


# ---------------------------------------------------------------------------- running episodes


def _evaluate(algo: Any, args: argparse.Namespace) -> list[Episode]:
    env = make_evaluation_env(algo.config, render=args.render, video_dir=args.video_dir)
    episodes = None if args.steps is not None else (args.episodes or DEFAULT_EPISODES)
    try:
        return run_episodes(
            algo, env, episodes=episodes, steps=args.steps,
            explore=bool(args.explore), seed=args.seed, keep_steps=bool(args.out),
            render=_custom_renderer(algo.config) if args.render else None,
            on_episode=lambda episode: print(episode_line(episode), flush=True),
        )
    finally:
        env.close()  # also writes the video of an episode cut short


def make_evaluation_env(config: Any, render: bool = False, video_dir: str | None = None) -> Any:
    """A fresh env for evaluation: rendering to a window (`render`), recording every episode into
    `video_dir`, or plain."""
    if video_dir:
        return record_videos(make_env(config, RGB_ARRAY, "--video-dir"), video_dir, episode_trigger=always)
    if not render:
        return make_env(config)
    mode = HUMAN if gymnasium_id(config.env) is not None else None
    try:
        return make_env(config, mode, "--render")
    except RLXError:
        raise
    except Exception as err:  # the window opens on the env checker's first reset
        raise _render_error(config.env, err) from err


def _custom_renderer(config: Any) -> Callable[[Any], None] | None:
    """For --render: None when the env renders itself (a Gymnasium id in 'human' mode), else a
    function calling env.render() after every reset and step."""
    if gymnasium_id(config.env) is not None:
        return None

    def render(env: Any) -> None:
        try:
            env.render()
        except RLXError:
            raise
        except Exception as err:
            raise _render_error(config.env, err) from err

    return render


def _render_error(env_spec: Any, err: Exception) -> EnvError:
    return EnvError(
        f"--render: rendering env {env_spec!r} failed: {type(err).__name__}: {err}. Rendering to a window needs a "
        "display (and pygame for Gymnasium's envs); without one, record videos with --video-dir DIR instead."
    )


def run_episodes(
    algo: Any,
    env: Any,
    *,
    episodes: int | None,
    steps: int | None,
    explore: bool = False,
    seed: int | None = None,
    keep_steps: bool = False,
    render: Callable[[Any], None] | None = None,
    on_episode: Callable[[Episode], None] | None = None,
) -> list[Episode]:
    """Run `episodes` episodes, or `steps` env steps in all (the last episode may be cut
    short), acting with `algo.compute_single_action`.

    The first reset uses `seed`; later resets continue the env's RNG, so a seed fixes the run.
    `on_episode` is called as each episode ends (or is cut short).
    """
    done: list[Episode] = []
    steps_left = steps
    reset_seed = seed
    # The env's own API decides how to step it (a video recorder wraps either kind).
    multi_agent_env = isinstance(getattr(env, "unwrapped", env), MultiAgentEnv)
    act_and_step = _multi_agent_stepper(algo, env, explore) if multi_agent_env else None
    while (episodes is None or len(done) < episodes) and (steps_left is None or steps_left > 0):
        episode = Episode(number=len(done) + 1)
        obs, _ = env.reset(seed=reset_seed)
        reset_seed = None
        if act_and_step is not None:
            act_and_step.new_episode()
        # A recurrent policy carries its state through the episode, from the initial one.
        state = algo.get_policy().get_initial_state() if act_and_step is None else []
        if render is not None:
            render(env)
        while steps_left is None or steps_left > 0:
            if act_and_step is not None:
                action, next_obs, reward, terminated, truncated = act_and_step(obs)
            else:
                if state:
                    action, state, _ = algo.compute_single_action(obs, state=state, explore=explore)
                else:
                    action = algo.compute_single_action(obs, explore=explore)
                next_obs, reward, terminated, truncated, _ = env.step(action)
            if render is not None:
                render(env)
            _record_step(episode, obs, action, float(reward), keep_steps)
            obs = next_obs
            if steps_left is not None:
                steps_left -= 1
            if terminated or truncated:
                episode.complete = True
                break
        done.append(episode)
        if on_episode is not None:
            on_episode(episode)
    return done


class _multi_agent_stepper:
    """Acts for every agent of a MultiAgentEnv with the policy policy_mapping_fn picks for it
    (once per agent per episode); a step's reward is the sum over agents, and the episode ends
    with "__all__" (or when no agent is left to act)."""

    def __init__(self, algo: Any, env: Any, explore: bool):
        self.algo, self.env, self.explore = algo, env, explore
        self.mapper = AgentMapper(algo.config.policy_mapping_fn, algo.policy_ids)
        self.episode: Any = None

    def new_episode(self) -> None:
        self.episode = MultiAgentEpisode()
        self.done_agents: set = set()

    def __call__(self, obs: dict) -> tuple[dict, dict, float, bool, bool]:
        actions = {}
        for agent_id, observation in obs.items():
            if agent_id in self.done_agents:
                continue  # its final observation: it acts no more
            policy_id = self.episode.agent_to_module_map.get(agent_id)
            if policy_id is None:
                policy_id = self.episode.agent_to_module_map[agent_id] = self.mapper(agent_id, self.episode)
            actions[agent_id] = self.algo.compute_single_action(observation, policy_id=policy_id,
                                                                explore=self.explore)
        next_obs, rewards, terminateds, truncateds, _ = self.env.step(actions)
        for flags in (terminateds, truncateds):
            self.done_agents.update(agent for agent, flag in flags.items() if flag)
        terminated = bool(terminateds.get("__all__", False))
        left = [a for a in next_obs if a not in self.done_agents]
        truncated = bool(truncateds.get("__all__", False)) or (not left and not terminated)
        return actions, next_obs, float(sum(rewards.values())), terminated, truncated


def _record_step(episode: Episode, obs: Any, action: Any, reward: float, keep_steps: bool) -> None:
    episode.reward += reward
    episode.length += 1
    if keep_steps:
        # Converted now: an env may reuse (and overwrite) the arrays it returns.
        episode.observations.append(json_safe(obs))
        episode.actions.append(json_safe(action))
        episode.rewards.append(reward)


# ---------------------------------------------------------------------------- output


def format_number(value: float) -> str:
    """Compact decimal: 500.0, -123.45, 9.3333 (at most 4 decimals, no trailing zeros)."""
    if not math.isfinite(value):
        return str(value)
    text = f"{value:.4f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def episode_line(episode: Episode) -> str:
    """`Episode #N: reward: R, length: L`, with ` (cut short)` for an unfinished episode."""
    line = f"Episode #{episode.number}: reward: {format_number(episode.reward)}, length: {episode.length}"
    return line if episode.complete else line + " (cut short)"


def summarize(episodes: list[Episode]) -> dict[str, Any]:
    """Statistics over the complete episodes (ones cut short by --steps are counted apart)."""
    complete = [e for e in episodes if e.complete]
    rewards = [e.reward for e in complete]
    lengths = [e.length for e in complete]
    return {
        "episodes": len(complete),
        "cut_short": len(episodes) - len(complete),
        "steps": sum(e.length for e in episodes),
        "reward_mean": sum(rewards) / len(rewards) if rewards else None,
        "reward_min": min(rewards) if rewards else None,
        "reward_max": max(rewards) if rewards else None,
        "length_mean": sum(lengths) / len(lengths) if lengths else None,
    }


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The summary printed after the episode lines."""
    n, cut = summary["episodes"], summary["cut_short"]
    cut_note = f" ({cut} cut short by --steps, not counted)" if cut else ""
    if n == 0:
        return [f"Summary: no complete episode in {summary['steps']} steps{cut_note}, so no statistics."]
    return [
        f"Summary: {n} complete episode{'s' if n != 1 else ''}{cut_note}: "
        f"reward mean {format_number(summary['reward_mean'])}, min {format_number(summary['reward_min'])}, "
        f"max {format_number(summary['reward_max'])}; length mean {format_number(summary['length_mean'])}"
    ]


def _write_out(args: argparse.Namespace, algo: Any, episodes: list[Episode], summary: dict[str, Any]) -> None:
    data = {
        "checkpoint": str(Path(args.checkpoint).expanduser().resolve()),
        "algo": type(algo).__name__,
        "env": algo.env_runner.env_name,
        "explore": bool(args.explore),
        "seed": args.seed,
        "episodes": [
            {"episode": e.number, "reward": e.reward, "length": e.length, "complete": e.complete,
             "observations": e.observations, "actions": e.actions, "rewards": e.rewards}
            for e in episodes
        ],
        "summary": summary,
    }
    path = Path(args.out).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(json_safe(data), allow_nan=False))
    print(f"Wrote the episodes to {path}")
