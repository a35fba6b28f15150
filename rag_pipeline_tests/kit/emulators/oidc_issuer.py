"""A local OIDC issuer: the discovery document and a JWKS on 127.0.0.1, and real JWTs signed with its keys.

Keys are made with ``cryptography`` (RSA 2048 and P-256) and published as JWKs; :meth:`OidcIssuer.token` signs
claims with PyJWT (the issuer, audience and a one-hour expiry by default, any of them overridable), and
:meth:`OidcIssuer.rotate` publishes a new key and withdraws the old one, as an identity provider does. Requests
to the JWKS are counted, so a test can see the verifier's cache at work.
"""

from __future__ import annotations

import base64
import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from rag_pipeline_tests.kit.emulators.http import LocalHttpService, send_json

AUDIENCE = "rag-pipeline-test"


def _b64(number: int, length: int) -> str:
    return base64.urlsafe_b64encode(number.to_bytes(length, "big")).rstrip(b"=").decode()


def _public_jwk(kid: str, key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> dict[str, str]:
    if isinstance(key, rsa.RSAPrivateKey):
        numbers = key.public_key().public_numbers()
        return {
            "kty": "RSA",
            "kid": kid,
            "use": "sig",
            "alg": "RS256",
            "n": _b64(numbers.n, 256),
            "e": _b64(numbers.e, 3),
        }
    point = key.public_key().public_numbers()
    return {"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256", "x": _b64(point.x, 32),
            "y": _b64(point.y, 32)}  # fmt: skip


class OidcIssuer(LocalHttpService):
    """``/.well-known/openid-configuration`` and ``/jwks.json`` of an issuer whose URL is :attr:`issuer`."""

    thread_name = "oidc-issuer"
    http_methods = ("GET",)

    def __init__(self) -> None:
        super().__init__()
        self._keys: dict[str, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey] = {}
        self._generation = 0
        self.jwks_requests = 0
        self.rotate()
        self._keys["ec-1"] = ec.generate_private_key(ec.SECP256R1())

    @property
    def issuer(self) -> str:
        return self.origin

    @property
    def jwks_url(self) -> str:
        return f"{self.origin}/jwks.json"

    @property
    def current_kid(self) -> str:
        return f"rsa-{self._generation}"

    def rotate(self) -> str:
        """A new RSA signing key replaces the current one in the JWKS; returns its key id."""
        self._keys.pop(f"rsa-{self._generation}", None)
        self._generation += 1
        self._keys[self.current_kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return self.current_kid

    def token(
        self,
        subject_email: str,
        *,
        kid: str | None = None,
        algorithm: str = "RS256",
        key: Any = None,
        expires_in: int = 3600,
        **claims: Any,
    ) -> str:
        """A JWT for ``subject_email`` signed with the current (or ``kid``'s, or the given) key; ``claims``
        override the defaults (``iss``, ``aud``, ``exp``, ``iat``, ``sub``, ``email``)."""
        now = int(time.time())
        body = {"iss": self.issuer, "aud": AUDIENCE, "sub": subject_email, "email": subject_email, "iat": now,
                "exp": now + expires_in, **claims}  # fmt: skip
        body = {k: v for k, v in body.items() if v is not None}
        kid = kid or (self.current_kid if algorithm == "RS256" else "ec-1")
        signing = key if key is not None else self._keys[kid]
        return jwt.encode(body, signing, algorithm=algorithm, headers={"kid": kid})

    def unsigned_token(self, subject_email: str) -> str:
        """An ``alg: none`` token (header and claims, no signature)."""

        def part(data: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

        now = int(time.time())
        claims = {"iss": self.issuer, "aud": AUDIENCE, "email": subject_email, "exp": now + 3600}
        return f"{part({'alg': 'none', 'typ': 'JWT', 'kid': self.current_kid})}.{part(claims)}."

    def _serve(self, request: BaseHTTPRequestHandler) -> None:
        path = request.path.split("?", 1)[0]
        if path == "/.well-known/openid-configuration":
            send_json(request, 200, {"issuer": self.issuer, "jwks_uri": self.jwks_url,
                                     "id_token_signing_alg_values_supported": ["RS256", "ES256"]})  # fmt: skip
        elif path == "/jwks.json":
            self.jwks_requests += 1
            send_json(request, 200, {"keys": [_public_jwk(kid, key) for kid, key in self._keys.items()]})
        else:
            send_json(request, 404, {"error": "not found"})
