"""Every table the CLI prints reads whole in an 80-column terminal (issue 48): no line wider than the terminal,
no header or figure cut with an ellipsis, every header and figure present; a wide terminal keeps the wide layout.

Each table is rendered through the function its command prints it with, into a recording rich console of the
given width that takes itself for a terminal.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable

import pytest
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from rag_pipeline.commands.demo import print_evaluation
from rag_pipeline.commands.index import _COLUMNS, print_summary
from rag_pipeline.commands.search import _print_table
from rag_pipeline.commands.status import container_layouts, container_rows
from rag_pipeline.commands.sync import sync_table
from rag_pipeline.commands.tables import first_fitting, fits, print_evaluation_table
from rag_pipeline.commands.token import _show
from rag_pipeline.evaluation.report import markdown_table
from rag_pipeline.evaluation.summary import ArmSummary, EvalSummary
from rag_pipeline.runs.evaluation import EvaluationSummary
from rag_pipeline.runs.sync_status import ContainerStatus, SourceStatus
from rag_pipeline.serving.tokens import TokenInfo

WIDTHS = (80, 90, 100, 110, 120, 140, 200)


def render(width: int, draw: Callable[[Console], object]) -> str:
    console = Console(width=width, record=True, force_terminal=True, color_system=None, file=io.StringIO())
    draw(console)
    return console.export_text(styles=False)


def assert_readable(text: str, width: int, words: Iterable[str]) -> None:
    lines = text.splitlines()
    too_wide = [line for line in lines if cell_len(line.rstrip()) > width]
    assert not too_wide, f"lines wider than {width}:\n" + "\n".join(too_wide)
    assert "…" not in text, f"cut at {width} columns:\n{text}"
    missing = [word for word in words if word not in text]
    assert not missing, f"missing at {width} columns: {missing}\n{text}"


def header_line(text: str, *headers: str) -> str | None:
    """The first line holding every one of ``headers``."""
    return next((line for line in text.splitlines() if all(h in line for h in headers)), None)


# --- index / demo: the per-source summary -------------------------------------------------------------------


def _figures(seed: int) -> dict[str, object]:
    return {
        "documents": 1234 + seed,
        "parent_chunks": 2345 + seed,
        "child_chunks": 12345 + seed,
        "points": 14690 + seed,
        "embeddings_computed": 14000 + seed,
        "embeddings_cached": 690 + seed,
        "runs": 53 + seed,
        "runs_skipped": 7 + seed,
        "stage_seconds": {"read": 1.5 + seed, "chunk": 3.25, "embed": 120.5, "write": 8.75},
    }


def _index_result(sources: Iterable[str] = ("slack", "jira")) -> dict[str, object]:
    return {"seconds": 345.6, "per_source": {name: _figures(i) for i, name in enumerate(sources)}}


def _index_words(result: dict[str, object]) -> list[str]:
    per_source = result["per_source"]
    assert isinstance(per_source, dict)
    words = [word for label, _ in _COLUMNS for word in label.split()] + ["seconds", "per", "stage", "(345.6"]
    for name, figures in per_source.items():
        words.append(name)
        words += [str(figures[key]) for _, key in _COLUMNS]
        words += [*figures["stage_seconds"], *(str(s) for s in figures["stage_seconds"].values())]
    return words


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("sources", [("slack", "jira"), ("slack",), ("slack", "jira", "jira_csv", "confluence")])
def test_index_summary_is_whole_at_every_width(width: int, sources: tuple[str, ...]) -> None:
    result = _index_result(sources)
    text = render(width, lambda console: print_summary(result, "rag-pipeline demo", console))
    assert_readable(text, width, _index_words(result))


def test_index_summary_at_80_columns_lists_figures_as_rows() -> None:
    result = _index_result()
    text = render(80, lambda console: print_summary(result, "rag-pipeline demo", console))
    # One row per figure, a column per source: the labels read whole, never "docum…", "embed… compu…".
    assert header_line(text, "slack", "jira") is not None
    for label, key in _COLUMNS:
        row = header_line(text, label)
        assert row is not None, label
        assert str(_figures(0)[key]) in row and str(_figures(1)[key]) in row


def test_index_summary_at_120_columns_keeps_one_row_per_source() -> None:
    result = _index_result()
    text = render(120, lambda console: print_summary(result, "rag-pipeline demo", console))
    assert header_line(text, "source", "documents", "points", "runs") is not None
    for i, name in enumerate(("slack", "jira")):
        row = header_line(text, f" {name} ")
        assert row is not None
        assert all(str(_figures(i)[key]) in row for _, key in _COLUMNS)


def test_index_summary_in_a_log_stays_key_value_lines(capsys: pytest.CaptureFixture[str]) -> None:
    console = Console(width=80, file=io.StringIO(), force_terminal=False)
    print_summary(_index_result(), "rag-pipeline index", console)
    out = capsys.readouterr().out
    assert "rag-pipeline index (345.6 s)" in out
    assert "  runs skipped (unchanged): 7" in out and "  embeddings computed: 14001" in out
    assert "  seconds per stage: read 1.5, chunk 3.25, embed 120.5, write 8.75" in out


# --- the evaluation report (demo, bench) ---------------------------------------------------------------------


def _arm(mean: float, p: float | None = None, leaks: int = 0, queries: int = 0, p50: float = 19.9, p95: float = 24.4):
    means = {"ndcg@10": mean, "recall@10": 0.858, "recall@100": 0.963, "mrr@10": 0.692, "map@100": 0.686}
    return ArmSummary(
        means=means,
        ci95={metric: (round(value - 0.05, 3), round(value + 0.04, 3)) for metric, value in means.items()},
        p_vs_baseline={} if p is None else {"ndcg@10": p},
        p50_ms=p50,
        p95_ms=p95,
        leaks=leaks,
        queries_with_leaks=queries,
    )


def _summary(extra_arms: dict[str, ArmSummary] | None = None) -> EvalSummary:
    arms = {
        "vector": _arm(0.654, 0.2),
        "bm25": _arm(0.682),
        "hybrid": _arm(0.728, 0.001, leaks=3, queries=2),
        "reranked": _arm(0.763, 0.004, p50=1063.3, p95=12093.6),
        "prf": _arm(0.701, 0.03),
        "llm_reranked": _arm(0.8, 0.001, leaks=12, queries=11),
        **(extra_arms or {}),
    }
    return EvalSummary(queries=300, documents=5183, baseline="bm25", metrics=["ndcg@10"], arms=arms)


def _evaluation_words(summary: EvalSummary) -> list[str]:
    words = ["Arm", "R@10", "R@100", "MRR@10", "MAP@100", "Leaks", "(baseline)", "Holm-adjusted"]
    for name, arm in summary.arms.items():
        words.append(name)
        words += [f"{arm.means['ndcg@10']:.3f}", f"{arm.p50_ms:.1f}", f"{arm.p95_ms:.1f}"]
        words += [f"{value:.3f}" for key, value in arm.means.items() if key != "ndcg@10"]
        low, high = arm.ci95["ndcg@10"]  # the report shows nDCG@10's interval only
        words += [f"[{low:.3f},", f"{high:.3f}]"]
        if arm.leaks:
            words += [str(arm.leaks), f"({arm.queries_with_leaks}"]
    return words


@pytest.mark.parametrize("width", WIDTHS)
def test_evaluation_table_is_whole_at_every_width(width: int) -> None:
    summary = _summary()
    text = render(width, lambda console: print_evaluation_table(summary, console))
    assert_readable(text, width, _evaluation_words(summary))
    assert "0.728**" in text and "0.701*" in text  # the significance marks stay with their means


def test_evaluation_table_at_80_columns_splits_quality_from_cost() -> None:
    text = render(80, lambda console: print_evaluation_table(_summary(), console))
    assert header_line(text, "Arm", "nDCG@10", "95% CI", "R@10", "R@100", "MRR@10", "MAP@100") is not None
    assert header_line(text, "Arm", "p50 ms", "p95 ms", "Leaks") is not None
    assert "nDCG@10 [95% CI]" not in text
    reranked = [line for line in text.splitlines() if "reranked" in line and "llm" not in line]
    assert any("0.763**" in line and "[0.713, 0.803]" in line for line in reranked)
    assert any("1063.3" in line and "12093.6" in line for line in reranked)


def test_evaluation_table_at_120_columns_is_the_reports_one_table() -> None:
    text = render(120, lambda console: print_evaluation_table(_summary(), console))
    assert header_line(text, "Arm", "nDCG@10 [95% CI]", "R@10", "MAP@100", "p50 / p95 ms", "Leaks") is not None
    assert header_line(text, "hybrid", "0.728** [0.678, 0.768]", "19.9 / 24.4", "3 (2 queries)") is not None


def test_evaluation_table_keeps_an_arm_named_like_markup() -> None:
    summary = _summary({"reranked[fixed-weights]": _arm(0.733, 0.03)})
    text = render(140, lambda console: print_evaluation_table(summary, console))
    assert "reranked[fixed-weights]" in text
    # At 80 columns the long name folds (the last resort), the figures stay whole.
    narrow = render(80, lambda console: print_evaluation_table(summary, console))
    assert all(cell_len(line.rstrip()) <= 80 for line in narrow.splitlines())
    assert "…" not in narrow and "0.733*" in narrow and "[0.683, 0.773]" in narrow


def test_demo_prints_the_evaluation_for_the_terminal_and_markdown_for_a_log(
    capsys: pytest.CaptureFixture[str],
) -> None:
    summary = _summary()
    evaluation = EvaluationSummary(
        tables={"acl_bundled_dev": markdown_table(summary)},
        figures={"acl_bundled_dev": summary.cli_json()},
        seconds=12.0,
        ran=True,
        report_dir="/tmp/reports/latest",
        summaries={"acl_bundled_dev": summary},
    )
    text = render(80, lambda console: print_evaluation(evaluation, console))
    assert_readable(text, 80, ["###", "acl_bundled_dev", *_evaluation_words(summary)])
    capsys.readouterr()
    print_evaluation(evaluation, Console(file=io.StringIO(), force_terminal=False))
    out = capsys.readouterr().out
    assert "### acl_bundled_dev" in out and markdown_table(summary) in out


# --- status, search, sync, token list -----------------------------------------------------------------------


def _status() -> SourceStatus:
    failed = {"finished_at": "2024-05-02T13:03:00+00:00", "error": "SlackApiError: ratelimited [retry after 30 s]"}
    containers = [
        ContainerStatus(
            "C0123ABCDEF",
            "2024-05-01T12:00:00+00:00",
            93784.0,
            "2024-05-01T11:58:00+00:00",
            120.0,
            {"finished_at": "2024-05-02T14:03:00+00:00"},
            failed,
            None,
            "2024-05-01..2024-05-02 (catch-up)",
            2,
        ),
        ContainerStatus("C0999", None, None, None, None, None, None, None, "2024-01-01..2024-01-31 (first sync)", 123),
    ]
    return SourceStatus("slack", True, "*/15 * * * *", "2024-05-02T14:15:00+00:00", containers)


def _status_words(rows: list[dict[str, str]]) -> list[str]:
    """Every value, and every key but ``container`` (the vertical layout heads each block with the container)."""
    return [
        word
        for row in rows
        for key, value in row.items()
        for word in (*(key.split() if key != "container" else ()), *value.split())
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_status_is_whole_at_every_width(width: int) -> None:
    rows = container_rows(_status())
    text = render(width, lambda console: console.print(first_fitting(console, container_layouts(rows))))
    assert_readable(text, width, _status_words(rows))


def test_status_layouts() -> None:
    rows = container_rows(_status())
    narrow = render(80, lambda console: console.print(first_fitting(console, container_layouts(rows))))
    assert header_line(narrow, "watermark", "2024-05-01T12:00:00+00:00") is not None  # key beside its value
    assert header_line(narrow, "days to fetch", "123") is not None
    wide = render(240, lambda console: console.print(first_fitting(console, container_layouts(rows))))
    assert header_line(wide, "container", "watermark", "behind", "sync lag", "last success", "days to fetch")


def _search_payload() -> dict[str, object]:
    def result(i: int) -> dict[str, object]:
        return {
            "document_id": f"slack:T0UBUNTU:C0123ABCDEF:1712345678.12345{i}",
            "url": "https://ubuntu.slack.com/archives/C0123ABCDEF/p1712345678123456?thread_ts=1712345678.123456",
            "authors": ["alice", "bob"],
            "score": 0.87654 - i / 10,
            "title": "#general thread: upgrading [jammy] to noble",
            "child_text": "the upgrade from jammy to noble keeps the old kernel " * 4,
        }

    return {
        "warnings": [],
        "mode": "reranked",
        "milliseconds": {"total": 123.4},
        "reranker": "multi-signal(fixed-weights)",
        "results": [result(1), result(2)],
    }


@pytest.mark.parametrize("width", WIDTHS)
def test_search_results_are_whole_at_every_width(width: int) -> None:
    text = render(width, lambda console: _print_table(_search_payload(), console))
    words = ["#", "score", "document", "title", "/", "best", "chunk", "0.7765", "0.6765", "[jammy]", "alice,", "bob"]
    assert_readable(text, width, words)


@pytest.mark.parametrize("width", (40, *WIDTHS))
def test_sync_table_is_whole(width: int) -> None:
    result = {
        "start": "2024-01-01",
        "end": "2024-03-01",
        "documents": 12345,
        "documents_updated": 12,
        "documents_removed": 0,
        "api_calls": 456,
        "retries": 3,
        "seconds": 123.4,
        "runs": 9,
    }
    text = render(width, lambda console: console.print(sync_table(result, "slack")))
    words = ["documents_updated", "documents_removed", "api_calls", "12345", "123.4", "2024-01-01..2024-03-01"]
    assert_readable(text, width, words)


def _tokens() -> list[TokenInfo]:
    return [
        TokenInfo(
            "1a2b3c4d",
            "alice.longname@example.com",
            ("search", "answer"),
            "the nightly triage agent",
            "2025-05-01T12:00:00+00:00",
            "2999-06-01T12:00:00+00:00",
            None,
            "2025-05-02T10:00:00+00:00",
        ),
        TokenInfo(
            "9f8e7d6c",
            "bob@example.com",
            ("admin",),
            "",
            "2025-05-01T12:00:00+00:00",
            "2025-05-31T12:00:00+00:00",
            "2025-05-03T09:00:00+00:00",
            None,
        ),
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_token_list_is_whole_at_every_width(width: int) -> None:
    text = render(width, lambda console: _show(_tokens(), False, console))
    words = ["1a2b3c4d", "alice.longname@example.com", "answer", "active", "revoked", "2999-06-01T12:00:00+00:00"]
    assert_readable(text, width, [*words, "2025-05-02T10:00:00+00:00", "never", "nightly", "triage", "agent"])


def test_token_list_layouts(capsys: pytest.CaptureFixture[str]) -> None:
    assert header_line(render(200, lambda c: _show(_tokens(), False, c)), "id", "person", "scopes", "last used")
    narrow = render(80, lambda c: _show(_tokens(), False, c))
    assert header_line(narrow, "token 1a2b3c4d") is not None and header_line(narrow, "last used", "never")
    _show(_tokens(), False, Console(file=io.StringIO(), force_terminal=False))  # a pipe: one line per token
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].startswith("9f8e7d6c  bob@example.com  admin  revoked  expires")


# --- the layout chooser ------------------------------------------------------------------------------------


def test_fits_refuses_a_table_rich_would_cut() -> None:
    table = Table()
    for header in ("source", "embeddings computed", "embeddings cached", "runs skipped (unchanged)", "parent chunks"):
        table.add_column(header, justify="right")
    table.add_row("slack", "1", "2", "3", "4")
    for width in range(50, 100, 2):
        console = Console(width=width, file=io.StringIO())
        # Where rich would narrow the widest columns past their longest word (and cut it), the table does not fit.
        assert fits(console, table) == ("…" not in render(width, lambda c: c.print(table))), width
    # At 60 columns every header's longest word fits the width, yet rich cuts "embeddings".
    console = Console(width=60, file=io.StringIO())
    assert Measurement.get(console, console.options.update_width(1000), table).minimum <= 60
    assert not fits(console, table)


def test_nan_figures_render_as_a_dash() -> None:
    summary = _summary({"empty": _arm(math.nan)})
    text = render(80, lambda console: print_evaluation_table(summary, console))
    assert "–" in text and "…" not in text
