"""Names of the batch columns shared by EnvRunners, Learners and callbacks."""


class Columns:
    """Batch column names. Sampled batches are time-major: every column is shaped [T, B, ...]."""

    OBS = "obs"
    NEXT_OBS = "new_obs"
    ACTIONS = "actions"
    REWARDS = "rewards"
    TERMINATEDS = "terminateds"
    TRUNCATEDS = "truncateds"
    ACTION_LOGP = "action_logp"
    ACTION_DIST_INPUTS = "action_dist_inputs"
    VF_PREDS = "vf_preds"
    VALUES_BOOTSTRAPPED = "values_bootstrapped"
    ADVANTAGES = "advantages"
    VALUE_TARGETS = "value_targets"
    VALID = "valid"
    WEIGHTS = "weights"
    EMBEDDINGS = "embeddings"
    STATE_IN = "state_in"
    STATE_OUT = "state_out"
    ACTIONS_FOR_ENV = "actions_for_env"
    INFOS = "infos"
    EPS_ID = "eps_id"
    AGENT_ID = "agent_id"
    MODULE_ID = "module_id"
    T = "t"
    LOSS_MASK = "loss_mask"
    RETURNS_TO_GO = "returns_to_go"
    INTRINSIC_REWARDS = "intrinsic_rewards"
    NEXT_OBS_EMBEDDINGS = "next_obs_embeddings"


def state_column(name: str) -> str:
    """The batch column holding a recurrent module's state component `name` before each step."""
    return f"{Columns.STATE_IN}/{name}"
