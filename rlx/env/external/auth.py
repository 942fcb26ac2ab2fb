"""Who may talk to a policy server: loopback by default, a bearer token for anything else."""
from __future__ import annotations

import hmac
import ipaddress
import os
import re

from rlx.utils.errors import ConfigError

#: Environment variable a server or client reads its token from when none is given.
TOKEN_ENV_VAR = "RLX_POLICY_SERVER_TOKEN"
DEFAULT_ADDRESS = "127.0.0.1"


#: RFC 6750's b64token: the characters a bearer token may have (no spaces, no control characters).
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def resolve_token(token: str | None) -> str | None:
    """The given token, else $RLX_POLICY_SERVER_TOKEN, else None; ConfigError unless it is an
    RFC 6750 bearer token (letters, digits, -._~+/ and trailing =) of at least 8 characters."""
    source = "auth_token"
    if token is None:
        token = os.environ.get(TOKEN_ENV_VAR) or None
        source = f"${TOKEN_ENV_VAR}"
    if token is None:
        return None
    if not isinstance(token, str):
        got = f"a {type(token).__name__}"
    elif not _B64TOKEN.fullmatch(token):
        got = "a token with spaces or characters a bearer token cannot have"
    elif len(token) < 8:
        got = f"{len(token)} characters"
    else:
        return token
    raise ConfigError(f"{source} must be a bearer token (RFC 6750) of at least 8 characters: letters, digits and "
                      f"-._~+/ (e.g. secrets.token_urlsafe(32)); got {got}.")


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
    """Whether an Authorization header carries `token` (always True without a token): the
    scheme "Bearer" in any case (RFC 7235), then spaces, then exactly the token (RFC 6750)."""
    if token is None:
        return True
    if not header:
        return False
    scheme, _, credentials = header.partition(" ")
    credentials = credentials.lstrip(" ")
    if scheme.lower() != "bearer" or not _B64TOKEN.fullmatch(credentials):
        return False
    return hmac.compare_digest(credentials.encode("ascii"), token.encode("ascii"))
