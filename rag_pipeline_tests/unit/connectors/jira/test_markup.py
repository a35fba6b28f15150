"""Jira bodies as text: HTML stripped only from ``{html}`` bodies (code blocks kept), and every ADF node type
rendered, unknown nodes by their content."""

from __future__ import annotations

from rag_pipeline.connectors.jira.dump import body_text
from rag_pipeline.connectors.jira.markup import adf_to_text


def test_html_is_stripped_only_from_html_bodies() -> None:
    assert body_text("{html}<p>Steps:</p><ul><li>open <b>app</b></li></ul>{html}") == "Steps:\nopen app"
    code = "<p>see</p> <br/> {code}<Alloy><Window class='c'/><p>x</p></Alloy>{code} and List<String>"
    assert "<Alloy><Window class='c'/><p>x</p></Alloy>" in body_text(code) and "List<String>" in body_text(code)
    assert "<p>see</p>" not in body_text(code)


def test_adf_every_node_type_and_unknown_nodes() -> None:
    doc = {
        "type": "doc",
        "content": [
            {"type": "heading", "attrs": {"level": 2}, "content": [{"type": "text", "text": "Title"}]},
            {
                "type": "bulletList",
                "content": [
                    {
                        "type": "listItem",
                        "content": [{"type": "paragraph", "content": [{"type": "text", "text": "one"}]}],
                    }
                ],
            },
            {
                "type": "orderedList",
                "content": [
                    {
                        "type": "listItem",
                        "content": [{"type": "paragraph", "content": [{"type": "text", "text": "first"}]}],
                    }
                ],
            },
            {"type": "blockquote", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "quoted"}]}]},
            {
                "type": "panel",
                "attrs": {"panelType": "warning"},
                "content": [{"type": "paragraph", "content": [{"type": "text", "text": "careful"}]}],
            },
            {"type": "rule"},
            {
                "type": "table",
                "content": [
                    {
                        "type": "tableRow",
                        "content": [
                            {
                                "type": "tableHeader",
                                "content": [{"type": "paragraph", "content": [{"type": "text", "text": "h"}]}],
                            }
                        ],
                    },
                    {
                        "type": "tableRow",
                        "content": [
                            {
                                "type": "tableCell",
                                "content": [{"type": "paragraph", "content": [{"type": "text", "text": "c"}]}],
                            }
                        ],
                    },
                ],
            },
            {
                "type": "paragraph",
                "content": [
                    {"type": "mention", "attrs": {"text": "@Ann"}},
                    {"type": "text", "text": " "},
                    {"type": "emoji", "attrs": {"shortName": ":ok:", "text": "👍"}},
                    {"type": "hardBreak"},
                    {"type": "inlineCard", "attrs": {"url": "https://x.io/1"}},
                    {"type": "text", "text": " "},
                    {"type": "status", "attrs": {"text": "DONE"}},
                    {"type": "text", "text": " "},
                    {"type": "date", "attrs": {"timestamp": "1709251200000"}},
                    {"type": "text", "text": " link", "marks": [{"type": "link", "attrs": {"href": "https://y.io"}}]},
                ],
            },
            {"type": "mediaSingle", "content": [{"type": "media", "attrs": {"alt": "screen.png"}}]},
            {
                "type": "expand",
                "attrs": {"title": "More"},
                "content": [{"type": "paragraph", "content": [{"type": "text", "text": "hidden"}]}],
            },
            {
                "type": "taskList",
                "content": [
                    {"type": "taskItem", "attrs": {"state": "DONE"}, "content": [{"type": "text", "text": "ship"}]}
                ],
            },
            {"type": "futureWidget", "content": [{"type": "text", "text": "still here"}]},
        ],
    }
    text = adf_to_text(doc)
    for expected in (
        "## Title",
        "- one",
        "1. first",
        "> quoted",
        "[warning] careful",
        "---",
        "| h |",
        "| c |",
        "@Ann 👍",
        "https://x.io/1 [DONE] 2024-03-01 link (https://y.io)",
        "[media: screen.png]",
        "More\nhidden",
        "[x] ship",
        "still here",
    ):
        assert expected in text, expected
