"""What the bundled (or configured) offline sources become before any embedding: documents, parent and child
chunks per source, reader problems, and a digest of every document's text, so a change to the readers or the
chunker can be checked against an earlier commit without a 25-minute demo run.

    .venv/bin/python -m bench.corpus_counts [--digests /tmp/digests.json] [--compare OTHER_DIGESTS.json]

The counts go to ``bench/results/corpus_counts.json``; ``--digests`` writes every document's text digest and
title (about 1 MB) and ``--compare`` prints which documents' texts or titles differ from another run's digests.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any

from bench import common
from rag_pipeline.defs.chain.resources import ChunkingResource
from rag_pipeline.defs.parts import source_specs
from rag_pipeline.settings import Settings
from rag_pipeline.stages import chunk_documents, documents_frame
from rag_pipeline.vectors.dense.load import load_dense_encoder


def corpus_counts(settings: Settings) -> dict[str, Any]:
    chunker = ChunkingResource().chunker(load_dense_encoder(settings.dense_model))
    report: dict[str, Any] = {"sources": {}, "documents": {}}
    for name, spec in source_specs(settings).items():
        read = spec.offline_resource.read()
        parents, children = chunk_documents(documents_frame(read.documents), chunker)
        report["sources"][name] = {
            "documents": len(read.documents),
            "parent_chunks": len(parents),
            "child_chunks": len(children),
            "problems": len(read.problems),
        }
        for doc in read.documents:
            report["documents"][doc.id] = {
                "text_sha256": hashlib.sha256(doc.text.encode()).hexdigest(),
                "title": doc.title,
            }
    totals = report["sources"].values()
    report["totals"] = {k: sum(s[k] for s in totals) for k in ("documents", "parent_chunks", "child_chunks")}
    return report


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--out", type=Path, default=common.RESULTS / "corpus_counts.json")
    parser.add_argument("--digests", type=Path, help="write every document's text digest and title here")
    parser.add_argument("--compare", type=Path, help="another run's --digests file to compare texts and titles with")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    report = corpus_counts(Settings.from_env())
    counts = {"sources": report["sources"], "totals": report["totals"]}
    common.write_json(args.out, {**counts, "run": common.run_record()}, sort_keys=True)
    if args.digests:
        common.write_json(args.digests, report["documents"], indent=None, sort_keys=True)
    print(json.dumps(counts, indent=2))
    if args.compare:
        other = json.loads(args.compare.read_text())
        mine = report["documents"]
        texts = sorted(k for k in mine.keys() & other.keys() if mine[k]["text_sha256"] != other[k]["text_sha256"])
        titles = sum(1 for k in mine.keys() & other.keys() if mine[k]["title"] != other[k]["title"])
        print(
            f"only here: {len(mine.keys() - other.keys())}, only there: {len(other.keys() - mine.keys())}, "
            f"texts differ: {len(texts)} {texts[:5]}, titles differ: {titles}"
        )


if __name__ == "__main__":
    main()
