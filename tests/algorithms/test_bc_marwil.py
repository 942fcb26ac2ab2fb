"""BC and MARWIL: RLlib's defaults and checks, old import paths, and learning CartPole from the
files a trained PPO wrote (`output`), evaluated on the env.

The expert data comes from tuned_examples/bc/generate_cartpole_expert_data.py (what the tuned
examples' comments tell users to run): PPO with rlx's defaults reaches a mean return of 450 in a
few seconds, then samples 20k more steps with its weights into JSON files.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
import yaml

from cli_helpers import run_rlx
from rlx.algorithms.bc import BC, BCConfig
from rlx.algorithms.marwil import MARWIL, MARWILConfig
from rlx.algorithms.registry import get_algorithm_class, get_algorithm_config
from rlx.utils.errors import ConfigError, NotSupportedYetError

ROOT = Path(__file__).resolve().parents[2]
TARGET = 400.0


@pytest.fixture(scope="module")
def expert_data(expert_recordings) -> Path:
    """20k CartPole steps of a PPO trained to a mean return of 450
    (tuned_examples/bc/generate_cartpole_expert_data.py, recorded once per test run)."""
    return expert_recordings("cartpole")


def offline_config(config_class, data: Path, **training):
    return (config_class().environment("CartPole-v1").offline_data(input_=str(data))
            .training(lr=1e-3, **training)
            .evaluation(evaluation_interval=5, evaluation_duration=10, evaluation_config={"explore": False})
            .debugging(seed=0))


# ----------------------------------------------------------------------------- configs


def test_marwil_defaults_are_rllibs():
    config = MARWILConfig()
    assert (config.beta, config.vf_coeff, config.bc_logstd_coeff) == (1.0, 1.0, 0.0)
    assert config.moving_average_sqd_adv_norm_update_rate == 1e-8
    assert config.moving_average_sqd_adv_norm_start == 100.0
    assert (config.lr, config.train_batch_size, config.grad_clip) == (1e-4, 2000, None)
    assert config.postprocess_inputs is True and config.input_ == "sampler"
    assert config.lambda_ == 1.0 and config.to_dict()["lambda"] == 1.0


def test_bc_is_marwil_with_beta_zero():
    config = BCConfig()
    assert config.beta == 0.0 and config.postprocess_inputs is False
    assert issubclass(BC, MARWIL) and isinstance(config, MARWILConfig)
    with pytest.raises(ConfigError, match="For behavioral cloning, `beta` parameter must be 0.0"):
        BCConfig().environment("CartPole-v1").training(beta=0.5).validate()


def test_marwil_checks_its_settings():
    with pytest.raises(ConfigError, match="'beta' must be <= 1.0"):
        MARWILConfig().training(beta=1.5)
    with pytest.raises(ConfigError, match="`postprocess_inputs` must be True for MARWIL"):
        MARWILConfig().environment("CartPole-v1").offline_data(postprocess_inputs=False).validate()
    with pytest.raises(NotSupportedYetError, match="burnin_len"):
        MARWILConfig().training(burnin_len=5)


def test_registry_and_old_import_paths():
    assert get_algorithm_class("BC") is BC and get_algorithm_class("marwil") is MARWIL
    assert isinstance(get_algorithm_config("BC"), BCConfig)
    from rlx.agents.bc import BCTrainer, DEFAULT_CONFIG as BC_CONFIG
    from rlx.agents.marwil import BC_DEFAULT_CONFIG, DEFAULT_CONFIG, MARWILTrainer
    from rlx.algorithms.marwil import MARWILTorchLearner
    from rlx.algorithms.marwil.marwil_learner import MARWILLearner

    assert BCTrainer is BC and MARWILTrainer is MARWIL
    assert BC_CONFIG["beta"] == BC_DEFAULT_CONFIG["beta"] == 0.0 and DEFAULT_CONFIG["beta"] == 1.0
    assert issubclass(MARWILTorchLearner, MARWILLearner)


def test_old_trainer_style_construction(expert_data):
    algo = BC(config={"input": str(expert_data), "train_batch_size": 500, "seed": 0}, env="CartPole-v1")
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["learners"]["default_policy"]["policy_loss"] > 0
    assert result["num_env_steps_trained_lifetime"] >= 500


# ----------------------------------------------------------------------------- learning


@pytest.mark.parametrize("relpath", ["bc/cartpole-bc.yaml", "marwil/cartpole-marwil.yaml"])
def test_tuned_example_learns_cartpole_from_expert_files(relpath, expert_data):
    """The tuned example, on the files a trained PPO wrote: evaluation return >= 400 within its
    300 iterations, in under a minute."""
    spec = next(iter(yaml.safe_load((ROOT / "tuned_examples" / relpath).read_text()).values()))
    assert spec["stop"] == {"env_runners/episode_return_mean": TARGET, "training_iteration": 300}
    settings = dict(spec["config"], input=str(expert_data))
    config = get_algorithm_config(spec["run"]).update_from_dict(settings).environment(spec["env"]).debugging(seed=0)
    start = time.perf_counter()
    algo = config.build()
    progress = []
    try:
        for _ in range(spec["stop"]["training_iteration"]):
            result = algo.train()
            ret = result["env_runners"]["episode_return_mean"]
            if "evaluation" in result:
                progress.append((result["training_iteration"], round(ret, 1)))
            if ret >= TARGET:
                break
    finally:
        algo.stop()
    elapsed = time.perf_counter() - start
    assert ret >= TARGET, f"{spec['run']} did not reach {TARGET}: (iteration, evaluation return) {progress}"
    assert elapsed < 60, f"{spec['run']} took {elapsed:.0f} s: {progress}"


def test_marwil_reports_its_loss_terms_and_evaluation_returns(expert_data):
    algo = offline_config(MARWILConfig, expert_data).evaluation(evaluation_interval=2, evaluation_duration=2).build()
    try:
        first = algo.train()
        second = algo.train()
    finally:
        algo.stop()
    metrics = second["learners"]["default_policy"]
    for key in ("policy_loss", "vf_loss", "total_loss", "moving_avg_sqd_adv_norm", "vf_explained_var", "curr_lr"):
        assert key in metrics and math.isfinite(metrics[key]), key
    assert metrics["moving_avg_sqd_adv_norm"] > 100.0  # moved up from its start by the large squared advantages
    # Offline algorithms step no env while training: train() reports the evaluation's returns.
    assert math.isnan(first["env_runners"]["episode_return_mean"]) and "evaluation" not in first
    evaluated = second["evaluation"]["env_runners"]["episode_return_mean"]
    assert second["env_runners"]["episode_return_mean"] == evaluated == second["episode_reward_mean"]
    assert second["env_runners"]["num_episodes"] == 0


def test_marwil_learner_state_survives_a_checkpoint(expert_data, tmp_path):
    algo = offline_config(MARWILConfig, expert_data).training(moving_average_sqd_adv_norm_update_rate=0.1).build()
    try:
        algo.train()
        norm = algo.learner.moving_avg_sqd_adv_norm
        path = algo.save(str(tmp_path / "ckpt"))
    finally:
        algo.stop()
    restored = MARWIL.from_checkpoint(path)
    try:
        assert restored.learner.moving_avg_sqd_adv_norm == pytest.approx(norm)
    finally:
        restored.stop()


def test_marwil_trains_on_the_sampler_too():
    algo = (MARWILConfig().environment("CartPole-v1").training(train_batch_size=400).debugging(seed=0)).build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["env_runners"]["num_episodes"] > 0
    assert math.isfinite(result["learners"]["default_policy"]["total_loss"])


def test_rlx_train_runs_bc(expert_data, tmp_path):
    proc = run_rlx("train", "--algo", "BC", "--env", "CartPole-v1",
                   "--config", json.dumps({"input": str(expert_data), "evaluation_interval": 1,
                                           "evaluation_duration": 1}),
                   "--stop", json.dumps({"training_iteration": 2}), results_dir=tmp_path / "results")
    assert proc.returncode == 0, proc.stderr
    result_files = list((tmp_path / "results").rglob("result.json"))
    assert len(result_files) == 1
    last = json.loads(result_files[0].read_text().splitlines()[-1])
    assert last["training_iteration"] == 2 and "evaluation" in last


def test_evaluation_runs_on_evaluation_env_runners(expert_data):
    algo = offline_config(BCConfig, expert_data).evaluation(
        evaluation_interval=1, evaluation_duration=2, evaluation_num_env_runners=1).build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["evaluation"]["env_runners"]["num_episodes"] >= 2
    assert result["evaluation"]["num_healthy_workers"] == 1
    assert result["env_runners"]["episode_return_mean"] == result["evaluation"]["env_runners"]["episode_return_mean"]
