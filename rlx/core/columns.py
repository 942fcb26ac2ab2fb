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
