"""Verified identity: a bearer JWT from the company's identity provider (OIDC), checked against its keys.

With ``RAG_SERVE_AUTH=oidc`` the service believes no identity header: the caller is who a valid ID or access
token says, through one configured claim (``email`` by default, else an account id) that the principal directory
resolves like an ``X-User-Email`` / ``X-User-Id`` header. A token is valid when

- its signature verifies against a key of the issuer's JWKS (``RAG_OIDC_JWKS_URL``, else the ``jwks_uri`` of
  ``<issuer>/.well-known/openid-configuration``), fetched once and cached; a key id the cache does not know makes
  one refetch, so a rotated key is picked up and an unknown one refused;
- its algorithm is on the allow-list (RS256, ES256 by default; ``none`` and the HMAC family never: a public key
  must not double as an HMAC secret);
- ``iss`` is the issuer, ``aud`` holds the audience, ``exp`` is in the future and ``nbf``/``iat`` not in it, each
  with ``leeway`` seconds of clock skew.

A key the issuer withdraws is refused once the cached key set is refetched: on a token with an unknown key id
(at most every ``refetch_cooldown_seconds``) or after :data:`KEY_SET_LIFESPAN_SECONDS`.

PyJWT does the checks (its ``PyJWKClient`` caches the key set); this module only wires settings to it and turns
every failure into one :class:`TokenRejected` whose message says what was wrong, never the token.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field

import jwt
from jwt import PyJWKClient

DEFAULT_ALGORITHMS: tuple[str, ...] = ("RS256", "ES256")
_REFUSED_ALGORITHMS = frozenset({"none", "HS256", "HS384", "HS512"})
DISCOVERY_PATH = "/.well-known/openid-configuration"
KEY_SET_LIFESPAN_SECONDS = 300


class TokenRejected(ValueError):
    """A bearer token that does not prove who the caller is (a 401); the message never holds the token."""


class IssuerUnreachable(RuntimeError):
    """The issuer's discovery document or key set could not be read (a 503: the caller may be fine)."""


@dataclass
class OidcVerifier:
    """Verifies bearer JWTs of one issuer and audience and returns the identity claim."""

    issuer: str
    audience: str
    jwks_url: str | None = None
    claim: str = "email"
    algorithms: Sequence[str] = DEFAULT_ALGORITHMS
    leeway_seconds: int = 60
    timeout_seconds: float = 5.0
    # An unknown key id refetches the key set at most this often: a rotated key is picked up within it, and a
    # stream of tokens with made-up key ids cannot make the service hammer the issuer.
    refetch_cooldown_seconds: float = 30.0
    _client: PyJWKClient | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        refused = _REFUSED_ALGORITHMS.intersection(self.algorithms)
        if refused:
            raise ValueError(f"RAG_OIDC_ALGORITHMS may not include {', '.join(sorted(refused))}")
        if not self.issuer or not self.audience:
            raise ValueError("RAG_SERVE_AUTH=oidc needs RAG_OIDC_ISSUER and RAG_OIDC_AUDIENCE")

    def _keys(self) -> PyJWKClient:
        with self._lock:
            if self._client is None:
                url = self.jwks_url or self._discover_jwks_url()
                # The key set is cached (5 minutes), single keys are not: PyJWKClient's per-kid cache would keep
                # accepting a withdrawn key until restart. A withdrawn key is refused at the next refetch.
                self._client = PyJWKClient(
                    url,
                    cache_keys=False,
                    cache_jwk_set=True,
                    lifespan=KEY_SET_LIFESPAN_SECONDS,
                    timeout=self.timeout_seconds,
                    cooldown_duration=self.refetch_cooldown_seconds,
                )
            return self._client

    def _discover_jwks_url(self) -> str:
        where = self.issuer.rstrip("/") + DISCOVERY_PATH
        try:
            with urllib.request.urlopen(where, timeout=self.timeout_seconds) as response:
                document = json.loads(response.read())
        except (OSError, ValueError) as exc:
            raise IssuerUnreachable(f"the OIDC discovery document {where} could not be read ({exc})") from None
        url = document.get("jwks_uri") if isinstance(document, dict) else None
        if not isinstance(url, str) or not url:
            raise IssuerUnreachable(f"{where} names no jwks_uri")
        return url

    def identity(self, token: str) -> str:
        """The configured claim of a valid ``token`` (an email is lower-cased); :class:`TokenRejected` otherwise."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRejected("the bearer token is not a JWT") from None
        algorithm = header.get("alg")
        if algorithm not in self.algorithms:
            raise TokenRejected(
                f"the token's algorithm {algorithm!r} is not accepted (allowed: {', '.join(self.algorithms)})"
            )
        try:
            key = self._keys().get_signing_key_from_jwt(token)
        except jwt.PyJWKClientConnectionError as exc:
            raise IssuerUnreachable(f"the issuer's keys could not be read ({exc})") from None
        except jwt.PyJWKClientError:
            raise TokenRejected("the token is signed with a key the issuer does not publish") from None
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=list(self.algorithms),
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_seconds,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRejected("the token has expired") from None
        except jwt.InvalidAudienceError:
            raise TokenRejected("the token is not for this service (aud)") from None
        except jwt.InvalidIssuerError:
            raise TokenRejected("the token is from another issuer (iss)") from None
        except jwt.ImmatureSignatureError:
            raise TokenRejected("the token is not valid yet (nbf/iat)") from None
        except jwt.PyJWTError as exc:
            raise TokenRejected(f"the token is not valid ({type(exc).__name__})") from None
        value = claims.get(self.claim)
        if not isinstance(value, str) or not value.strip():
            raise TokenRejected(f"the token has no {self.claim!r} claim (RAG_OIDC_CLAIM)")
        value = value.strip()
        return value.lower() if "@" in value else value
