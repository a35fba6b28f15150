"""A crafted Confluence site for the connector's tests: spaces with group, user and anonymous view grants, a page
tree with restrictions at two levels, comments, a blog post, and a reader on the real client.

ENG (view: group eng): Home (2001, unrestricted) > Secret (2002, restricted to group secret-team and user
acc-dave) > Secret child (2003, restricted to group leads) > Deep (2004, unrestricted); Secret > Under secret
(2005, unrestricted); blog post 2006. HR (view: group hr and user acc-erin): Policies (4001). PUB (anonymous):
Welcome (3001). Restricted chains: 2002 admits {bob (secret-team), dave}; 2003 admits {bob, dave} ∩ {dave (leads)}
= {dave}.
"""

from __future__ import annotations

from rag_pipeline.connectors.confluence.api import ConfluenceApiReader, ConfluenceSyncSettings
from rag_pipeline.connectors.confluence.client import build_confluence_client
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline_tests.kit.emulators.confluence_api import ConfluenceEmulator, ConfluenceSite, at

SITE = "wiki.crafted.test"
USER, TOKEN, PAT = "bot@example.com", "confluence-test-token", "confluence-test-pat"

HOME_BODY = (
    '<h2>Deploy guide</h2><p>Ask <ac:link><ri:user ri:account-id="acc-bob"/></ac:link> before a release '
    '&mdash; see <a href="https://ci.crafted.test">CI</a> <ac:emoticon ac:name="smile"/></p>'
    "<table><tbody><tr><th>Env</th><th>Host</th></tr><tr><td>prod</td><td>prod-1</td></tr></tbody></table>"
    '<ac:structured-macro ac:name="code"><ac:parameter ac:name="language">bash</ac:parameter>'
    "<ac:plain-text-body><![CDATA[make deploy ENV=prod\n  --dry-run]]></ac:plain-text-body></ac:structured-macro>"
    '<ac:structured-macro ac:name="warning"><ac:rich-text-body><p>Never on Fridays</p></ac:rich-text-body>'
    '</ac:structured-macro><p><ac:link><ri:attachment ri:filename="runbook.pdf"/></ac:link></p>'
)


def crafted_site() -> ConfluenceSite:
    s = ConfluenceSite()
    s.add_user("acc-alice", "Alice Anders", email="Alice@Crafted.Example", groups=["eng"])
    s.add_user("acc-bob", "Bob Builder", email="bob@crafted.example", groups=["eng", "secret-team"])
    s.add_user("acc-carol", "Carol HR", email="carol@crafted.example", groups=["hr"])
    s.add_user("acc-dave", "Dave Lead", email="dave@crafted.example", groups=["eng", "leads"])
    s.add_user("acc-erin", "Erin Extern", email="erin@crafted.example")
    s.add_space("ENG", "Engineering", view_groups=["eng"])
    s.add_space("HR", "People", view_groups=["hr"], view_users=["acc-erin"])
    s.add_space("PUB", "Public", anonymous=True)
    s.add_page("ENG", "Home", HOME_BODY, at("2024-03-01", 9), id="2001", labels=["deploy", "howto"], version=3)
    s.add_page("ENG", "Secret", "<p>launch codes</p>", at("2024-03-02", 10), id="2002", parent="2001",
               read_groups=["secret-team"], read_users=["acc-dave"])  # fmt: skip
    s.add_page("ENG", "Secret child", "<p>deeper</p>", at("2024-03-02", 11), id="2003", parent="2002",
               read_groups=["leads"])  # fmt: skip
    s.add_page("ENG", "Deep", "<p>deepest</p>", at("2024-03-02", 12), id="2004", parent="2003")
    s.add_page("ENG", "Under secret", "<p>sibling</p>", at("2024-03-03", 8), id="2005", parent="2002")
    s.add_page("ENG", "Release notes", "<p>v2 is out</p>", at("2024-03-03", 23, 55), id="2006", type="blogpost")
    s.add_page("HR", "Policies", "<p>leave policy</p>", at("2024-03-01", 15), id="4001", author="acc-carol")
    s.add_page("PUB", "Welcome", "<p>hello world</p>", at("2024-03-01", 7), id="3001")
    s.add_comment("2001", "<p>Works for me</p>", "acc-bob", at("2024-03-01", 10))
    s.add_comment("2001", "<p>typo here</p>", "acc-alice", at("2024-03-01", 11), location="inline",
                  selection="dry-run")  # fmt: skip
    return s


def reader(
    emulator: ConfluenceEmulator, cloud: bool = True, site: str | None = SITE, max_retries: int = 8, **settings: object
) -> ConfluenceApiReader:
    """A reader on the real client against ``emulator`` (no backoff: retries follow Retry-After only)."""
    auth = {"username": USER, "api_token": TOKEN} if cloud else {"personal_access_token": PAT}
    client = build_confluence_client(
        emulator.url,
        cloud=cloud,
        stats=ApiStats(),
        backoff_seconds=0,
        timeout=10,
        max_retries=max_retries,
        **auth,
    )
    return ConfluenceApiReader(client, ConfluenceSyncSettings(cloud=cloud, site=site, **settings))
