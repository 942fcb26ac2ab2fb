"""The external application API's parts: JSON codec, auth, HTTP transport, episode book,
batched server-side inference, the in-process reader the policy server builds on, and the
multi-agent episode commands and requests (multi_agent, multi_agent_server).

User-facing classes live at RLlib's paths: rlx.env.policy_client.PolicyClient,
rlx.env.policy_server_input.PolicyServerInput, rlx.env.external_env.ExternalEnv and
rlx.env.external_multi_agent_env.ExternalMultiAgentEnv.
"""
