"""OIDC bearer JWTs (issue 47, part 1): real tokens signed with ``cryptography`` keys by a local issuer on
127.0.0.1, verified by :class:`OidcVerifier` through discovery and the issuer's JWKS: valid, expired, not yet
valid, wrong audience or issuer, ``alg: none``, an HMAC token made with the public key, an unknown key id, a rotated
key, a missing claim, an unreachable issuer; the key set fetched once and cached."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import statistics
import time
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from rag_pipeline.http.oidc import IssuerUnreachable, OidcVerifier, TokenRejected
from rag_pipeline_tests.kit.emulators.http import LocalHttpService
from rag_pipeline_tests.kit.emulators.oidc_issuer import AUDIENCE, OidcIssuer

ALICE = "Alice@Serve.Test"


def _hs256(header: dict[str, object], claims: dict[str, object], secret: bytes) -> str:
    """An HMAC-signed JWT made by hand (PyJWT refuses a public key as an HMAC secret, as an attacker would not)."""

    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = f"{part(json.dumps(header).encode())}.{part(json.dumps(claims).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{part(signature)}"


@pytest.fixture
def issuer() -> Iterator[OidcIssuer]:
    with OidcIssuer() as running:
        yield running


def verifier(issuer: OidcIssuer, **fields: object) -> OidcVerifier:
    return OidcVerifier(issuer.issuer, AUDIENCE, **fields)  # type: ignore[arg-type]


def test_a_valid_token_names_its_person_found_through_discovery_and_the_keys_are_cached(issuer: OidcIssuer) -> None:
    check = verifier(issuer)
    assert check.identity(issuer.token(ALICE)) == "alice@serve.test"  # lower-cased for the directory
    assert check.identity(issuer.token(ALICE, algorithm="ES256")) == "alice@serve.test"
    for _ in range(20):
        check.identity(issuer.token("bob@serve.test"))
    assert issuer.jwks_requests == 1  # fetched once, then cached
    # Another claim can name the person (an account id is kept as it is).
    by_sub = verifier(issuer, claim="sub", jwks_url=issuer.jwks_url)
    assert by_sub.identity(issuer.token(ALICE, sub="acc-Alice")) == "acc-Alice"


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ({"expires_in": -600}, "has expired"),
        ({"aud": "another-service"}, "not for this service"),
        ({"iss": "https://evil.example"}, "another issuer"),
        ({"nbf": int(time.time()) + 3600}, "not valid yet"),
        ({"email": None, "sub": None}, "no 'email' claim"),
        ({"exp": None}, "not valid"),
    ],
    ids=["expired", "audience", "issuer", "not-yet", "no-claim", "no-exp"],
)
def test_a_token_that_fails_a_check_is_rejected_saying_which(
    issuer: OidcIssuer, claims: dict[str, object], message: str
) -> None:
    with pytest.raises(TokenRejected, match=message) as rejected:
        verifier(issuer).identity(issuer.token(ALICE, **claims))  # type: ignore[arg-type]
    assert "eyJ" not in str(rejected.value)  # the token never appears in the message


def test_clock_skew_within_the_leeway_is_accepted(issuer: OidcIssuer) -> None:
    assert verifier(issuer).identity(issuer.token(ALICE, expires_in=-30)) == "alice@serve.test"
    with pytest.raises(TokenRejected, match="expired"):
        verifier(issuer, leeway_seconds=0).identity(issuer.token(ALICE, expires_in=-30))


def test_unsigned_forged_and_foreign_key_tokens_are_rejected(issuer: OidcIssuer) -> None:
    check = verifier(issuer)
    with pytest.raises(TokenRejected, match="algorithm 'none'"):
        check.identity(issuer.unsigned_token(ALICE))
    # HS256 with the issuer's public key as the secret: the classic algorithm confusion.
    public_pem = (
        issuer._keys[issuer.current_kid]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    claims = {"iss": issuer.issuer, "aud": AUDIENCE, "email": ALICE, "exp": int(time.time()) + 60}
    forged = _hs256({"alg": "HS256", "typ": "JWT", "kid": issuer.current_kid}, claims, public_pem)
    with pytest.raises(TokenRejected, match="algorithm 'HS256'"):
        check.identity(forged)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(TokenRejected, match="key the issuer does not publish"):
        check.identity(issuer.token(ALICE, kid="rsa-unknown", key=stranger))
    # A published key id with another key's signature.
    with pytest.raises(TokenRejected, match="not valid"):
        check.identity(issuer.token(ALICE, kid=issuer.current_kid, key=stranger))
    with pytest.raises(TokenRejected, match="not a JWT"):
        check.identity("not-a-jwt")
    with pytest.raises(ValueError, match="may not include none"):
        verifier(issuer, algorithms=("RS256", "none"))


def test_a_rotated_key_is_fetched_and_the_withdrawn_one_refused(issuer: OidcIssuer) -> None:
    check = verifier(issuer, refetch_cooldown_seconds=0)
    old_token = issuer.token(ALICE)
    assert check.identity(old_token) == "alice@serve.test" and issuer.jwks_requests == 1
    issuer.rotate()
    assert check.identity(issuer.token(ALICE)) == "alice@serve.test"  # unknown kid: one refetch
    assert issuer.jwks_requests == 2
    with pytest.raises(TokenRejected, match="does not publish"):
        check.identity(old_token)


def test_an_unreachable_issuer_is_not_the_callers_fault() -> None:
    class Down(LocalHttpService):
        def _serve(self, request: object) -> None:  # pragma: no cover - never started
            raise AssertionError

    with OidcIssuer() as issuer:
        gone = issuer.issuer
        token = issuer.token(ALICE)
    with pytest.raises(IssuerUnreachable, match="discovery document"):
        OidcVerifier(gone, AUDIENCE).identity(token)
    with pytest.raises(IssuerUnreachable, match="keys could not be read"):
        OidcVerifier(gone, AUDIENCE, jwks_url=f"{gone}/jwks.json").identity(token)


def test_verification_cost_is_small_once_the_keys_are_cached(issuer: OidcIssuer) -> None:
    """Not a timing target (those live in bench/): the cached path must not refetch keys per request."""
    check = verifier(issuer)
    tokens = [issuer.token(f"user{i}@serve.test") for i in range(50)]
    started = time.perf_counter()
    check.identity(tokens[0])
    first = time.perf_counter() - started
    timings = []
    for token in tokens[1:]:
        started = time.perf_counter()
        check.identity(token)
        timings.append(time.perf_counter() - started)
    assert issuer.jwks_requests == 1
    print(f"OIDC verify: first (discovery + JWKS) {first * 1000:.1f} ms, cached p50 "
          f"{statistics.median(timings) * 1000:.2f} ms")  # fmt: skip
