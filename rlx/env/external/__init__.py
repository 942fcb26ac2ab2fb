"""The external application API's parts: JSON codec, auth, HTTP transport, episode book,
batched server-side inference, the in-process reader the policy server builds on, and the
multi-agent episode commands and requests (multi_agent, multi_agent_server); and RLlib's
TCP protocol for simulators that act themselves, RLlink (rllink, rllink_server,
rllink_client, episode_chunks, env_runner_server_for_external_inference).

User-facing classes live at RLlib's paths: rlx.env.policy_client.PolicyClient,
rlx.env.policy_server_input.PolicyServerInput, rlx.env.external_env.ExternalEnv,
rlx.env.external_multi_agent_env.ExternalMultiAgentEnv and
rlx.env.external.env_runner_server_for_external_inference.EnvRunnerServerForExternalInference.
"""
from rlx.env.external.rllink import RLlink, get_rllink_message, send_rllink_message

__all__ = ["RLlink", "get_rllink_message", "send_rllink_message"]
