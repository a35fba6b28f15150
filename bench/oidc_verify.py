"""What verifying an OIDC bearer JWT adds to a request (issue 47): :class:`OidcVerifier` against the test kit's
local issuer on 127.0.0.1, RS256 and ES256, uncached (a new verifier: discovery + JWKS fetch + verify) and cached
(the key set in memory: signature and claim checks only), p50/p95 over N tokens. And a personal token's lookup
(:class:`TokenStore.verify`: one SQLite read, the last-use write at most once a minute): the first use of each
token (the write) and repeated uses, over a store of N tokens.

    .venv/bin/python -m bench.oidc_verify [--tokens 500]

Results: bench/results/oidc_verify.json. Whole-process figures for the service's request latency are in
bench/serve_load.py; this isolates the verification step.
"""

from __future__ import annotations

import tempfile
import time
from datetime import timedelta
from pathlib import Path

from bench import common
from rag_pipeline.http.oidc import OidcVerifier
from rag_pipeline.serving.tokens import TokenStore
from rag_pipeline_tests.kit.emulators.oidc_issuer import AUDIENCE, OidcIssuer


def main() -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--tokens", type=int, default=500)
    parser.add_argument("--out", type=Path, default=common.RESULTS / "oidc_verify.json")
    args = parser.parse_args()
    results = {}
    with OidcIssuer() as issuer:
        for algorithm in ("RS256", "ES256"):
            tokens = [issuer.token(f"user{i}@bench.test", algorithm=algorithm) for i in range(args.tokens)]
            uncached = []
            for token in tokens[:50]:
                started = time.perf_counter()
                OidcVerifier(issuer.issuer, AUDIENCE).identity(token)
                uncached.append(time.perf_counter() - started)
            verifier = OidcVerifier(issuer.issuer, AUDIENCE)
            verifier.identity(tokens[0])
            cached = []
            for token in tokens:
                started = time.perf_counter()
                verifier.identity(token)
                cached.append(time.perf_counter() - started)
            results[algorithm] = {
                "uncached_ms": common.latency_ms(uncached, 3),
                "cached_ms": common.latency_ms(cached, 3),
            }
    with tempfile.TemporaryDirectory() as folder:
        store = TokenStore(Path(folder) / "tokens.sqlite")
        made = [store.create(f"person{i}@bench.test", ["search"], timedelta(days=1))[0] for i in range(args.tokens)]
        first, repeated = [], []
        for token in made:
            started = time.perf_counter()
            store.verify(token)
            first.append(time.perf_counter() - started)
        for token in made:
            started = time.perf_counter()
            store.verify(token)
            repeated.append(time.perf_counter() - started)
        results["personal_token"] = {
            "first_use_ms": common.latency_ms(first, 3),
            "repeated_ms": common.latency_ms(repeated, 3),
        }
    common.write_json(args.out, {**results, "run": common.run_record()})
    for name, figures in results.items():
        print(f"{name}: {figures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
