"""Confluence storage format (XHTML) as clean text: tables, code, macros, mentions, attachments, malformed input."""

from __future__ import annotations

from rag_pipeline.connectors.confluence.acl import describe_group
from rag_pipeline.connectors.confluence.storage import storage_text, storage_to_text
from rag_pipeline_tests.kit.confluence_fixtures import HOME_BODY


def test_tables_become_rows_and_cells_stay_on_their_row() -> None:
    body = "<table><tr><th>Name</th><th>Port</th></tr><tr><td><p>api</p></td><td>80<br/>443</td></tr></table>"
    assert storage_to_text(body) == "Name | Port\napi | 80 443"


def test_code_macro_is_kept_verbatim_with_its_language() -> None:
    body = (
        '<ac:structured-macro ac:name="code"><ac:parameter ac:name="language">python</ac:parameter>'
        '<ac:plain-text-body><![CDATA[def f(x):\n    return x < 1 && "<p>"]]></ac:plain-text-body>'
        "</ac:structured-macro>"
    )
    assert storage_to_text(body) == '```python\ndef f(x):\n    return x < 1 && "<p>"\n```'


def test_macros_are_named_with_their_body_and_parameters_dropped() -> None:
    body = (
        '<ac:structured-macro ac:name="info"><ac:parameter ac:name="icon">true</ac:parameter>'
        "<ac:rich-text-body><p>Read <em>this</em></p></ac:rich-text-body></ac:structured-macro>"
        '<ac:structured-macro ac:name="panel"><ac:parameter ac:name="title">Owners</ac:parameter>'
        "<ac:rich-text-body><p>team A</p></ac:rich-text-body></ac:structured-macro>"
        '<ac:structured-macro ac:name="toc"/>'
        '<ac:structured-macro ac:name="jira"><ac:parameter ac:name="key">OPS-7</ac:parameter></ac:structured-macro>'
    )
    assert storage_to_text(body) == "[info] Read this\n[panel: Owners] team A\n[toc]\n[jira: OPS-7]"


def test_mentions_links_attachments_emoticons_and_entities() -> None:
    body = (
        '<p>Hi <ac:link><ri:user ri:account-id="acc-1"/></ac:link> and <ac:link><ri:user ri:username="jdoe"/>'
        '</ac:link> &amp; <a href="https://x.test/a">the docs</a> <ac:emoticon ac:name="smile"/>caf&eacute;</p>'
        '<p><ac:link><ri:attachment ri:filename="plan.pdf"/></ac:link> <ac:image><ri:attachment ri:filename="a.png"/>'
        '</ac:image> <ac:link><ri:page ri:content-title="Runbook"/></ac:link></p>'
        "<ul><li>one</li><li>two</li></ul><ol><li>first</li></ol>"
    )
    assert storage_to_text(body, {"acc-1": "Ann Lee"}) == (
        "Hi @Ann Lee and @jdoe & the docs (https://x.test/a) café\n"
        "[attachment: plan.pdf] [attachment: a.png] Runbook\n- one\n- two\n1. first"
    )


def test_the_crafted_home_page() -> None:
    text = storage_to_text(HOME_BODY, {"acc-bob": "Bob Builder"})
    assert "Ask @Bob Builder before a release — see CI (https://ci.crafted.test)" in text
    assert "Env | Host\nprod | prod-1" in text
    assert "```bash\nmake deploy ENV=prod\n  --dry-run\n```" in text
    assert "[warning] Never on Fridays" in text and "[attachment: runbook.pdf]" in text


def test_malformed_xhtml_is_read_and_never_raises() -> None:
    body = '<p>open <b>bold <table><tr><td>cell</p></div>&bogus; <ac:structured-macro ac:name="code"><![CDATA[x = 1'
    read = storage_text(body, "page 1")
    assert read.problem is None
    assert "open bold" in read.text and "cell" in read.text and "x = 1" in read.text
    broken = storage_text({"not": "text"}, "page 2")
    assert broken.text == "" and broken.problem is not None and broken.problem.location == "page 2"
    assert storage_text(None, "page 3").text == ""


def test_describe_group_words() -> None:
    assert describe_group(["confluence", "s", "space", "ENG"]) == "people who may view Confluence space ENG on s"
    assert describe_group(["confluence", "s", "group", "eng"]) == "Confluence group eng on s"
    assert "page 12" in (describe_group(["confluence", "s", "restricted", "12"]) or "")
    assert describe_group(["jira", "s", "project", "X"]) is None
