"""Who may talk to a policy server: loopback by default, a bearer token for anything else."""
from __future__ import annotations

import hmac
import ipaddress
import os

from rlx.utils.errors import ConfigError

#: Environment variable a server or client reads its token from when none is given.
TOKEN_ENV_VAR = "RLX_POLICY_SERVER_TOKEN"
DEFAULT_ADDRESS = "127.0.0.1"


def resolve_token(token: str | None) -> str | None:
    """The given token, else $RLX_POLICY_SERVER_TOKEN, else None."""
    if token is None:
        token = os.environ.get(TOKEN_ENV_VAR) or None
    if token is not None and (not isinstance(token, str) or len(token) < 8):
        raise ConfigError("auth_token must be a string of at least 8 characters (e.g. secrets.token_urlsafe(32)).")
    return token


def is_loopback(address: str) -> bool:
    """Whether `address` only accepts connections from this machine."""
    if address in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check_bind(address: str, token: str | None) -> None:
    """ConfigError when a server would listen beyond this machine without a token."""
    if not is_loopback(address) and token is None:
        raise ConfigError(
            f"A policy server on {address!r} is reachable from other machines, so it needs an auth token: pass "
            f"auth_token='...' (or set ${TOKEN_ENV_VAR}) and give clients the same token; or listen on "
            f"{DEFAULT_ADDRESS!r}.")


def authorized(header: str | None, token: str | None) -> bool:
    """Whether an Authorization header carries `token` (always True without a token)."""
    if token is None:
        return True
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer "):].strip().encode(), token.encode())
