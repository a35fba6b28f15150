"""Who is asking: the reader a request runs as, from its identity headers and the operator's settings.

The reader is the only thing that decides what a caller may see, so it is never taken from a request body
or a tool argument, and never widened by a header the operator has not vouched for:

- ``X-User-Id`` (a Slack user id or Jira account id) and/or ``X-User-Email`` say who the caller is; with
  neither the request is refused (401).
- ``X-User-Groups`` is believed only behind a trusted proxy (``RAG_SERVE_TRUSTED_PROXY=1``), which
  authenticates users and sets their groups; otherwise a request carrying it is refused (400), so a forged
  header never widens a reader silently.
- Otherwise the principal directory (``rag_pipeline.directory``) resolves the caller: every account id and
  group of the person the email or id names. When both headers are given they must name the same person.
  A caller the directory does not know sees public documents, and those naming its id.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.serving.refusal import Refusal

USER_ID_HEADER = "X-User-Id"
EMAIL_HEADER = "X-User-Email"
GROUPS_HEADER = "X-User-Groups"
TRUSTED_PROXY_SETTING = "RAG_SERVE_TRUSTED_PROXY"

MAX_ID_CHARS = 256
MAX_GROUPS = 1000
# Ids and groups as the index writes them (U0123ABC, 5b10a2844c20165700ede21g, slack:T0:members,
# jira:site:project:KEY); anything else (spaces, quotes, control characters) is refused, not searched.
_ID = re.compile(r"^[A-Za-z0-9._:@+\-/=]+$")
_EMAIL = re.compile(r"^[^@\s,]+@[^@\s,]+$")


# identifier (email or account id) -> the person's principal, or None when the directory does not know them
DirectoryLookup = Callable[[str], Principal | None]


class IdentityError(Refusal, ValueError):
    """A request whose identity cannot be used: ``status`` is 401 (none given) or 400 (malformed, not allowed);
    ``field`` names the header at fault."""

    field: str


@dataclass(frozen=True)
class Reader:
    """The principal a request runs as, and where its groups came from (for the response and the logs)."""

    principal: Principal
    email: str | None
    groups_from: str  # "none", "directory" or "trusted-proxy"
    # May ask `whois`/`explain` about other people (the service decides: an admin-scoped token, RAG_SERVE_ADMINS).
    admin: bool = False

    def describe(self) -> dict[str, object]:
        """What a response says about its reader (the caller's own identity, so nothing is disclosed)."""
        return {
            "user_id": self.principal.user_id,
            "user_ids": list(self.principal.all_user_ids()),
            "email": self.email,
            "groups": list(self.principal.groups),
            "groups_from": self.groups_from,
        }


def _checked_id(value: str, header: str) -> str:
    value = value.strip()
    if not value or len(value) > MAX_ID_CHARS or not _ID.match(value):
        raise IdentityError(
            400, header, f"{header} must be one id of letters, digits and . _ : @ + - / = (at most {MAX_ID_CHARS})"
        )
    return value


def resolve_reader(
    user_id: str | None,
    email: str | None,
    groups: str | None,
    *,
    trusted_proxy: bool,
    directory: DirectoryLookup | None = None,
) -> Reader:
    """The reader of a request with these header values (None: header absent); ``directory`` resolves callers
    whose groups no trusted proxy gave."""
    if groups is not None and not trusted_proxy:
        raise IdentityError(
            400,
            GROUPS_HEADER,
            f"{GROUPS_HEADER} is honoured only behind a trusted proxy ({TRUSTED_PROXY_SETTING}=1 on the service); "
            "this service resolves groups itself, so send only X-User-Id or X-User-Email",
        )
    user = _checked_id(user_id, USER_ID_HEADER) if user_id is not None and user_id.strip() else None
    mail = None
    if email is not None and email.strip():
        mail = email.strip().lower()
        if len(mail) > MAX_ID_CHARS or not _EMAIL.match(mail):
            raise IdentityError(400, EMAIL_HEADER, f"{EMAIL_HEADER} must be one email address")
    if user is None and mail is None:
        raise IdentityError(
            401,
            USER_ID_HEADER,
            f"no caller identity: send {USER_ID_HEADER} (a Slack user id or Jira account id) or {EMAIL_HEADER}",
        )
    if groups is None and directory is not None:
        by_email = directory(mail) if mail is not None else None
        by_id = directory(user) if user is not None else None
        if by_email is not None and by_id is not None and set(by_email.all_user_ids()) != set(by_id.all_user_ids()):
            raise IdentityError(400, USER_ID_HEADER, f"{USER_ID_HEADER} and {EMAIL_HEADER} name two different people")
        if by_email is not None and by_id is None and user is not None:
            raise IdentityError(
                400, USER_ID_HEADER, f"{USER_ID_HEADER} is not one of the accounts of the person {EMAIL_HEADER} names"
            )
        found = by_email or by_id
        if found is not None:
            return Reader(principal=found, email=mail, groups_from="directory")
    group_list: tuple[str, ...] = ()
    if groups is not None:
        group_list = tuple(dict.fromkeys(_checked_id(g, GROUPS_HEADER) for g in groups.split(",") if g.strip()))
        if len(group_list) > MAX_GROUPS:
            raise IdentityError(400, GROUPS_HEADER, f"{GROUPS_HEADER} lists more than {MAX_GROUPS} groups")
    return Reader(
        principal=Principal(user_id=user, groups=group_list),
        email=mail,
        groups_from="trusted-proxy" if groups is not None else "none",
    )
