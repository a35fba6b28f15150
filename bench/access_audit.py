"""The access audit's run time on a real directory and index (issue 47, part 3): a copy of a data folder that
`rag-pipeline index` (or `demo`) wrote, whose directory is re-synced with N accounts changed (Slack users
losing every group, the workspace's among them; Jira accounts likewise where the directory grants any), then
audited as the ``access_audit`` asset and ``rag-pipeline audit`` do (rows read, documents counted per grant in
the index, lines worded). Run from the repository root after `rag-pipeline index` into DATA::

    /usr/bin/time -v .venv/bin/python -m bench.access_audit --data DATA [--changes 1 25 250]

Results: bench/results/access_audit.json (seconds per phase, rows, distinct grants counted).
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench import common
from rag_pipeline.composition import store_location
from rag_pipeline.directory.accounts import DirectorySnapshot
from rag_pipeline.directory.audit import AccessAudit, count_documents
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.index.opening import open_vector_store
from rag_pipeline.settings import Settings


def _changed(store: DirectoryStore, source: str, changes: int, at: float) -> DirectorySnapshot:
    """The source's directory again, with ``changes`` accounts (those holding groups) losing every group."""
    (sync,) = [s for s in store.syncs() if s.source == source]
    accounts = {a.account_id: a for a in store._select("source = ?", (source,))}
    snapshot = DirectorySnapshot(source, sync.scope, at)
    holders = [a for a in accounts.values() if a.groups][:changes]
    for account in accounts.values():
        snapshot.add(dataclasses.replace(account, groups={}) if account in holders else account)
    return snapshot


def main() -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--data", type=Path, required=True, help="a data folder `rag-pipeline index` wrote")
    parser.add_argument("--changes", type=int, nargs="+", default=[1, 25, 250])
    parser.add_argument("--out", type=Path, default=common.RESULTS / "access_audit.json")
    args = parser.parse_args()
    results = []
    for changes in args.changes:
        with tempfile.TemporaryDirectory() as scratch:
            data = Path(scratch) / "data"
            subprocess.run(["cp", "-a", "--sparse=always", str(args.data), str(data)], check=True)
            shutil.rmtree(data / "dagster_home", ignore_errors=True)
            settings = Settings.from_env({"RAG_DATA_DIR": str(data)})
            store = DirectoryStore(settings.paths.directory)
            started = time.perf_counter()
            # The demo's Jira directory (from the dump) holds no groups: only Slack accounts can lose access there.
            for source in ("slack", "jira"):
                store.replace(_changed(store, source, changes, time.time()))
            sync_seconds = time.perf_counter() - started
            started = time.perf_counter()
            rows = store.access_changes()
            index = open_vector_store(store_location(settings))
            opened = time.perf_counter() - started
            try:
                started = time.perf_counter()
                counts = count_documents(index, rows)
                count_seconds = time.perf_counter() - started
            finally:
                index.close()
            store.count_access_documents(counts)
            started = time.perf_counter()
            audit = AccessAudit(tuple(store.access_changes()))
            lines = audit.lines(store)
            word_seconds = time.perf_counter() - started
            results.append(
                {
                    "accounts_changed": audit.accounts_changed,
                    "rows": len(rows),
                    "grants_counted": len({(r.source, r.grant_id) for r in rows}),
                    "documents_lost": audit.documents("lost"),
                    "seconds": {
                        "two_syncs_with_audit_rows": round(sync_seconds, 3),
                        "open_index": round(opened, 3),
                        "count_documents": round(count_seconds, 3),
                        "word_lines": round(word_seconds, 4),
                    },
                    "example": lines[0] if lines else None,
                }
            )
            print(results[-1])
    common.write_json(args.out, {"run": common.run_record(argv=None), "data": str(args.data), "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
