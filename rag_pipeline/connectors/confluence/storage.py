"""Confluence storage format (the XHTML of ``body.storage``) as clean text for chunking and search.

What is kept and how:

* paragraphs, headings, list items, quotes and layout cells become lines (list items ``- `` or ``1. ``);
* tables become one line per row, cells joined by `` | `` (a cell's own line breaks become spaces);
* the ``code`` and ``noformat`` macros keep their ``ac:plain-text-body`` verbatim (CDATA, indentation and all),
  fenced with ```` ``` ```` like Jira's code blocks; other macros are named, ``[info] …`` / ``[panel: Title] …``,
  keeping their rich-text body; macros without a body are named alone (``[toc]``, ``[jira: OPS-12]``);
* user mentions (``ri:user`` by ``ri:account-id``, ``ri:username`` or ``ri:userkey``) become ``@<display name>``
  where the caller knows the name, else ``@<id>``; page links keep their text (or the page's title);
  web links keep their text and the URL in parentheses when the two differ;
* attachments (links, images, ``view-file`` macros) are named: ``[attachment: file.pdf]``;
* emoticons, placeholders, macro parameters and ``script``/``style`` are dropped; entities are decoded.

Storage format is input from outside: the stdlib ``html.parser`` reads malformed XHTML (unclosed tags, stray
``</p>``, bad entities) without raising, CDATA is unwrapped beforehand (newer Pythons treat ``<![CDATA[`` outside
SVG/MathML as a bogus comment), and :func:`storage_text` never raises: a body nothing can be read from is a
:class:`~rag_pipeline.sources.problems.RecordProblem` instead.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser

from rag_pipeline.sources.problems import RecordProblem, describe
from rag_pipeline.text.clean import clean_text, drop_invisible

# An unclosed CDATA section runs to the end of the body, as an XML parser that recovers would read it.
_CDATA = re.compile(r"<!\[CDATA\[(.*?)(?:\]\]>|\Z)", re.S)
_SPACE = re.compile(r"\s+")
# Block elements: their start and end end the current line.
_BLOCKS = frozenset(
    {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "hr", "section", "article",
     "ac:layout", "ac:layout-section", "ac:layout-cell", "ac:rich-text-body", "ac:task-list", "dl", "dt", "dd",
     "ul", "ol", "table", "tbody", "thead", "tfoot", "figure", "figcaption"}
)  # fmt: skip
_DROPPED = frozenset({"script", "style", "ac:emoticon", "ac:placeholder", "ac:task-id", "ac:task-uuid"})
_VERBATIM_MACROS = frozenset({"code", "noformat"})
# Parameters worth showing next to a macro's name ([panel: Title], [jira: OPS-12]); the rest is configuration.
_SHOWN_PARAMETERS = ("title", "key", "name")
_FENCE = "```"


@dataclass
class _Macro:
    name: str
    parameters: dict[str, str] = field(default_factory=dict)
    parameter: str | None = None  # the ac:parameter being read
    verbatim: list[str] = field(default_factory=list)  # ac:plain-text-body
    has_body: bool = False


@dataclass
class _Link:
    target: str | None = None  # "@name", "[attachment: f]", a page title or an href
    href: str | None = None
    text: list[str] = field(default_factory=list)


class _StorageParser(HTMLParser):
    """Collects lines from storage-format XHTML; tag names arrive lower-cased with their ``ac:``/``ri:``
    prefixes."""

    def __init__(self, users: Mapping[str, str]) -> None:
        super().__init__(convert_charrefs=True)
        self.users = users
        self.lines: list[str] = []
        self.inline: list[str] = []
        self.dropped = 0  # depth inside dropped elements
        self.macros: list[_Macro] = []
        self.links: list[_Link] = []
        self.lists: list[list[int]] = []  # per open list: [counter] for ol, [] for ul
        self.rows: list[list[str]] = []  # open table rows' cells
        self.cells: list[list[str]] = []  # open cells' text
        self.plain_body = 0  # depth inside ac:plain-text-body
        self.task_done: list[bool] = []
        self.label: str | None = None  # a macro label alone on the current line

    # --- output -----------------------------------------------------------------------------------
    def _emit(self, text: str) -> None:
        if self.links:
            self.links[-1].text.append(text)
        elif self.cells:
            self.cells[-1].append(text)
        else:
            self.inline.append(text)

    def _break(self) -> None:
        """End the current line (inside a table cell: a space, the row stays one line)."""
        if self.cells:
            self.cells[-1].append(" ")
            return
        line = _SPACE.sub(" ", "".join(self.inline)).strip()
        if line and line == self.label:
            return  # a macro's label waits for its body's first line: "[info] Be careful"
        self.inline, self.label = [], None
        if line:
            self.lines.append(line)

    def _block(self, text: str) -> None:
        """A finished block (a macro's verbatim body, a table row) as its own line(s)."""
        if self.cells:
            self.cells[-1].append(" " + _SPACE.sub(" ", text) + " ")
            return
        self._break()
        if text.strip():
            self.lines.append(text)

    # --- parser callbacks ---------------------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {k: v or "" for k, v in attrs}
        if self.dropped or tag in _DROPPED:
            # Only dropped elements nest the count: their end tags are the ones that undo it.
            self.dropped += tag in _DROPPED
            return
        if self.plain_body:
            return
        macro = self.macros[-1] if self.macros else None
        if tag in ("ac:structured-macro", "ac:macro"):
            self._break()
            self.macros.append(_Macro((attr.get("ac:name") or "macro").lower()))
        elif tag == "ac:parameter" and macro is not None:
            macro.parameter = (attr.get("ac:name") or "").lower()
        elif tag == "ac:plain-text-body":
            self.plain_body += 1
        elif tag == "ac:rich-text-body" and macro is not None:
            macro.has_body = True
            self._break()
            self.label = self._macro_label(macro)
            self.inline.append(self.label + " ")
        elif tag in ("ac:link", "a"):
            self.links.append(_Link(href=attr.get("href") if tag == "a" else None))
        elif tag.startswith("ri:"):
            self._resource(tag, attr)
        elif tag == "ac:image":
            self.links.append(_Link())
        elif tag in ("ul", "ol"):
            self._break()
            self.lists.append([0] if tag == "ol" else [])
        elif tag == "li":
            self._break()
            if self.lists and self.lists[-1]:
                self.lists[-1][0] += 1
                self.inline.append(f"{self.lists[-1][0]}. ")
            else:
                self.inline.append("- ")
        elif tag == "tr":
            self._break()
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cells.append([])
        elif tag == "ac:task":
            self._break()
            self.task_done.append(False)
        elif tag == "br":
            self._break()
        elif tag == "time" and attr.get("datetime"):
            self._emit(attr["datetime"])
        elif tag in _BLOCKS:
            self._break()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        # <ri:user ... />, <br/>, <ac:emoticon/>: a start that no end follows.
        if tag in _DROPPED or self.dropped:
            return
        self.handle_starttag(tag, attrs)
        if tag in ("ac:structured-macro", "ac:macro", "ac:image", "ac:link", "a"):
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.dropped:
            if tag in _DROPPED:
                self.dropped -= 1
            return
        if self.plain_body and tag != "ac:plain-text-body":
            return
        macro = self.macros[-1] if self.macros else None
        if tag in ("ac:structured-macro", "ac:macro") and macro is not None:
            self.macros.pop()
            self._end_macro(macro)
        elif tag == "ac:parameter" and macro is not None:
            macro.parameter = None
        elif tag == "ac:plain-text-body":
            self.plain_body = max(0, self.plain_body - 1)
        elif tag == "ac:rich-text-body":
            self.label = None  # an empty body: the label stands alone
            self._break()
        elif tag in ("ac:link", "a", "ac:image") and self.links:
            self._end_link(self.links.pop())
        elif tag in ("ul", "ol"):
            self._break()
            if self.lists:
                self.lists.pop()
        elif tag in ("td", "th") and self.cells:
            cell = _SPACE.sub(" ", "".join(self.cells.pop())).strip()
            if self.rows:
                self.rows[-1].append(cell)
            else:
                self._emit(cell + " ")
        elif tag == "tr" and self.rows:
            cells = self.rows.pop()
            if any(cells):
                self._block(" | ".join(cells))
        elif tag == "ac:task-status" and self.task_done:
            pass
        elif tag == "ac:task" and self.task_done:
            self.task_done.pop()
            self._break()
        elif tag == "li" or tag in _BLOCKS:
            self._break()

    def handle_data(self, data: str) -> None:
        if self.dropped:
            return
        macro = self.macros[-1] if self.macros else None
        if self.plain_body and macro is not None:
            macro.verbatim.append(data)
            return
        if macro is not None and macro.parameter is not None:
            macro.parameters[macro.parameter] = macro.parameters.get(macro.parameter, "") + data
            return
        if self.task_done and self._in_task_status(data):
            return
        self._emit(data)

    def _in_task_status(self, data: str) -> bool:
        # <ac:task-status>complete</ac:task-status>: becomes the task's box, not text.
        status = data.strip().lower()
        if status in ("complete", "incomplete") and not "".join(self.inline).strip():
            self.inline.append("[x] " if status == "complete" else "[ ] ")
            return True
        return False

    # --- macros, links, resources ---------------------------------------------------------------------
    def _macro_label(self, macro: _Macro) -> str:
        shown = next((macro.parameters[p].strip() for p in _SHOWN_PARAMETERS if macro.parameters.get(p)), "")
        return f"[{macro.name}: {_SPACE.sub(' ', shown)}]" if shown else f"[{macro.name}]"

    def _end_macro(self, macro: _Macro) -> None:
        body = "".join(macro.verbatim)
        if macro.name in _VERBATIM_MACROS or (body and not macro.has_body):
            if macro.name in _VERBATIM_MACROS:
                language = macro.parameters.get("language", "").strip()
                title = macro.parameters.get("title", "").strip()
                head = f"{title}\n" if title else ""
                self._block(f"{head}{_FENCE}{language}\n{body.strip(chr(10))}\n{_FENCE}")
            else:
                self._block(f"{self._macro_label(macro)} {body.strip()}")
        elif macro.name == "view-file" or macro.name.startswith("view"):
            name = macro.parameters.get("name", "").strip()
            self._emit(f" [attachment: {name}] " if name else "")
        elif not macro.has_body:
            self._block(self._macro_label(macro))
        else:
            self._break()

    def _resource(self, tag: str, attr: dict[str, str]) -> None:
        """``ri:*`` elements name what an enclosing link, image or macro parameter points at."""
        macro = self.macros[-1] if self.macros else None
        if tag == "ri:attachment" and macro is not None and macro.parameter is not None and not self.links:
            macro.parameters.setdefault(macro.parameter, attr.get("ri:filename", ""))
            return
        if not self.links:
            if tag == "ri:user":
                self._emit(self._mention(attr))
            return
        link = self.links[-1]
        if tag == "ri:user":
            link.target = self._mention(attr)
        elif tag == "ri:attachment":
            link.target = f"[attachment: {attr.get('ri:filename') or '?'}]"
        elif tag in ("ri:page", "ri:blog-post"):
            link.target = attr.get("ri:content-title") or None
        elif tag == "ri:url":
            link.href = attr.get("ri:value") or link.href
        elif tag == "ri:space":
            link.target = attr.get("ri:space-key") or None

    def _mention(self, attr: Mapping[str, str]) -> str:
        for key in ("ri:account-id", "ri:userkey", "ri:username"):
            found = attr.get(key)
            if found:
                name = self.users.get(found) or found
                return f"@{_SPACE.sub(' ', name).strip()}"
        return "@unknown"

    def _end_link(self, link: _Link) -> None:
        text = _SPACE.sub(" ", "".join(link.text)).strip()
        if link.target and link.target.startswith(("@", "[attachment:")):
            shown = link.target if not text or link.target.startswith("[") else f"@{text.lstrip('@')}"
        elif link.href and link.href.startswith(("http://", "https://", "mailto:")):
            shown = f"{text} ({link.href})" if text and text != link.href else link.href
        else:
            shown = text or link.target or ""
        if shown:
            self._emit(f" {shown} ")

    def finish(self) -> list[str]:
        self.close()
        for link in reversed(self.links):  # unclosed links still give their text
            self._end_link(link)
        self.links = []
        while self.cells:
            cell = _SPACE.sub(" ", "".join(self.cells.pop())).strip()
            (self.rows[-1] if self.rows else self.inline).append(cell)
        while self.rows:
            cells = self.rows.pop()
            if any(cells):
                self._block(" | ".join(cells))
        while self.macros:
            self._end_macro(self.macros.pop())
        self._break()
        return self.lines


@dataclass(frozen=True)
class StorageText:
    """A body as text, and the problem that kept it from being read (None when it was)."""

    text: str
    problem: RecordProblem | None = None


def storage_to_text(value: str, users: Mapping[str, str] | None = None) -> str:
    """Storage-format XHTML as clean text (``users``: account id, user key or username -> display name, for
    mentions). Raises on input no text can be read from; :func:`storage_text` is the reader's entry point."""
    if not isinstance(value, str):
        raise TypeError(f"a storage body is text, not {type(value).__name__}")
    source = _CDATA.sub(lambda m: html.escape(m.group(1), quote=False), value)
    parser = _StorageParser(users or {})
    parser.feed(source)
    return _clean_lines(parser.finish())


def storage_text(value: object, where: str, users: Mapping[str, str] | None = None) -> StorageText:
    """:func:`storage_to_text`, never raising: a body that cannot be read is a problem naming ``where``, and
    what text can be taken from it (tags stripped) is kept rather than lose the page."""
    if value is None or value == "":
        return StorageText("")
    try:
        return StorageText(storage_to_text(value, users))  # type: ignore[arg-type]
    except Exception as exc:  # RecursionError, a non-string body...: this body's problem alone
        fallback = ""
        if isinstance(value, str):
            try:
                fallback = clean_text(html.unescape(re.sub(r"<[^>]*>", " ", value)))
            except Exception:  # pragma: no cover - the crudest reading failing too leaves no text
                fallback = ""
        return StorageText(fallback, RecordProblem(where, f"storage format not read: {describe(exc)}"))


def _clean_lines(lines: list[str]) -> str:
    """Clean each line (code fences verbatim but for invisible characters), one line per block."""
    out: list[str] = []
    for line in lines:
        if _FENCE in line:
            out.append(drop_invisible(line.replace("\r\n", "\n").replace("\r", "\n")).strip("\n"))
        else:
            cleaned = clean_text(line)
            if cleaned:
                out.append(cleaned)
    return "\n".join(out)
