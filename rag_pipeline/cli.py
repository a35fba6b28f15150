"""The ``rag-pipeline`` command: one subcommand per module under ``rag_pipeline/commands``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings

import dagster as dg

from rag_pipeline.commands import (
    ask,
    audit,
    backup,
    bench,
    demo,
    directory,
    evaluate,
    index,
    mcp,
    metrics,
    pause,
    prune,
    push,
    restore,
    search,
    serve,
    status,
    sync,
    token,
    tools,
    tree,
    whois,
    worker,
)
from rag_pipeline.commands import explain as explain_command
from rag_pipeline.commands.arguments import OneLineParser, data_folder_given_by, existing_data_folder
from rag_pipeline.commands.errors import DEBUG_HINT, INTERRUPTED, USAGE, explain, one_line, print_error, print_traceback
from rag_pipeline.settings import Settings, load_env_file
from rag_pipeline.sources.registry import source_names

EPILOG = """\
exit status:
  0  success
  1  runtime failure: a run or step failed, a service could not be reached, an unexpected error
  2  usage or configuration error: an option, an environment variable, a path you gave,
     an index built with another dense model

An error prints one line, `error: <message>`, on stderr; --debug adds the traceback and shows
library warnings. --debug is accepted before or after the subcommand."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="rag-pipeline",
        description="Slack and Jira into a permission-aware hybrid Qdrant index, with Dagster.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="print tracebacks and library warnings")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (
        index,
        demo,
        evaluate,
        search,
        tree,
        tools,
        ask,
        whois,
        explain_command,
        audit,
        directory,
        serve,
        token,
        mcp,
        bench,
        sync,
        pause,
        status,
        prune,
        backup,
        restore,
        metrics,
        push,
        worker,
    ):
        command.add_parser(sub)
    for command_parser in sub.choices.values():
        # Also after the subcommand (`rag-pipeline demo --debug`); SUPPRESS keeps a --debug given before it,
        # which a subparser's own default would otherwise overwrite.
        command_parser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="print tracebacks and library warnings"
        )
    return parser


def _quiet_libraries() -> None:
    """Keep stderr to the command's own output (process-wide: a library thread may warn after ``main`` returns).

    Dagster warns on every use of the beta/preview APIs the project chose on purpose (backfill policies,
    code references); Python's own logger for Dagster repeats what the progress display already says.
    Step failures are reported by the runners as one line; their console logger is set in
    ``rag_pipeline.runs.instance.QUIET_RUN_CONFIG``. transformers draws a "Loading weights" bar for a
    model that loads in milliseconds and warns about inputs the chunker already fits to the model (both
    read once, when transformers is first imported, which happens inside the command)."""
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    warnings.filterwarnings("ignore", category=dg.PreviewWarning)
    # qdrant-client checks a server's version in a daemon thread; when the server cannot be reached, this
    # warning can land before or after the one line that already says so.
    warnings.filterwarnings("ignore", message="Failed to obtain server version", category=UserWarning)
    logging.getLogger("dagster").setLevel(logging.WARNING)
    # Shortened children are expected with the default model (400-token children, 256-token input) and are
    # counted in each run's child-chunk metadata (clamped_to_model_limit); once per run on stderr is noise.
    logging.getLogger("rag_pipeline.text.chunking").setLevel(logging.ERROR)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _configured_urls(settings: Settings | None) -> dict[str, str]:
    """Server addresses from the configuration and the variable that sets each (named in connection errors)."""
    if settings is None:
        return {}
    urls: dict[str | None, str | None] = {settings.qdrant.url: "QDRANT_URL"}
    for section in settings.sources.values():
        address = section.api_address() if section.live else None
        if address is not None:
            urls[address[0]] = address[1]
    return {url: variable for url, variable in urls.items() if url and variable}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = bool(args.debug)
    if getattr(args, "source", None) is None:
        args.source = list(source_names())
    if not debug:
        _quiet_libraries()
    settings: Settings | None = None
    try:
        load_env_file()  # ./.env or $RAG_ENV_FILE, under what the environment already sets
        # The one read of the environment; every command gets its configuration from here.
        settings = Settings.from_env().with_data_dir(getattr(args, "data_dir", None))
        # A command that only reads what `demo`, `index` or `sync` wrote (its parser sets reads_data_folder), given a
        # data folder that does not exist, stops with one line naming it instead of creating it (with an empty cache
        # in it) and then failing on the index. A search sent to a service (--server) reads no local folder.
        if getattr(args, "reads_data_folder", False) and not getattr(args, "server", None):
            existing_data_folder(
                settings.data_dir, data_folder_given_by(getattr(args, "data_dir", None), settings.data_dir_from_env)
            )
        return int(args.func(args, settings))
    except SystemExit as exc:
        if not isinstance(exc.code, str):
            raise
        # A command stopping with a message (argparse style): print it once, exit 2. The message stays
        # the exception's text for callers; the interpreter exits silently on the integer code.
        if debug:
            print_traceback(exc)
        message = one_line(exc.code).removeprefix("error: ")
        print_error(message)
        stop = SystemExit(message)
        stop.code = USAGE
        raise stop from None
    except (KeyboardInterrupt, dg.DagsterExecutionInterruptedError):  # Ctrl-C, in or outside a Dagster run
        print_error("interrupted")
        return INTERRUPTED
    except Exception as exc:
        explanation = explain(exc, _configured_urls(settings))
        if debug:
            print_traceback(exc)
            print_error(explanation.message)
        else:
            print_error(explanation.message if explanation.expected else f"{explanation.message} ({DEBUG_HINT})")
        return explanation.code


if __name__ == "__main__":
    sys.exit(main())
