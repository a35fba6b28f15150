"""Build chat-shaped known-item eval sets from licensed dialogue data, through the real Slack ingest path.

Each dialogue becomes one Slack thread of a workspace export (``export.zip``, the layout Slack's export tool
writes): the opening turn is the thread's root and is *deleted* (Slack's ``"subtype": "tombstone"``, as in the
bundled #ubuntu export), the later turns are its replies. The opening turn is the query and the thread is the
one relevant document, so a search must find the conversation from its answer and follow-up questions — the
way a colleague's question finds an old thread whose opening message says it differently.

    git clone https://github.com/NLPlab-skku/HG-TODS /tmp/HG-TODS
    git -C /tmp/HG-TODS checkout 7c8cea000b82b3da6beef3b1facecf217a72745e
    mkdir /tmp/ko_manual_dialogues
    cp /tmp/HG-TODS/DialogueDataset/Manual_grounded_dialogue_dataset/manual2dial_dial_test.json \
        /tmp/ko_manual_dialogues/
    cp /tmp/HG-TODS/LICENSE /tmp/ko_manual_dialogues/LICENSE-MIT.txt
    .venv/bin/python -m tools.build_dialogue_eval_sets ko-helpdesk /tmp/ko_manual_dialogues eval_sets

(``manual2dial_dial_test.json`` is the HG-TODS test split, sha256 8858f7b8…fa26; for zh-kdconv the folder is the
``data/`` folder of a github.com/thu-coai/KdConv checkout with the repository's ``LICENSE`` copied into it)
writes ``eval_sets/ko_helpdesk/`` with ``export.zip``, ``ko_helpdesk.jsonl`` (+ ``.meta.json``), ``README.md``
(source, licence, attribution, counts) and the source's licence file. The eval set sits in its own folder, not
at the top of ``eval_sets/``, because the top-level sets are the bundled index's and the Dagster evaluation
scores every ``*.jsonl`` of its folder; run it with ``RAG_EVAL_DIR=eval_sets/ko_helpdesk`` (docs/notes/korean.md).

Conversion rules, the same for every source: whitespace is collapsed; a dialogue needs an opening question of at
least 4 characters and at least 2 later turns; two dialogues with the same opening question (normalized) are both
dropped, since the question could not tell them apart. Speakers become synthetic users (an asker per dialogue from
a pool, one help-desk account), timestamps are synthetic (dialogues ``SPACING`` apart, turns a minute apart), so
nothing in the thread but its text leads to it.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import shutil
import sys
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rag_pipeline.connectors.slack.threads import thread_document_id
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, write_eval_set

START = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
SPACING = timedelta(hours=3)
TURN_GAP = timedelta(minutes=1)
ASKERS = 40
MIN_QUESTION_CHARS = 4
MIN_LATER_TURNS = 2


@dataclass(frozen=True)
class Dialogue:
    """One conversation: where it is posted and its turns as (speaker role, text), the opening one first."""

    id: str
    channel: str  # a key of the source's ``channels``
    turns: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class DialogueSource:
    """A licensed dialogue dataset and how to read it."""

    name: str  # the eval set's name and folder
    team: str  # the synthetic workspace id the documents are keyed by
    channels: dict[str, tuple[str, str]]  # key -> (channel id, channel name)
    helper_name: str  # the display name of whoever answers (role "system")
    asker_name: str  # a prefix for the askers' display names
    description: str
    license: str
    attribution: str
    licence_file: str
    read: Callable[[Path], list[Dialogue]]
    readme_source: str  # where the data comes from, for README.md


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def read_hg_tods(folder: Path) -> list[Dialogue]:
    """HG-TODS manual-grounded dialogues (``manual2dial_dial_test.json``): Samsung and iPhone help desks."""
    data = json.loads((folder / "manual2dial_dial_test.json").read_text(encoding="utf-8"))
    dialogues = []
    for domain, items in data["dial_data"].items():
        for item in items:
            turns = tuple(
                (t["role"], _clean(t["utterance"])) for t in sorted(item["turns"], key=lambda t: t["turn_id"])
            )
            dialogues.append(Dialogue(item["dial_id"], domain, turns))
    return dialogues


def read_kdconv(folder: Path) -> list[Dialogue]:
    """KdConv (``data/<domain>/{dev,test}.json`` of github.com/thu-coai/KdConv): two speakers alternate, the
    first asks about a film, a singer or a place."""
    dialogues = []
    for path in sorted(folder.glob("*/*.json")):
        domain, split = path.parent.name, path.stem
        for number, item in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            roles = ("user", "system")
            turns = tuple((roles[i % 2], _clean(m["message"])) for i, m in enumerate(item["messages"]))
            dialogues.append(Dialogue(f"{domain}-{split}-{number:04d}", domain, turns))
    return dialogues


SOURCES: dict[str, DialogueSource] = {
    "ko-helpdesk": DialogueSource(
        name="ko_helpdesk",
        team="T0KOHELPDK",
        channels={"samsung": ("C0KOGALAXY", "갤럭시-문의"), "iphone": ("C0KOIPHONE", "아이폰-문의")},
        helper_name="헬프데스크",
        asker_name="사용자",
        description="Korean help-desk threads (HG-TODS manual-grounded dialogues, test split): the opening question "
        "is the query, the thread it opened (root deleted) is the one relevant document.",
        license="MIT",
        attribution="Contains dialogues from the HG-TODS manual-grounded dialogue dataset, Copyright (c) 2024 "
        "NLPlab-skku (github.com/NLPlab-skku/HG-TODS), MIT License",
        licence_file="LICENSE-MIT.txt",
        read=read_hg_tods,
        readme_source="github.com/NLPlab-skku/HG-TODS at 7c8cea000b82b3da6beef3b1facecf217a72745e, "
        "`DialogueDataset/Manual_grounded_dialogue_dataset/manual2dial_dial_test.json` (the test split, byte for byte "
        "as published: sha256 8858f7b8…fa26)",
    ),
    # Not committed (the data comes from a repository snapshot, which this project may not redistribute): build
    # it from a checkout's data/ folder, e.g. into /tmp, and score it from there.
    "zh-kdconv": DialogueSource(
        name="zh_kdconv",
        team="T0ZHKDCONV",
        channels={"film": ("C0ZHFILM00", "电影"), "music": ("C0ZHMUSIC0", "音乐"), "travel": ("C0ZHTRAVEL", "旅游")},
        helper_name="知识助手",
        asker_name="用户",
        description="Chinese knowledge-grounded chats (KdConv dev and test splits): the opening question is the "
        "query, the thread it opened (root deleted) is the one relevant document.",
        license="Apache-2.0",
        attribution="KdConv (Zhou et al., ACL 2020), github.com/thu-coai/KdConv, Apache License 2.0",
        licence_file="LICENSE",
        read=read_kdconv,
        readme_source="github.com/thu-coai/KdConv at 653db76432de09a004ba708a68f8bbd5500e6bec, "
        "`data/{film,music,travel}/{dev,test}.json` (the train files are not used)",
    ),
}


def usable(dialogues: Iterable[Dialogue]) -> tuple[list[Dialogue], Counter[str]]:
    """The dialogues kept by the conversion rules, and why the others were dropped."""
    dropped: Counter[str] = Counter()
    candidates = []
    for dialogue in dialogues:
        turns = tuple((role, text) for role, text in dialogue.turns if text)
        if len(turns) < 1 + MIN_LATER_TURNS:
            dropped["fewer than 3 turns"] += 1
        elif len(turns[0][1]) < MIN_QUESTION_CHARS:
            dropped["opening question too short"] += 1
        else:
            candidates.append(Dialogue(dialogue.id, dialogue.channel, turns))
    openings = Counter(_normal(d.turns[0][1]) for d in candidates)
    kept = []
    for dialogue in candidates:
        if openings[_normal(dialogue.turns[0][1])] > 1:
            dropped["opening question shared with another dialogue"] += 1
        else:
            kept.append(dialogue)
    return kept, dropped


def _normal(text: str) -> str:
    return re.sub(r"[\W_]+", "", text).lower()


def _ts(moment: datetime, sequence: int) -> str:
    # Unique per message even when two share a second: the microseconds carry a sequence number.
    return f"{int(moment.timestamp())}.{sequence % 1_000_000:06d}"


def export_messages(
    source: DialogueSource, dialogues: Sequence[Dialogue]
) -> tuple[dict[str, dict[str, list[Any]]], list[EvalQuery]]:
    """Messages per channel folder and day file, and one known-item query per dialogue."""
    days: dict[str, dict[str, list[Any]]] = {}
    queries = []
    sequence = 0
    for index, dialogue in enumerate(dialogues):
        channel_id, channel_name = source.channels[dialogue.channel]
        asker = f"U0KA{index % ASKERS:04d}"
        opened = START + index * SPACING
        root_ts = _ts(opened, sequence := sequence + 1)
        replies = []
        for turn, (role, text) in enumerate(dialogue.turns[1:], start=1):
            user = "U0KAHELPER" if role == "system" else asker
            replies.append(
                {
                    "type": "message",
                    "user": user,
                    "text": text,
                    "ts": _ts(opened + turn * TURN_GAP, sequence := sequence + 1),
                    "thread_ts": root_ts,
                    "parent_user_id": asker,
                }
            )
        root = {
            "type": "message",
            "subtype": "tombstone",
            "user": "USLACKBOT",
            "text": "This message was deleted.",
            "hidden": True,
            "ts": root_ts,
            "thread_ts": root_ts,
            "reply_count": len(replies),
            "reply_users": sorted({r["user"] for r in replies}),
            "reply_users_count": len({r["user"] for r in replies}),
            "latest_reply": replies[-1]["ts"],
            "replies": [{"user": r["user"], "ts": r["ts"]} for r in replies],
        }
        for message in (root, *replies):
            day = datetime.fromtimestamp(float(message["ts"]), UTC).date().isoformat()
            days.setdefault(channel_name, {}).setdefault(day, []).append(message)
        queries.append(
            EvalQuery(
                id=dialogue.id,
                query=dialogue.turns[0][1],
                relevant={thread_document_id(source.team, channel_id, root_ts): 1},
                tags=["slack", dialogue.channel],
            )
        )
    return days, queries


def write_export(source: DialogueSource, days: dict[str, dict[str, list[Any]]], askers: int, path: Path) -> None:
    """The export as a zip with fixed entry times, so rebuilding it gives the same bytes."""
    channels = [
        {
            "id": channel_id,
            "name": name,
            "created": int(START.timestamp()),
            "is_archived": False,
            "purpose": {"value": f"{source.name}: converted dialogues (README.md)"},
            "members": [f"U0KA{i:04d}" for i in range(askers)] + ["U0KAHELPER"],
        }
        for channel_id, name in source.channels.values()
        if name in days
    ]
    users = [
        {"id": f"U0KA{i:04d}", "name": f"asker{i:02d}", "real_name": f"{source.asker_name}{i:02d}", "deleted": False}
        for i in range(askers)
    ] + [{"id": "U0KAHELPER", "name": "helpdesk", "real_name": source.helper_name, "deleted": False, "is_bot": False}]
    entries = {"channels.json": channels, "users.json": users}
    for channel_name, by_day in days.items():
        for day, messages in by_day.items():
            entries[f"{channel_name}/{day}.json"] = messages
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, json.dumps(entries[name], ensure_ascii=False, indent=1) + "\n")
    path.write_bytes(buffer.getvalue())


def build(source_name: str, data: Path, out: Path) -> Path:
    """Convert ``data`` (the source's files) into ``out/<name>/``; returns that folder."""
    source = SOURCES[source_name]
    dialogues, dropped = usable(source.read(data))
    folder = out / source.name
    folder.mkdir(parents=True, exist_ok=True)
    days, queries = export_messages(source, dialogues)
    write_export(source, days, min(ASKERS, len(dialogues)), folder / "export.zip")
    shutil.copyfile(data / source.licence_file, folder / source.licence_file)
    meta = EvalSetMeta(
        name=source.name,
        description=source.description,
        source=f"{source.readme_source}; converted by tools/build_dialogue_eval_sets.py",
        license=source.license,
        attribution=source.attribution,
        queries=len(queries),
        sources=["slack"],
        tags=["chat", "known-item"],
    )
    write_eval_set(folder, meta, queries)
    turns = [len(d.turns) for d in dialogues]
    later = sorted(len(text) for d in dialogues for _, text in d.turns[1:])
    digest = hashlib.sha256((folder / "export.zip").read_bytes()).hexdigest()
    (folder / "README.md").write_text(
        _readme(source, len(dialogues), dropped, turns, later, digest),
        encoding="utf-8",
    )
    return folder


def _readme(
    source: DialogueSource, kept: int, dropped: Counter[str], turns: list[int], later: list[int], digest: str
) -> str:
    drops = "; ".join(f"{n} {why}" for why, n in sorted(dropped.items())) or "none"
    median_turns = sorted(turns)[len(turns) // 2]
    median_chars = later[len(later) // 2]
    return f"""# {source.name}

{source.description}

Built by `tools/build_dialogue_eval_sets.py` (its docstring has the conversion rules); do not edit by hand.

| file | what |
|---|---|
| `export.zip` | a Slack workspace export (sha256 `{digest[:16]}…`): {kept} threads in \
{len(source.channels)} channels, each a dialogue whose opening turn is deleted (a tombstone) |
| `{source.name}.jsonl`, `{source.name}.meta.json` | {kept} known-item queries: the opening turn → its thread |
| `{source.licence_file}` | the source's licence, verbatim |

- Source: {source.readme_source}.
- Licence: {source.license}. Attribution: "{source.attribution}".
- Dialogues kept: {kept} (dropped: {drops}); turns per dialogue median {median_turns} \
(min {min(turns)}, max {max(turns)}); later turns median {median_chars} characters.
- Workspace id `{source.team}` (index with `--slack-team {source.team}`); askers and the help desk are synthetic
  users; timestamps are synthetic, {SPACING.total_seconds() / 3600:g} hours apart from {START.date().isoformat()}.

Index and score it (docs/notes/korean.md):

    .venv/bin/rag-pipeline index --data-dir /tmp/{source.name} --slack-export eval_sets/{source.name}/export.zip \\
        --slack-team {source.team} --source slack
    .venv/bin/rag-pipeline bench --data-dir /tmp/{source.name} --eval-set eval_sets/{source.name}/{source.name}.jsonl
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", choices=sorted(SOURCES), help="which dataset the folder holds")
    parser.add_argument(
        "data",
        type=Path,
        help="the dataset's folder: for ko-helpdesk, manual2dial_dial_test.json and LICENSE-MIT.txt from "
        "github.com/NLPlab-skku/HG-TODS; for zh-kdconv, a KdConv checkout's data/ folder with its LICENSE "
        "(the commands above)",
    )
    parser.add_argument("out", type=Path, help="the eval_sets folder")
    args = parser.parse_args(argv)
    folder = build(args.source, args.data, args.out)
    print(f"wrote {folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
