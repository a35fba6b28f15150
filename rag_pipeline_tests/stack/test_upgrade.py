"""An upgrade between images on the same volume (issue 70, item 3), as an operator moves to a new release.

The previous release's image is built from git (:data:`PREVIOUS_RELEASE`, the last commit whose data folder has
layout version 1: one parquet file per day and channel) by its own Dockerfile; it indexes the bundled Slack export
on a named volume and answers a few searches. Then the current image, on the same volume: ``status`` says the
layout the volume holds and the migration pending, the searches answer the same before anything is changed, the
first ``index`` runs the migration (its report in the run's summary and in the folder's record), nothing is
embedded again, and every search answers exactly as the previous release did.

Each phase is one ``podman run --rm`` on the volume, as ``docker run`` would do it. The previous image's own
``DAGSTER_HOME`` names the Compose stack's PostgreSQL instance (that release baked it in), so its single job is
given the data volume's SQLite instance (``DAGSTER_HOME=/var/lib/rag/dagster_home``), which is where the current
image keeps it by default: both releases' runs are in one instance, as on a deployment.

Marked ``stack`` (a container engine and root): run by `make stack-test`.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from rag_pipeline.pipeline.layout import LAYOUT_VERSION
from rag_pipeline_tests.kit import container_stack as C

pytestmark = pytest.mark.stack
# The last commit with (day x channel/project) partition files (layout version 1), the release before the weekly
# layout; rag_pipeline_tests/dagster/test_company_scale.py upgrades a checkout from the same commit.
PREVIOUS_RELEASE = "b68f1af"
VOLUME = "rag-upgrade-test-data"
HOME = "/var/lib/rag/dagster_home"  # where the current image keeps its instance when DAGSTER_HOME is unset
QUERIES = ("wireless driver not working after upgrade", "grub boot menu", "install nvidia driver", "lunch")
ARTIFACTS = C.REPO / "test-artifacts"
# Each query's results as ``rag-pipeline search --json`` prints them, read in one container.
SEARCHES = (
    "import contextlib, io, json, sys\n"
    "from rag_pipeline.cli import main\n"
    "found = []\n"
    "for query in sys.argv[1:]:\n"
    "    out = io.StringIO()\n"
    "    with contextlib.redirect_stdout(out):\n"
    "        code = main(['search', query, '--all-documents', '--json'])\n"
    "    assert code == 0, (query, code)\n"
    "    found.append(json.loads(out.getvalue()))\n"
    "print(json.dumps(found))\n"
)
FIGURES: dict[str, Any] = {}


def _on_volume(image: str, *command: str, timeout: float = 1200) -> str:
    """``command`` in ``image`` on the data volume (the image's user, its working directory); standard output. The
    previous image is given the volume's SQLite instance (its own DAGSTER_HOME names the stack's PostgreSQL one)."""
    home = ["-e", f"DAGSTER_HOME={HOME}"] if image != C.IMAGE else []
    done = C.run(["podman", "run", "--rm", "-v", f"{VOLUME}:/var/lib/rag", *home, image, *command], timeout=timeout,
                 check=False)  # fmt: skip
    assert done.returncode == 0, f"{command[:3]} in {image} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def _json_tail(text: str) -> Any:
    """The JSON document that ends ``text`` (progress lines may come before it)."""
    start = text.find("\n{") + 1 if not text.lstrip().startswith("{") else 0
    return json.loads(text[start:])


def _results(image: str) -> list[list[tuple[str, float]]]:
    """Each query's (document id, score) pairs as ``image`` ranks them on the volume."""
    found = json.loads(_on_volume(image, "python", "-c", SEARCHES, *QUERIES, timeout=600).strip().splitlines()[-1])
    return [[(r["document_id"], round(r["score"], 5)) for r in answer["results"]] for answer in found]


def _status(image: str) -> dict[str, Any]:
    return dict(_json_tail(_on_volume(image, "rag-pipeline", "status", "--json", timeout=300))["layout"])


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    started = time.monotonic()
    C.build_bases()
    C.build_image()
    FIGURES["current_build_seconds"] = round(time.monotonic() - started, 1)
    previous = C.build_release_image(PREVIOUS_RELEASE, tmp_path_factory.mktemp("previous"))
    FIGURES["previous_image"] = previous
    return {"previous": previous["tag"], "current": C.IMAGE}


@pytest.fixture
def volume() -> Any:
    C.run(["podman", "volume", "rm", "-f", VOLUME], timeout=120, check=False)
    C.run(["podman", "volume", "create", VOLUME], timeout=60)
    try:
        yield VOLUME
    finally:
        C.run(["podman", "volume", "rm", "-f", VOLUME], timeout=120, check=False)
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "upgrade.json").write_text(json.dumps(FIGURES, indent=1) + "\n")


def test_the_current_image_upgrades_the_previous_releases_volume_without_embedding_again(
    images: dict[str, Any], volume: str
) -> None:
    previous, current = images["previous"], images["current"]
    # The previous release indexes the bundled export on the volume, in its layout: a file per (day, channel).
    started = time.monotonic()
    built = _json_tail(_on_volume(previous, "rag-pipeline", "index", "--source", "slack", "--json"))
    FIGURES["previous_index_seconds"] = round(time.monotonic() - started, 1)
    assert built["embeddings_computed"] > 0 and built["documents"] > 0, built
    daily = _on_volume(previous, "sh", "-c", "ls -d /var/lib/rag/parquet/slack_threads/*/*.parquet | wc -l")
    assert int(daily.strip()) > 0
    before = _results(previous)
    assert all(before), before  # every query finds something, so "the same" compares rankings, not empty lists

    # The current image on the same volume: status names the layout and the pending migration, before any change.
    layout = _status(current)
    assert layout["version"] == 1 and layout["known_from"] == "files", layout
    assert [(m["source"], m["target"]) for m in layout["pending"]] == [(1, LAYOUT_VERSION)], layout
    assert _results(current) == before  # it reads the old layout as it is

    # The first index of the current release runs the migration: files converted, nothing embedded again.
    started = time.monotonic()
    upgraded = _json_tail(_on_volume(current, "rag-pipeline", "index", "--source", "slack", "--json"))
    FIGURES["current_index_seconds"] = round(time.monotonic() - started, 1)
    migration = upgraded["migration"]
    assert migration["files_converted"] > 0 and migration["week_files_written"] > 0, migration
    assert upgraded["embeddings_computed"] == 0, upgraded
    assert (upgraded["documents"], upgraded["points"]) == (built["documents"], built["points"]), (built, upgraded)
    weekly = _on_volume(current, "sh", "-c", "ls /var/lib/rag/parquet/slack_threads/ | grep -c '.parquet$'; "
                        "ls -d /var/lib/rag/parquet/slack_threads/*/*.parquet 2>/dev/null | wc -l")  # fmt: skip
    assert [int(n) > 0 for n in weekly.split()] == [True, False], weekly

    # Searches answer exactly as the previous release did; the volume records its layout and the migration's report.
    assert _results(current) == before
    layout = _status(current)
    assert layout["version"] == LAYOUT_VERSION and layout["known_from"] == "record" and layout["pending"] == []
    (step,) = layout["history"]
    assert (step["from"], step["to"]) == (1, LAYOUT_VERSION)
    assert step["report"]["files_converted"] == migration["files_converted"], step
    FIGURES.update(
        previous_release=PREVIOUS_RELEASE,
        previous_index={k: built[k] for k in ("documents", "points", "embeddings_computed")},
        current_index={k: upgraded[k] for k in ("documents", "points", "embeddings_computed")},
        migration=migration,
        queries=len(QUERIES),
        results_per_query=[len(r) for r in before],
    )
