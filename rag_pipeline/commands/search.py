"""``rag-pipeline search``: query the index as a principal from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rag_pipeline.commands.arguments import (
    add_data_dir,
    author_name,
    iso_instant,
    positive_int,
    probability,
    query_text,
)
from rag_pipeline.commands.errors import FAILURE, USAGE, CommandError
from rag_pipeline.composition import dense_encoder_of, one_shot_index, reranker_of
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.query_cache import QueryEmbeddingCache
from rag_pipeline.retrieval.results import SEARCH_MODES
from rag_pipeline.retrieval.retriever import (
    DEFAULT_PREFETCH,
    LARGE_INDEX_CHILDREN,
    LARGE_INDEX_PREFETCH,
    RetrieverConfig,
)
from rag_pipeline.serving.schemas import SearchRequest
from rag_pipeline.serving.search import search_body
from rag_pipeline.settings import Settings
from rag_pipeline.sources.registry import source_names
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.dense.load import load_or_defer

if TYPE_CHECKING:
    from rich.console import Console


def retriever_config(args: argparse.Namespace, settings: Settings) -> RetrieverConfig:
    """Fusion, query weighting and depth options shared by ``search`` and ``bench``. A fusion given on the
    command line applies to every search; otherwise searches use the learned fusions (per source, and the
    title-line prefetch of multi-line queries)."""
    weights = None
    if args.rrf_weights:
        try:
            dense, sparse = (float(w) for w in args.rrf_weights.split(","))
        except ValueError:
            raise CommandError(f"--rrf-weights must be two numbers DENSE,SPARSE, got {args.rrf_weights!r}") from None
        weights = (dense, sparse)
    explicit = args.fusion != "rrf" or args.rrf_k is not None or weights is not None
    return RetrieverConfig.chosen(
        args.sparse_query or settings.sparse_query,
        settings.learned_fusion and not explicit and not args.no_learned_fusion,
        settings.index_language,
        fusion_method=args.fusion,
        rrf_k=args.rrf_k or 60,
        rrf_weights=weights,
        rerank_depth=getattr(args, "rerank_depth", 50),
        prefetch_limit=args.prefetch_limit,
    )


def add_query_options(parser: argparse.ArgumentParser) -> None:
    """The fusion and BM25-query options of ``search`` and ``bench``."""
    parser.add_argument("--fusion", choices=["rrf", "dbsf"], default="rrf", help="hybrid fusion (default: %(default)s)")
    parser.add_argument(
        "--rrf-k", type=int, default=None, help="RRF constant for every search (default: learned per source, else 60)"
    )
    parser.add_argument(
        "--rrf-weights", default=None, help="weighted RRF as DENSE,SPARSE weights, e.g. 1,2 (default: equal)"
    )
    parser.add_argument(
        "--no-learned-fusion",
        action="store_true",
        help="plain RRF k=60 for every search instead of the learned fusions (Slack's weights, the title-line "
        "prefetch of multi-line queries); also off whenever --fusion, --rrf-k or --rrf-weights is given "
        "(default: RAG_LEARNED_FUSION, on)",
    )
    parser.add_argument(
        "--sparse-query",
        choices=["plain", "fielded"],
        default=None,
        help="how BM25 reads the query: fielded weighs its title line up and drops code, stack frames and URLs; "
        "plain gives every term weight 1 (default: RAG_SPARSE_QUERY, else fielded)",
    )
    parser.add_argument(
        "--prefetch-limit",
        type=positive_int,
        default=None,
        help=f"candidates each list of a hybrid search fetches before fusion (default: {DEFAULT_PREFETCH}, and "
        f"{LARGE_INDEX_PREFETCH} on an index of more than {LARGE_INDEX_CHILDREN:,} child chunks: fewer answer faster "
        "on a large index, docs/notes/search_at_scale.md)",
    )


def principal_from_args(args: argparse.Namespace, settings: Settings) -> Principal:
    """The reader of a search: ``--user`` resolved through the principal directory (every account id of the
    person and the groups they hold) unless ``--groups`` says the groups; a user the directory does not know
    reads public documents and those naming the id."""
    groups = tuple(g for g in (args.groups or "").split(",") if g)
    if args.all_documents:
        if args.user or groups:
            raise CommandError("--all-documents skips access control; it cannot be combined with --user/--groups")
        return Principal.all_documents_for_evaluation()
    if args.user and not groups:
        from rag_pipeline.runs.directory import reader_of

        principal, person = reader_of(settings, args.user)
        if person is None:
            print(
                f"note: {args.user} is not in the principal directory; searching with no groups (public documents "
                "and those naming the id)",
                file=sys.stderr,
            )
        return principal
    return Principal(user_id=args.user, groups=groups)


def _prepare_dense(settings: Settings, query: str, cache: EmbeddingCache) -> DenseEncoder | Callable[[], DenseEncoder]:
    """The dense model, loaded, with the query already embedded into the embedding cache (where the
    retriever finds it), so that loading the model (seconds) never happens while the index is held.

    A model that cannot be loaded or run is handed to the retriever as a loader that raises: dense modes
    then fall back to BM25 with the usual warning, as when the retriever loads the model itself."""

    def load() -> DenseEncoder:
        encoder = dense_encoder_of(settings)
        QueryEmbeddingCache(encoder, persistent=cache).get(query)
        return encoder

    return load_or_defer(load)


def run(args: argparse.Namespace, settings: Settings) -> int:
    payload = _search_remote(args, settings) if args.server else _search_here(args, settings)
    if args.json:
        print(json.dumps(payload, indent=2))
    else:
        _print_table(payload)
    return 0


# The request's fields the command line spells the same (`--top-k` is top_k, `--min-score` min_score, ...).
_REQUEST_ARGUMENTS = ("query", "mode", "top_k", "source", "container", "author", "since", "until", "min_score")


def search_request(args: argparse.Namespace) -> SearchRequest:
    """The command line's search as the use case's request. Its arguments are validated by their argparse types;
    the service's limits (top_k at most 100, the query's length) are for remote callers, not a local reader."""
    given = {name: getattr(args, name) for name in _REQUEST_ARGUMENTS}
    # Every connector is no filter (as a remote search sends it): a pushed source's documents are found too.
    given["source"] = args.source if sorted(args.source or ()) != sorted(source_names()) else None
    return SearchRequest.model_construct(path=getattr(args, "path", None), **given)


def _search_here(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    principal, config = principal_from_args(args, settings), retriever_config(args, settings)
    request = search_request(args)
    if request.path is not None and principal.all_documents:
        raise CommandError("--path is a path of a reader's tree: give --user or --groups")
    # Everything slow happens before the index is opened: the embedded index admits one process at a time,
    # so a search holds it only for its queries (docs/notes/embedded_store_concurrency.md).
    reranker = reranker_of(settings)
    cache = EmbeddingCache(settings.paths.embedding_cache)
    dense = None if args.mode == "bm25" else _prepare_dense(settings, args.query, cache)
    try:
        index = one_shot_index(settings, dense=dense, reranker=reranker, cache=cache, config=config)
        served = index.search(request, principal)
    finally:
        cache.close()
    if served.path_outside_tree:
        raise CommandError(f"no container this reader may read is under --path {args.path!r}")
    return _with_milliseconds(search_body(request, served))


def _with_milliseconds(body: dict[str, Any]) -> dict[str, Any]:
    """The service's body, with its stage timings also under ``milliseconds`` (the name `search --json` has
    always printed them under)."""
    return {**body, "milliseconds": body.get("timing_ms", {})}


# Options that change how the index is searched: a service searches with its own settings, so they cannot be sent.
_LOCAL_ONLY = {
    "all_documents": "--all-documents",
    "fusion": "--fusion",
    "rrf_k": "--rrf-k",
    "rrf_weights": "--rrf-weights",
    "no_learned_fusion": "--no-learned-fusion",
    "sparse_query": "--sparse-query",
}
_LOCAL_DEFAULTS: dict[str, Any] = {"fusion": "rrf", "all_documents": False, "no_learned_fusion": False}


def _search_remote(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """The same search sent to a running ``rag-pipeline serve`` (``--server URL``), as the same reader."""
    import httpx

    for name, flag in _LOCAL_ONLY.items():
        if getattr(args, name, None) not in (None, _LOCAL_DEFAULTS.get(name)):
            raise CommandError(
                f"{flag} cannot be sent to a search service (--server): it searches with its own settings"
            )
    if not args.user:
        raise CommandError("--server needs --user: the service searches as the caller it is told about")
    # An email goes as X-User-Email: the service resolves either through its directory.
    headers = {"X-User-Email": args.user} if "@" in args.user else {"X-User-Id": args.user}
    if args.groups:
        headers["X-User-Groups"] = args.groups
    if settings.serve.token is not None:
        headers["Authorization"] = f"Bearer {settings.serve.token.get_secret_value()}"
    body: dict[str, Any] = {"query": args.query, "mode": args.mode, "top_k": args.top_k}
    for field, value in (
        ("source", args.source if sorted(args.source) != sorted(source_names()) else None),
        ("container", args.container),
        ("author", args.author),
        ("since", args.since),
        ("until", args.until),
        ("min_score", args.min_score),
        ("path", args.path),
    ):
        if value:
            body[field] = value
    url = args.server.rstrip("/") + "/v1/search"
    try:
        response = httpx.post(url, json=body, headers=headers, timeout=settings.store_wait_seconds + 30)
    except httpx.HTTPError as exc:
        raise CommandError(
            f"cannot reach the search service at {args.server} ({type(exc).__name__}); start it with "
            "`rag-pipeline serve` or check --server",
            code=FAILURE,
        ) from None
    try:
        answer = response.json()
    except ValueError:
        answer = {}
    if response.status_code != 200:
        message = answer.get("error") if isinstance(answer, dict) else None
        raise CommandError(
            f"the search service at {args.server} answered {response.status_code}: {message or response.text[:200]}",
            code=USAGE if 400 <= response.status_code < 500 else FAILURE,
        )
    if not isinstance(answer, dict) or not isinstance(answer.get("results"), list) or "mode" not in answer:
        raise CommandError(f"{args.server} answered, but not as a search service: {response.text[:200]!r}", FAILURE)
    # The service's body is the use case's (serving/search.py): printed as a local search's.
    return _with_milliseconds(answer)


def _print_table(payload: dict[str, Any], console: Console | None = None) -> None:
    """The results as a table: the rank and the score never wrap; ids, links and text fold within their
    columns, so the table holds an 80-column terminal whole."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    for warning in payload["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    title = f"{payload['mode']} · {payload['milliseconds'].get('total', 0):.1f} ms"
    if payload["mode"] == "reranked" and payload.get("reranker"):
        title += f" · {payload['reranker']}"
    table = Table(title=title, show_lines=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("score", no_wrap=True)
    for column in ("document", "title / best chunk"):
        table.add_column(column, overflow="fold")
    for i, r in enumerate(payload["results"], start=1):
        snippet = " ".join(r["child_text"].split())[:240]
        document = "\n".join(part for part in (r["document_id"], r["url"], ", ".join(r["authors"])) if part)
        table.add_row(
            str(i), f"{r['score']:.4f}", escape(document), f"[bold]{escape(r['title'])}[/]\n{escape(snippet)}"
        )
    console.print(table)
    if not payload["results"]:
        console.print("no results (the principal may not be allowed to read any match; try --groups)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    search = sub.add_parser(
        "search",
        help="search the index as a user (vector, bm25, hybrid, reranked or prf)",
        description="Searches child chunks with the reader's ACL in every query, then returns one result per "
        "document with its best chunk. Without --user/--groups only public documents match; --all-documents "
        "(evaluation only) skips access control.",
    )
    search.add_argument("query", type=query_text)
    search.add_argument(
        "--mode",
        choices=SEARCH_MODES,
        default="hybrid",
        help="prf: hybrid whose BM25 side is expanded with terms of the query's own first BM25 results (RM3) "
        "(default: %(default)s)",
    )
    search.add_argument(
        "--user",
        default=None,
        help="the reader: an email or account id, resolved through the principal directory to every account and "
        "group of the person (see `whois`)",
    )
    search.add_argument(
        "--groups",
        default="",
        help="the reader's groups, comma-separated (e.g. slack:T0UBUNTU:members); given, the directory is not asked",
    )
    search.add_argument("--all-documents", action="store_true", help="skip access control (evaluation only)")
    search.add_argument("--top-k", type=positive_int, default=10, help="results to return (default: %(default)s)")
    search.add_argument("--source", action="append", choices=source_names(), help="only this source (repeatable)")
    search.add_argument("--container", action="append", help="only this channel id / project key (repeatable)")
    search.add_argument(
        "--path", default=None, help="only the reader's containers under this path (slack/#eng, jira/OPS): see `tree`"
    )
    search.add_argument(
        "--author",
        action="append",
        type=author_name,
        help="only documents this person wrote in, by the name results show under authors (Slack/Jira display "
        "name, exact; repeatable: any of them)",
    )
    search.add_argument("--since", default=None, type=iso_instant, help="documents active on or after this ISO date")
    search.add_argument("--until", default=None, type=iso_instant, help="documents active before this ISO date")
    search.add_argument(
        "--min-score",
        type=probability,
        default=None,
        help="drop results less likely relevant than this, 0-1: each result's relevance is P(relevant) for its mode "
        "and score, fitted by the last evaluation (default: RAG_MIN_SCORE, 0 = keep all)",
    )
    add_query_options(search)
    search.add_argument("--json", action="store_true", help="print results as JSON")
    search.add_argument(
        "--server",
        default=None,
        metavar="URL",
        help="send the search to a running `rag-pipeline serve` at URL (e.g. http://127.0.0.1:8000) instead of "
        "opening the index here; --user is sent as X-User-Id, --groups as X-User-Groups (honoured only by a "
        "service behind a trusted proxy), RAG_SERVE_TOKEN as the bearer token",
    )
    add_data_dir(search)
    search.set_defaults(func=run, reads_data_folder=True)
