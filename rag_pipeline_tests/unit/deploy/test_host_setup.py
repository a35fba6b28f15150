"""deploy/container/host_setup.sh as a fresh Debian 12 machine meets it, without changing this machine: the script is
sourced (it then only defines its functions) and each step runs against stand-ins: ``dpkg-query``, ``apt-get`` and
``mount`` found first on PATH, and a cgroup tree of its own (HOST_SETUP_CGROUP_ROOT).

The cgroup tree's controllers file is a file that stats as size 0 and still holds text, as every cgroupfs file does
(a procfs file here): the script once tested it with ``[ -s ]``, which is false for every cgroupfs file, so a hybrid
host's hugetlb controller was never moved and crun refused to run. docs/guides/container.md says where the whole
script ran on a fresh Debian 12 root.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from rag_pipeline_tests.kit.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "deploy" / "container" / "host_setup.sh"
# A procfs file: size 0 when stat'ed, one word when read (like cgroup.controllers on a hybrid host).
SIZE_ZERO_WITH_TEXT = Path("/proc/sys/kernel/ostype")
REAL_V2 = Path("/sys/fs/cgroup/unified/cgroup.controllers")


def _bash(snippet: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``snippet`` run after sourcing the script, with bash's strict mode the script sets."""
    return subprocess.run(
        ["bash", "-c", f'source "{SCRIPT}"\n{snippet}'],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def _stub(folder: Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f"#!/usr/bin/env bash\n{body}\n", encoding="utf-8")
    path.chmod(0o755)


def _stubs_env(stubs: Path) -> dict[str, str]:
    # sudo too, for a run as a user: it runs its arguments.
    _stub(stubs, "sudo", 'exec "$@"')
    return {"PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}"}


def test_sourcing_runs_nothing() -> None:
    result = _bash("echo sourced")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "sourced\n"
    assert result.stderr == ""


def test_the_package_list_holds_what_podman_and_the_stack_need() -> None:
    result = _bash('printf "%s\\n" "${PACKAGES[@]}"')
    assert result.returncode == 0, result.stderr
    packages = set(result.stdout.split())
    # iptables: netavark's bridge network ("netavark: No such file or directory" in the image build's RUN);
    # catatonit: compose's init: true ("container-init binary not found"). Both only recommended by podman.
    assert {"podman", "crun", "netavark", "aardvark-dns", "iptables", "catatonit", "uidmap", "slirp4netns",
            "mmdebstrap"} <= packages  # fmt: skip
    # Installed without recommends: whatever the stack needs is named.
    assert "--no-install-recommends" in SCRIPT.read_text(encoding="utf-8")


def test_only_the_missing_packages_are_installed_and_nothing_when_all_are(tmp_path: Path) -> None:
    stubs = tmp_path / "bin"
    calls = tmp_path / "apt.calls"
    installed = tmp_path / "installed"
    # dpkg-query -W -f '${db:Status-Status}\n' NAME: "installed" for the names listed in $installed.
    _stub(stubs, "dpkg-query", f'name="${{@: -1}}"; grep -qx "$name" "{installed}" && echo installed || exit 1')
    _stub(stubs, "apt-get", f'echo "$*" >> "{calls}"')
    env = _stubs_env(stubs)
    every = _bash('printf "%s\\n" "${PACKAGES[@]}"').stdout.split()

    installed.write_text("\n".join(p for p in every if p not in {"iptables", "catatonit"}) + "\n")
    result = _bash("install_packages", env)
    assert result.returncode == 0, result.stderr
    lines = calls.read_text().splitlines()
    assert lines[0] == "update -qq"
    assert lines[1].split()[-2:] == ["iptables", "catatonit"]
    assert "--no-install-recommends" in lines[1]

    # A machine where podman was installed by hand earlier, without iptables or catatonit, gets them too.
    calls.unlink()
    installed.write_text("podman\nmmdebstrap\n")
    assert _bash("install_packages", env).returncode == 0
    assert set(calls.read_text().splitlines()[1].split()) >= {"iptables", "catatonit", "crun", "netavark"}

    # Run again with everything there: apt is not called.
    calls.unlink()
    installed.write_text("\n".join(every) + "\n")
    result = _bash("install_packages", env)
    assert result.returncode == 0, result.stderr
    assert not calls.exists()


def _cgroup_root(tmp_path: Path, controllers: Path | str | None) -> Path:
    root = tmp_path / "cgroup"
    (root / "unified").mkdir(parents=True)
    target = root / "unified" / "cgroup.controllers"
    if isinstance(controllers, Path):
        target.symlink_to(controllers)
    elif controllers is not None:
        target.write_text(controllers, encoding="utf-8")
    return root


def test_the_controllers_are_read_from_a_file_that_stats_as_size_zero(tmp_path: Path) -> None:
    if not SIZE_ZERO_WITH_TEXT.exists():
        pytest.skip(f"{SIZE_ZERO_WITH_TEXT} is not here (no procfs)")
    text = SIZE_ZERO_WITH_TEXT.read_text().split()
    assert SIZE_ZERO_WITH_TEXT.stat().st_size == 0 and text  # the condition cgroupfs puts every file in
    root = _cgroup_root(tmp_path, SIZE_ZERO_WITH_TEXT)
    controllers = root / "unified" / "cgroup.controllers"
    # What the script did before: `[ -s ]` says "empty" for it.
    assert subprocess.run(["bash", "-c", f'[ -s "{controllers}" ]'], check=False).returncode == 1
    result = _bash("hybrid_v2_controllers", {"HOST_SETUP_CGROUP_ROOT": str(root)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == text


@pytest.mark.parametrize(
    ("content", "expected"),
    [("hugetlb\n", ["hugetlb"]), ("hugetlb misc\n", ["hugetlb", "misc"]), ("", []), ("\n", []), (None, [])],
)
def test_the_controllers_of_a_hybrid_host_one_a_line(tmp_path: Path, content: str | None, expected: list[str]) -> None:
    root = _cgroup_root(tmp_path, content)
    result = _bash("hybrid_v2_controllers", {"HOST_SETUP_CGROUP_ROOT": str(root)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected


def test_a_pure_v2_or_v1_host_has_nothing_to_move(tmp_path: Path) -> None:
    result = _bash("hybrid_v2_controllers", {"HOST_SETUP_CGROUP_ROOT": str(tmp_path / "no_unified_tree")})
    assert (result.returncode, result.stdout) == (0, "")


def test_this_hosts_own_cgroup_tree_is_read_as_it_is() -> None:
    if not REAL_V2.exists():
        pytest.skip("this host is not a hybrid cgroup host")
    result = _bash("hybrid_v2_controllers")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == REAL_V2.read_text().split()


def test_each_controller_is_moved_by_mounting_its_v1_hierarchy(tmp_path: Path) -> None:
    root = _cgroup_root(tmp_path, "hugetlb misc\n")
    stubs = tmp_path / "bin"
    calls = tmp_path / "mount.calls"
    _stub(stubs, "mount", f'echo "$*" >> "{calls}"')
    result = _bash("move_v2_controllers_to_v1", {**_stubs_env(stubs), "HOST_SETUP_CGROUP_ROOT": str(root)})
    assert result.returncode == 0, result.stderr
    assert calls.read_text().splitlines() == [
        f"-t cgroup -o hugetlb cgroup {root}/hugetlb",
        f"-t cgroup -o misc cgroup {root}/misc",
    ]
    assert "moving hugetlb" in result.stderr


def test_no_file_is_tested_by_its_size() -> None:
    """cgroupfs and procfs stat every file as size 0: `-s` on them is always false."""
    code = "\n".join(line.split("#", 1)[0] for line in SCRIPT.read_text(encoding="utf-8").splitlines())
    assert not re.search(r"(\[|\btest)\s+(!\s+)?-s\s", code)
