"""A/B of two checkouts' search services on one index: does a refactor change what readers get?

Starts ``rag-pipeline serve`` from each checkout (``--before``, ``--after``: folders holding ``rag_pipeline/``) on
the same data folder, one after the other, sends both the same fixed requests — searches in five modes as a
public reader and as a workspace member (``X-User-Groups`` behind a trusted proxy), paths, the reader's tree,
document reads of the top results, malformed bodies — and compares the answers with the timings left out.
Prints how many answers differ (0: the same results, scores, warnings, errors) and the first differences.

    python -m bench.service_ab --before /tmp/before --after . --data-dir .rag_data

(``git worktree add /tmp/before <commit>`` gives the before checkout.) Exit 0 when nothing differs, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

READERS = {
    "public": {"X-User-Id": "U0NOBODY"},
    "member": {"X-User-Id": "U0PROBE", "X-User-Groups": "slack:T0UBUNTU:members"},
}
QUERIES = ["wifi driver not working after upgrade", "kernel panic on boot", "TIMOB-1234", "android build fails",
           "how do I mount a usb drive", "iOS simulator crash", "grub", "printer"]  # fmt: skip
MODES = ("hybrid", "bm25", "routed", "reranked", "vector")
BAD_BODIES = ({"query": "x"}, {"query": "ok query", "top_k": 0}, {"query": "ok query", "mode": "nope"},
              {"query": "ok", "extra": 1})  # fmt: skip
VOLATILE = ("timing_ms", "cached")


class Service:
    """``rag-pipeline serve`` from ``checkout`` on ``data_dir`` at ``port``, until :meth:`stop`."""

    def __init__(self, checkout: Path, data_dir: Path, port: int, log: Path) -> None:
        env = {**os.environ, "RAG_DATA_DIR": str(data_dir), "RAG_SERVE_TRUSTED_PROXY": "1", "DAGSTER_HOME": ""}
        # `-m` from the checkout's folder: its rag_pipeline/ comes first on the path, whatever is installed.
        self.process = subprocess.Popen([sys.executable, "-m", "rag_pipeline.cli", "serve", "--port", str(port)],
                                        cwd=checkout, env=env, stdout=subprocess.DEVNULL,
                                        stderr=log.open("w"))  # fmt: skip
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if self.call("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            if self.process.poll() is not None:
                raise SystemExit(f"the service from {checkout} stopped; see {log}")
            time.sleep(1)
        raise SystemExit(f"the service from {checkout} was not ready in 300 s; see {log}")

    def call(self, method: str, path: str, body: object = None, headers: dict[str, str] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, method=method, data=data,
                                         headers={"Content-Type": "application/json", **(headers or {})})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def _steady(answer: Any) -> Any:
    status, body = answer
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k not in VOLATILE}
    return [status, body]


def probe(service: Service) -> list[dict[str, Any]]:
    """The fixed requests' answers, in order."""
    answers: list[dict[str, Any]] = []
    for reader, headers in READERS.items():
        for query in QUERIES:
            for mode in MODES:
                body = {"query": query, "mode": mode, "top_k": 5}
                answers.append({"reader": reader, "search": body,
                                "answer": _steady(service.call("POST", "/v1/search", body, headers))})  # fmt: skip
        answers.append({"reader": reader, "tree": _steady(service.call("GET", "/v1/tree", None, headers))})
        for path in ("slack/", "jira/"):
            body = {"query": "error", "path": path, "top_k": 3}
            answers.append({"reader": reader, "search": body,
                            "answer": _steady(service.call("POST", "/v1/search", body, headers))})  # fmt: skip
        found = [a["answer"][1]["results"][0]["document_id"] for a in answers
                 if a["reader"] == reader and "search" in a and a["answer"][1].get("results")][:3]  # fmt: skip
        for document in found:
            read = service.call("GET", f"/v1/documents/{document}", None, headers)
            answers.append({"reader": reader, "document": document, "answer": _steady(read)})
    for bad in BAD_BODIES:
        answers.append({"bad": bad, "answer": _steady(service.call("POST", "/v1/search", bad, READERS["public"]))})
    return answers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="the checkout before the change")
    parser.add_argument("--after", type=Path, default=Path("."), help="the checkout after it (default: here)")
    parser.add_argument("--data-dir", type=Path, required=True, help="an indexed data folder (e.g. after `demo`)")
    parser.add_argument("--port", type=int, default=18731, help="first port (the second is the next one)")
    parser.add_argument("--out", type=Path, default=None, help="write both sides' answers as JSON here")
    args = parser.parse_args(argv)
    sides = {}
    for offset, (name, checkout) in enumerate((("before", args.before), ("after", args.after))):
        service = Service(checkout.resolve(), args.data_dir.resolve(), args.port + offset,
                          Path(f"/tmp/service_ab_{name}.log"))  # fmt: skip
        try:
            sides[name] = probe(service)
        finally:
            service.stop()
    if args.out:
        args.out.write_text(json.dumps(sides, indent=1, sort_keys=True, ensure_ascii=False))
    differing = [(a, b) for a, b in zip(sides["before"], sides["after"], strict=True) if a != b]
    results = sum(len(a["answer"][1].get("results", [])) for a in sides["before"] if "search" in a)
    print(f"{len(sides['before'])} answers ({results} search results) compared: {len(differing)} differ")
    for before, after in differing[:3]:
        print("before:", json.dumps(before, ensure_ascii=False)[:400])
        print("after: ", json.dumps(after, ensure_ascii=False)[:400])
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
