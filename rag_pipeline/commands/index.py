"""``rag-pipeline index``: a team's own offline data (Slack export, Jira dump or CSV export, or any registered
source's files) through every partitioned asset.

Each source is indexed under its own identity (workspace or site), taken from the data where it holds one and
from the source's options (``--slack-team``, ``--jira-site``...) otherwise; the data folder remembers it and
refuses another. The options come from the registered sources (:mod:`rag_pipeline.sources.registry`). Without a
path, the bundled data is indexed (``demo`` is this plus the evaluation).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from rag_pipeline.commands.arguments import add_data_dir, existing_input, non_negative_int, writable_folder
from rag_pipeline.commands.errors import FAILURE, CommandError
from rag_pipeline.commands.progress import BatchClock
from rag_pipeline.commands.tables import first_fitting, key_value_blocks
from rag_pipeline.composition import dense_encoder_of
from rag_pipeline.machine import describe_machine
from rag_pipeline.runs.backfill import NothingRead, run_backfill
from rag_pipeline.runs.skipped import Skipped, print_skipped, report_path
from rag_pipeline.settings import Settings
from rag_pipeline.sources.problems import RecordProblem, SourceError
from rag_pipeline.sources.registry import IndexOption, Source, registered_sources, source_names
from rag_pipeline.text.language import LANGUAGE_SETTINGS, LanguageChoice
from rag_pipeline.vectors.progress import PROGRESS_FIELD, PROGRESS_LOGGER, ProgressUpdate
from rag_pipeline.vectors.sparse import cjk_tokenizer_advice


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``index`` and ``demo`` share."""
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_data_dir(parser)
    parser.add_argument("--source", action="append", choices=source_names(), help="only this source (repeatable)")
    parser.add_argument("--full-refresh", action="store_true", help="re-materialize stretches already indexed")
    parser.add_argument(
        "--bridge-days",
        type=non_negative_int,
        default=None,
        help=argparse.SUPPRESS,  # kept so old scripts still parse: one run per source needs no bridging
    )
    parser.add_argument(
        "--language",
        choices=LANGUAGE_SETTINGS,
        default=None,
        help="what the index is built for: english (all-MiniLM-L6-v2, word BM25), cjk (Japanese, Chinese: "
        "multilingual-e5-small, cjk-bigram BM25), korean (multilingual-e5-small, BM25 on bigrams and Korean stems) "
        "or auto, which a data folder's first index chooses from a sample "
        "of its documents and later runs keep (default: $RAG_LANGUAGE or auto; RAG_DENSE_MODEL and "
        "RAG_BM25_TOKENIZER still win)",
    )


def language_settings(args: argparse.Namespace, settings: Settings) -> Settings:
    """The settings with ``--language`` and the data folder's recorded choice applied (again after an index,
    which may have just recorded one)."""
    if getattr(args, "language", None):
        settings = settings.with_language(args.language)
    return settings.with_language_applied()


def add_parser(sub: argparse._SubParsersAction) -> None:
    sources = registered_sources().values()
    index = sub.add_parser(
        "index",
        help="index your own offline data: "
        + ", ".join(f"{s.title} ({', '.join(o.flag for o in s.index_options if o.chooses_source)})" for s in sources)
        + " (default: the bundled data)",
        description="Registers the data's containers (channels, projects) as partitions and materializes every "
        "week of its history, in runs over consecutive weeks of at most RAG_BACKFILL_BATCH_DOCUMENTS documents (so "
        "memory follows a batch, not the history; an interrupted index resumes at the first unfinished batch). "
        "Each source is indexed under its own "
        "identity (workspace or site): from the data where it names one (Slack: team ids on users and messages, the "
        "workspace host in permalinks; Jira dump: the issues' self URLs), else from the source's options "
        "(--slack-team/--slack-domain/--jira-site); one data folder holds one identity per source. Re-running skips "
        "stretches already indexed.",
        epilog="examples:\n" + "".join(f"  {example}\n" for s in sources for example in s.index_examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_source_options(index, lambda option: True)
    add_common_arguments(index)
    index.set_defaults(func=run)


def add_source_options(parser: argparse.ArgumentParser, wanted: Callable[[IndexOption], bool]) -> None:
    """Each registered source's ``wanted`` options, in a group per source (``--help`` lists them by source)."""
    for source in registered_sources().values():
        options = [o for o in source.index_options if wanted(o)]
        if not options:
            continue
        group = parser.add_argument_group(f"{source.title} ({source.name})")
        for option in options:
            kind = {"path": {"type": Path}, "paths": {"type": Path, "action": "append"}, "text": {}}[option.kind]
            metavar = "VALUE" if option.kind == "text" else "PATH"
            group.add_argument(option.flag, dest=_dest(source, option), metavar=metavar, help=option.help, **kind)  # type: ignore[arg-type]


def _dest(source: Source, option: IndexOption) -> str:
    """Where argparse keeps a source option: ``<source>__<field>``, never clashing with another source's."""
    return f"{source.name}__{option.field}"


def check_paths(settings: Settings, sources: list[str], options: bool = True) -> None:
    """Every path the command reads or writes, checked before the first run so that a wrong one stops with a
    line naming it and what gave it (``options``: the command takes the paths as options too)."""
    writable_folder(settings.data_dir, "data folder", "--data-dir / RAG_DATA_DIR")
    if settings.dagster_home is not None:
        writable_folder(settings.dagster_home, "Dagster instance folder", "DAGSTER_HOME")
    for source in sources:
        for needed in settings.source(source).inputs():
            existing_input(needed.path, needed.what, needed.source_of(options))


def given_options(args: argparse.Namespace, source: Source) -> dict[str, Any]:
    """The source's options given on the command line, by settings field (paths resolved)."""
    given: dict[str, Any] = {}
    for option in source.index_options:
        value = getattr(args, _dest(source, option), None)
        if value is None or value == []:
            continue
        if option.kind == "path":
            value = value.resolve()
        elif option.kind == "paths":
            value = tuple(p.resolve() for p in value)
        given[option.field] = value
    return given


def settings_from_arguments(args: argparse.Namespace, settings: Settings) -> Settings:
    """The settings with the sources and identities given on the command line."""
    for source in registered_sources().values():
        given = given_options(args, source)
        if given:
            settings = settings.with_source(source.name, **given)
    return settings


def chosen_sources(args: argparse.Namespace) -> list[str]:
    """--source where it narrows (the default is every source), else the sources given a data path, else all."""
    everything = list(source_names())
    if sorted(args.source) != sorted(everything):
        return list(args.source)
    given = [s.name for s in registered_sources().values() if _data_paths_given(args, s)]
    return given or list(args.source)


def _data_paths_given(args: argparse.Namespace, source: Source) -> list[str]:
    """The flags of ``source``'s data paths given on the command line (each narrows ``index`` to it)."""
    return [o.flag for o in source.index_options if o.chooses_source and getattr(args, _dest(source, o), None)]


def run(args: argparse.Namespace, settings: Settings) -> int:
    for source in registered_sources().values():
        paths = _data_paths_given(args, source)
        if len(paths) > 1:
            raise CommandError(f"give {' or '.join(paths)}, not both (one {source.title} source per data folder)")
    settings = settings_from_arguments(args, settings)
    args.source = chosen_sources(args)
    console = Console(stderr=True)
    check_paths(settings, args.source)
    result = index_sources(args, settings, console, title="rag-pipeline index")
    settings = language_settings(args, settings)
    for source, figures in result["per_source"].items():
        cjk, chunks = figures["cjk_child_chunks"], figures["child_chunks"]
        advice = cjk_tokenizer_advice(settings.bm25_tokenizer, cjk, chunks, source)
        if advice:
            print(f"warning: {advice}", file=sys.stderr)  # never wrapped: a log line to grep
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_summary(result, "rag-pipeline index")
    # With --json too: stdout stays one JSON document, and a person reading stderr still sees what was dropped.
    print_skipped(result["skipped"], sys.stderr)
    return 0


def index_sources(
    args: argparse.Namespace, settings: Settings, console: Console, title: str, command: str = "index"
) -> dict[str, Any]:
    """The backfill with a progress bar per source (a line per update where stderr is not a terminal), and
    its ``skipped`` records written to the data folder (:mod:`rag_pipeline.runs.skipped`). A source of which
    nothing could be read is an error naming it (exit 1), its skipped records written and named all the same."""
    settings = language_settings(args, settings)
    refuse_other_chunk_sizes(settings)
    try:
        result, problems = _backfill(args, settings, console)
    except NothingRead as exc:
        skipped = Skipped()
        skipped.add(exc.source, exc.problems)
        report = skipped.write(report_path(settings, command))
        # Each record named (the first ones, as after a run), not only counted: every one may be the same mistake
        # (ids that lead outside a folder, say), or each a different one. The error line stays the last line.
        print_skipped(skipped.summary(report), sys.stderr, ran=False)
        raise CommandError(f"{exc}; full list: {report}", FAILURE) from exc
    pushed = _replay_pushed(language_settings(args, settings))
    if pushed:
        result["pushed"] = pushed
    skipped = Skipped()
    for source, found in problems.items():
        skipped.add(source, found)
    result["directory"] = _refresh_directory(settings, list(args.source), skipped)
    result["skipped"] = skipped.summary(skipped.write(report_path(settings, command)))
    result["machine"] = _machine(language_settings(args, settings))
    return result


def _replay_pushed(settings: Settings) -> dict[str, Any]:
    """The pushed sources' raw records written back into the index (``rag-pipeline push --replay``): an index rebuilt
    from raw data (the index folder removed, then ``--full-refresh``) gets its pushed documents back; on an index
    that holds them this reads their versions and writes nothing. A line per source on stderr."""
    from rag_pipeline.commands.push import replay_line
    from rag_pipeline.composition import IndexMissing
    from rag_pipeline.runs.push import replay_pushed

    try:
        reports = replay_pushed(settings)
    except IndexMissing as exc:
        print(f"warning: pushed sources not replayed: {exc}", file=sys.stderr)
        return {}
    for report in reports:
        print(replay_line(report.as_dict()), file=sys.stderr)  # never wrapped: a log line to grep
    return {report.source: report.as_dict() for report in reports}


def refuse_other_chunk_sizes(settings: Settings) -> None:
    """Before any run: an embedded index written with other chunk sizes refuses this configuration now, before
    the chunk steps rewrite the partition files with the new sizes (the points step would refuse them anyway, too
    late for those files). Read from the index's record file, without opening the index (one process at a time).
    A Qdrant server's record is checked by the points step."""
    from rag_pipeline.index.edge_store import EdgeVectorStore
    from rag_pipeline.index.index_info import IndexModelMismatch, check_chunking, chunking_in
    from rag_pipeline.index.store import CollectionNames

    if settings.qdrant.url is not None:
        return
    record = EdgeVectorStore.info_file(
        settings.paths.qdrant, CollectionNames.with_prefix(settings.qdrant.collection_prefix)
    )
    try:
        info = json.loads(record.read_text()) if record.is_file() else {}
        check_chunking(chunking_in(info), settings.chunking.signature())
    except IndexModelMismatch as exc:
        raise CommandError(str(exc)) from None
    except (OSError, ValueError):
        return  # an unreadable record: the points step decides


def _machine(settings: Settings) -> dict[str, Any]:
    """Where these seconds were measured: CPU, instruction sets, cores, dense encoder backend and precision (the
    encoder is already loaded in this process when anything was embedded; otherwise loading it takes ~2 s)."""
    from rag_pipeline.machine import machine

    try:
        encoder = dense_encoder_of(settings)
    except Exception as exc:  # a model that cannot load was reported by the run that needed it
        return machine() | {"dense_encoder": f"{settings.dense_model} (not loaded: {type(exc).__name__})"}
    return machine(encoder)


def _refresh_directory(settings: Settings, sources: list[str], skipped: Skipped) -> dict[str, Any]:
    """The principal directory of the sources just indexed, so a person can be looked up right away. The index
    is written either way: a directory that cannot be refreshed is a warning naming why."""
    from rag_pipeline.runs.directory import refresh_directories

    try:
        done = refresh_directories(settings, sources, live=False)
    except SourceError as exc:
        print(f"warning: the principal directory was not refreshed: {exc}", file=sys.stderr)
        return {"error": str(exc)}
    out: dict[str, Any] = {}
    for sync in done:
        print(sync.summary(), file=sys.stderr)  # never wrapped: a log line to grep
        # Under the source's own name: a manifest entry both the reader and the directory turned away is one record.
        skipped.add(sync.source, sync.problems)
        out[sync.source] = sync.as_metadata()
    return out


def _backfill(
    args: argparse.Namespace, settings: Settings, console: Console
) -> tuple[dict[str, Any], dict[str, list[RecordProblem]]]:
    """``run_backfill`` under the progress display: its summary and, per source, the problems of its read."""
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=args.json or not console.is_terminal,
    ) as progress:
        tasks: dict[str, TaskID] = {}
        clocks: dict[str, BatchClock] = {}

        def on_progress(source: str, done: int, total: int) -> None:
            # Batches of weeks (runs/backfill.py): the first call counts those already done (a resumed index), so
            # the ETA follows only the batches this command runs.
            if source not in tasks:
                tasks[source] = progress.add_task(source, total=total, completed=done, unit="batches")
                clocks[source] = BatchClock(done)
            progress.update(tasks[source], completed=done)
            if not console.is_terminal and not args.json:
                console.print(f"{source}: {done}/{total} batches{clocks[source].eta(done, total)}", highlight=False)

        def on_step_progress(update: ProgressUpdate) -> None:
            # The run's own step reports (every tenth or 30 s): a bar on a terminal, the line in a log.
            if console.is_terminal:
                key = f"step:{update.what}"
                if key not in tasks:
                    tasks[key] = progress.add_task(update.what, total=update.total, unit="")
                progress.update(tasks[key], completed=update.done, total=update.total, unit=update.speed())
            elif not args.json:
                console.print(update.line(), highlight=False)

        with step_progress(on_step_progress):
            summary = run_backfill(
                settings,
                full_refresh=args.full_refresh,
                sources=tuple(args.source),
                on_progress=on_progress,
            )
    return summary.as_dict(), summary.problems


@contextmanager
def step_progress(callback: Callable[[ProgressUpdate], None]) -> Iterator[None]:
    """Pass the progress that in-process steps publish (``rag_pipeline.progress``) to ``callback``."""

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            update = getattr(record, PROGRESS_FIELD, None)
            if isinstance(update, ProgressUpdate):
                callback(update)

    handler = _Handler(level=logging.INFO)
    previous = PROGRESS_LOGGER.level
    PROGRESS_LOGGER.addHandler(handler)
    PROGRESS_LOGGER.setLevel(logging.INFO)
    try:
        yield
    finally:
        PROGRESS_LOGGER.removeHandler(handler)
        PROGRESS_LOGGER.setLevel(previous)


# The summary: (title, key in the per-source figures).
_COLUMNS = (
    ("documents", "documents"),
    ("parent chunks", "parent_chunks"),
    ("child chunks", "child_chunks"),
    ("points", "points"),
    ("embeddings computed", "embeddings_computed"),
    ("embeddings cached", "embeddings_cached"),
    ("runs", "runs"),
    ("runs skipped (unchanged)", "runs_skipped"),
)


def describe_identity(source: str, identity: dict[str, str | None]) -> str:
    found = registered_sources().get(source)
    return found.identity_line(identity) if found is not None else str(identity)


def describe_language(figures: dict[str, Any]) -> str:
    """The summary's language line, from the JSON summary's ``language``."""
    choice = LanguageChoice(**{k: v for k, v in figures.items() if k != "chosen_by_this_run"})
    return choice.describe() + (" — chosen by this run" if figures.get("chosen_by_this_run") else "")


def print_summary(result: dict[str, Any], title: str, console: Console | None = None) -> None:
    """Tables on a terminal, in the layout its width allows (:func:`summary_layouts`); ``key: value`` lines
    otherwise, which an 80-column log never cuts."""
    console = console or Console()
    for source, identity in result.get("identities", {}).items():
        print(f"{source}: {describe_identity(source, identity)}")  # never wrapped: a log line to grep
    if result.get("language"):
        print(f"language: {describe_language(result['language'])}")
    if "machine" in result:
        print(f"machine: {describe_machine(result['machine'])}")
    if not console.is_terminal:
        print(f"{title} ({result['seconds']} s)")
        for name, figures in result["per_source"].items():
            print(f"{name}:")
            for label, key in _COLUMNS:
                print(f"  {label}: {figures[key]}")
            per_stage = ", ".join(f"{stage} {seconds}" for stage, seconds in figures["stage_seconds"].items())
            print(f"  seconds per stage: {per_stage or '-'}")
        return
    figures, stages = summary_layouts(result, title)
    console.print(first_fitting(console, figures))
    console.print(first_fitting(console, stages))


def summary_layouts(result: dict[str, Any], title: str) -> tuple[list[RenderableType], list[RenderableType]]:
    """The summary's two tables, each as its layouts widest first: the figures one row per source (wide
    terminals), one row per figure with a column per source (80 columns), or a block per source; the seconds
    per stage, one row per stage, or a block per source."""
    heading = f"{title} ({result['seconds']} s)"
    per_source: dict[str, dict[str, Any]] = result["per_source"]
    wide = Table(title=heading)
    wide.add_column("source")
    for label, _ in _COLUMNS:
        wide.add_column(label, justify="right")
    for name, figures in per_source.items():
        wide.add_row(name, *(str(figures[key]) for _, key in _COLUMNS))
    tall = Table(title=heading)
    tall.add_column("")
    for name in per_source:
        tall.add_column(name, justify="right", no_wrap=True)
    for label, key in _COLUMNS:
        tall.add_row(label, *(str(figures[key]) for figures in per_source.values()))
    blocks = key_value_blocks(
        {name: [(label, str(figures[key])) for label, key in _COLUMNS] for name, figures in per_source.items()},
        heading,
    )
    stages = Table(title="seconds per stage")
    stages.add_column("stage")
    for name in per_source:
        stages.add_column(name, justify="right", no_wrap=True)
    sources = list(per_source.values())
    for stage in sources[0]["stage_seconds"] if sources else []:
        stages.add_row(stage, *(str(s["stage_seconds"].get(stage, 0.0)) for s in sources))
    stage_blocks = key_value_blocks(
        {
            name: [(stage, str(seconds)) for stage, seconds in figures["stage_seconds"].items()]
            for name, figures in per_source.items()
        },
        "seconds per stage",
    )
    return [wide, tall, blocks], [stages, stage_blocks]
