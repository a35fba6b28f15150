"""The ``rag-pipeline`` command: one subcommand per module under ``rag_pipeline/commands``."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from rag_pipeline.commands import bench, demo, search, sync
from rag_pipeline.settings import Settings, SettingsError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag-pipeline",
        description="Slack and Jira into a permission-aware hybrid Qdrant index, with Dagster.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (demo, search, bench, sync):
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "source", None) is None:
        args.source = ["slack", "jira"]
    try:
        # The one read of the environment; every command gets its configuration from here.
        settings = Settings.from_env().with_data_dir(getattr(args, "data_dir", None))
    except SettingsError as exc:
        Console(stderr=True).print(f"error: {exc}", style="red", highlight=False)
        return 2
    return int(args.func(args, settings))


if __name__ == "__main__":
    sys.exit(main())
