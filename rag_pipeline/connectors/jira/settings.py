"""Jira's settings section: the dump or CSV export read offline, whose site it is, its directory file, and the
live REST API."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from rag_pipeline.connectors.atlassian.settings import AtlassianApiSettings
from rag_pipeline.env_values import EnvValues
from rag_pipeline.sources.registry import InputCheck, SourceSettings

BUNDLED_JIRA_DUMP = Path(__file__).resolve().parents[2] / "data" / "jira_appcelerator" / "issues.jsonl.gz"
BUNDLED_JIRA_SITE = "jira.appcelerator.org"
# Real comments of the bundled dump read as restricted to a role or group (the public archive has none), so the
# bundled index and its ACL eval set hold restricted comments: see the file's "about".
BUNDLED_COMMENT_VISIBILITY = BUNDLED_JIRA_DUMP.with_name("comment_visibility.json")
# Date formats of Jira CSV exports, tried in turn ("|"-separated): the instance's display format, by default
# Jira's "dd/MMM/yy h:mm a" ("30/Sep/21 5:20 PM") or its 24-hour variant ("30/Sep/21 17:20").
DEFAULT_JIRA_CSV_DATE_FORMAT = "%d/%b/%y %I:%M %p|%d/%b/%y %H:%M"


class JiraApiSettings(AtlassianApiSettings):
    """The live Jira connector (present when ``JIRA_URL`` is set; also ``JIRA_CLOUD``, ``JIRA_USERNAME``,
    ``JIRA_API_TOKEN``, ``JIRA_PAT``, ``JIRA_SITE``, ``JIRA_PAGE_SIZE``, ``JIRA_OVERLAP_MINUTES``; secrets stay
    EnvVars, only whether they are set is recorded)."""


class JiraSettings(SourceSettings):
    """RAG_JIRA_DUMP or RAG_JIRA_CSV (+ its date format and delimiter), JIRA_SITE, RAG_JIRA_DIRECTORY; JIRA_URL and
    its credentials for the live API."""

    dump: Path = BUNDLED_JIRA_DUMP
    # Jira's own CSV export (one or more files); when given, the offline Jira source reads them, not the dump.
    csv: tuple[Path, ...] = ()
    csv_date_format: str = DEFAULT_JIRA_CSV_DATE_FORMAT
    csv_delimiter: str = ","
    # A CSV of Jira accounts and their groups for offline sites whose dump holds no membership
    # (RAG_JIRA_DIRECTORY, --jira-directory): account_id,email,groups.
    directory: Path | None = None
    site: str | None = None  # JIRA_SITE, --jira-site: whose data the dump is where it does not say
    api: JiraApiSettings | None = None

    @classmethod
    def from_env(cls, env: EnvValues) -> Self:
        return cls(
            dump=env.path("RAG_JIRA_DUMP", BUNDLED_JIRA_DUMP),
            csv=env.paths("RAG_JIRA_CSV"),
            csv_date_format=env.get("RAG_JIRA_CSV_DATE_FORMAT") or DEFAULT_JIRA_CSV_DATE_FORMAT,
            csv_delimiter=env.delimiter("RAG_JIRA_CSV_DELIMITER"),
            directory=env.optional_path("RAG_JIRA_DIRECTORY"),
            site=env.get("JIRA_SITE"),
            api=JiraApiSettings.from_prefixed_env(env, "JIRA"),
        )

    @property
    def offline_site(self) -> str | None:
        """The site of the offline data: the setting, else the bundled dump's own (for it alone)."""
        bundled = self.dump == BUNDLED_JIRA_DUMP and not self.csv
        return self.site or (BUNDLED_JIRA_SITE if bundled else None)

    def inputs(self) -> tuple[InputCheck, ...]:
        if self.csv:
            found = [InputCheck(p, "Jira CSV export", "--jira-csv", "RAG_JIRA_CSV") for p in self.csv]
        else:
            found = [InputCheck(self.dump, "Jira dump", "--jira-dump", "RAG_JIRA_DUMP")]
        if self.directory is not None:
            found.append(InputCheck(self.directory, "Jira directory file", "--jira-directory", "RAG_JIRA_DIRECTORY"))
        return tuple(found)

    def api_address(self) -> tuple[str, str | None] | None:
        return (self.api.url, "JIRA_URL") if self.api is not None else None
