"""Build known-item retrieval eval sets (BEIR layout) from Debian's translated man pages.

Each man page gives one query and one document, like the Slack set where the opening question is the
query and its thread the answer:

* the QUERY is the one-line description of the NAME section (the text after ``\\-``), in the target
  language: ``ls \\- ディレクトリの内容をリスト表示する`` gives ``ディレクトリの内容をリスト表示する``;
* the DOCUMENT is the rest of the page as plain text (roff requests, escapes and comments stripped),
  without the NAME section and without any sentence that contains the whole description; its title is the
  page name (``ls(1)``);
* the page is relevant to its own query only (score 1), so ``qrels/test.tsv`` (the split
  ``rag-pipeline bench --beir`` scores by default) has one line per query.

Pages are dropped when they are symlinks, ``.so`` redirects or byte-identical copies of another page; when
no NAME description can be parsed; when the description is under 4 characters, mostly ASCII or has fewer
than 2 characters in the target script; when two pages share a description (normalized) or a body; when
the body is under 200 characters; or when the description still occurs in the body after the sentence
removal. Above 3,000 pages a deterministic sample (lowest SHA-256 of the id) is kept.

Input: a folder holding the packages extracted with ``dpkg-deb -R PKG.deb FOLDER/PKG`` (``-R`` keeps
``DEBIAN/control``, which gives the package name and version) and/or the ``.deb`` files themselves (those
not yet extracted are unpacked into a temporary folder with ``dpkg-deb -R``). Per language, the packages
used are the dedicated ``manpages-<lang>*`` packages when the folder has any, otherwise every package that
ships pages under ``usr/share/man/<lang>/`` (Debian 12 has no ``manpages-ko``; its Korean pages come from
man-db, passwd, login, psmisc and xz-utils)::

    mkdir -p /tmp/mp/debs
    (cd /tmp/mp/debs && apt-get download manpages-ja manpages-ja-dev man-db passwd login psmisc xz-utils &&
     for deb in *.deb; do dpkg-deb -R "$deb" "../extracted/${deb%%_*}"; done)
    .venv/bin/python -m tools.build_manpage_eval_sets /tmp/mp/extracted eval_sets   # from the repository root

writes ``eval_sets/manpages_ja/`` and ``eval_sets/manpages_ko/`` (``corpus.jsonl``, ``queries.jsonl``,
``qrels/test.tsv``, ``README.md`` with sources, licences, attribution and counts). Every corpus row keeps
the page's own copyright and permission notice (its leading roff comment) in ``metadata.notice`` and a
licence label in ``metadata.licence``.
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import hashlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIN_DESCRIPTION_CHARS = 4
MIN_BODY_CHARS = 200
MAX_PAGES = 3000
MIN_SCRIPT_SHARE = 0.15
MIN_SCRIPT_CHARS = 2

NAME_HEADINGS = {"NAME", "名前", "名称", "名稱", "이름", "NAME(名称)", "NAME(名稱)"}
SCRIPTS: dict[str, tuple[tuple[int, int], ...]] = {
    # Hiragana, Katakana (+ phonetic extensions, half-width), CJK ideographs (+ extension A)
    "ja": ((0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF)),
    # Hangul syllables and jamo
    "ko": ((0xAC00, 0xD7A3), (0x1100, 0x11FF), (0x3130, 0x318F)),
    "zh": ((0x3400, 0x4DBF), (0x4E00, 0x9FFF)),
}
LANGUAGE_NAMES = {"ja": "Japanese", "ko": "Korean", "zh": "Chinese"}
NAME_HEADING_SHOWN = {"ja": "名前", "ko": "이름", "zh": "名称"}

# groff special characters (\(xx and \[xx]) that carry meaning in plain text; unknown ones are dropped.
SPECIAL_CHARS = {
    "aq": "'", "dq": '"', "em": "—", "en": "–", "hy": "-", "bu": "•", "co": "©", "rg": "®", "tm": "™",
    "lq": "“", "rq": "”", "oq": "‘", "cq": "’", "**": "*", "mu": "×", "di": "÷", "+-": "±", "<=": "≤",
    ">=": "≥", "!=": "≠", "->": "→", "<-": "←", "ua": "↑", "da": "↓", "ti": "~", "ha": "^", "rs": "\\",
    "sl": "/", "ba": "|", "br": "│", "bv": "|", "ul": "_", "ru": "_", "ga": "`", "aa": "´", "de": "°",
    "sc": "§", "dg": "†", "ct": "¢", "Fo": "«", "Fc": "»", "fo": "‹", "fc": "›", "pl": "+", "mi": "−",
    "eq": "=", "~~": "≈", "==": "≡", "if": "∞", "pi": "π", "ss": "ß", "12": "½", "14": "¼", "34": "¾",
    "sq": "□", "ci": "○", "lh": "☜", "rh": "☞", "<>": "↔", "ap": "~", "tf": "∴", "or": "|", "Eu": "€",
    "eu": "€", "Po": "£", "Ye": "¥", "ps": "¶", "la": "⟨", "ra": "⟩", "at": "@", "sh": "#", "dd": "‡",
    "no": "¬", "fm": "′", "sd": "″", "OK": "✓", "lB": "[", "rB": "]", "lC": "{", "rC": "}", "cr": "",
}  # fmt: skip
# Predefined strings (\*x, \*(xx): man(7)'s and the common pod2man preamble's.
DEFAULT_STRINGS = {
    "lq": "“", "rq": "”", "R": "®", "Tm": "™", "S": "", "Aq": "'", "C'": "'", "C`": "`", "C+": "C++",
    "-": "—", 'L"': "“", 'R"': "”", "PI": "π", "ga": "`", "aq": "'",
}  # fmt: skip
ESCAPE_DROPPED = set("&|^,/%:)drpauEyt{}")
ESCAPE_SPACE = set(" ~0")
ESCAPE_DELIMITED = set("hvwlLNDbXoSRCZxYBAV")

MAN_FONT_ALTERNATING = {"BR", "RB", "BI", "IB", "IR", "RI"}
MAN_FONT_SINGLE = {"B", "I", "SM", "SB", "R", "Em", "Sy", "Li"}
PARAGRAPH_BREAK = {"PP", "LP", "P", "HP", "sp", "Pp", "Lp", "ne", "bp", "El", "Bl", "Ed", "Sp"}
LINE_BREAK = {"br", "It"}
NO_FILL_ON = {"nf", "EX", "Vb"}
NO_FILL_OFF = {"fi", "EE", "Ve"}
SKIPPED_BLOCKS = {"ig": "..", "de": "..", "am": "..", "EQ": ".EN", "PS": ".PE", "TS": ".TE"}
# mdoc inline macros: text prefix/suffix around their arguments ("" when the macro name is just dropped).
MDOC_WRAP = {"Op": ("[", "]"), "Oo": ("[", ""), "Oc": ("", "]"), "Pq": ("(", ")"), "Po": ("(", ""),
             "Pc": ("", ")"), "Dq": ("“", "”"), "Do": ("“", ""), "Dc": ("", "”"), "Sq": ("‘", "’"),
             "So": ("‘", ""), "Sc": ("", "’"), "Qq": ('"', '"'), "Ql": ("‘", "’"), "Bq": ("[", "]"),
             "Bo": ("[", ""), "Bc": ("", "]"), "Aq": ("<", ">"), "Ao": ("<", ""), "Ac": ("", ">"),
             "Brq": ("{", "}"), "Bro": ("{", ""), "Brc": ("", "}")}  # fmt: skip
MDOC_CALLABLE = set(MDOC_WRAP) | {
    "Ad", "An", "Ar", "At", "Bsx", "Bx", "Cd", "Cm", "Dv", "Dx", "Em", "Er", "Ev", "Fa", "Fl", "Fn", "Fr",
    "Ft", "Fx", "Ic", "Li", "Lk", "Ms", "Mt", "Nm", "No", "Ns", "Nx", "Ox", "Pa", "Pf", "Sx", "Sy", "Tn",
    "Ux", "Va", "Vt", "Xr", "Ta", "Ap", "St", "Ot", "Xo", "Xc", "Fd", "In", "Lb",
}  # fmt: skip

LICENCE_MARKER = re.compile(r"%%%LICENSE_START\(([^)]*)\)")
SPDX = re.compile(r"SPDX-License-Identifier:\s*(\S[^\n]*)")
LICENCE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("GFDL", re.compile(r"GNU Free Documentation License", re.I)),
    ("GPL", re.compile(r"GNU (Library |Lesser )?General Public License|\bGPL|GNU 一般公衆利用許諾", re.I)),
    ("VERBATIM", re.compile(r"Permission is granted to (make and distribute|copy and distribute) verbatim", re.I)),
    ("BSD", re.compile(r"Redistribution and use in source and binary forms|\bBSD (style )?licen[cs]e", re.I)),
    ("PUBLIC_DOMAIN", re.compile(r"public domain", re.I)),
    ("MIT", re.compile(r"Permission is hereby granted, free of charge|Permission to use, copy, modify", re.I)),
    ("PERMISSIVE_MISC", re.compile(r"may be (freely )?(used|copied|distributed|redistributed)|freely distrib", re.I)),
    ("OPL", re.compile(r"Open Publication License", re.I)),
    ("FREE_SOFTWARE_UNSPECIFIED", re.compile(r"free software|free documentation", re.I)),
)


# ----------------------------------------------------------------------------------------------------------
# Packages
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Package:
    """One extracted Debian binary package."""

    name: str
    version: str
    source: str
    homepage: str
    maintainer: str
    root: Path

    @property
    def copyright_file(self) -> Path:
        return self.root / "usr/share/doc" / self.name / "copyright"


def _control_fields(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith((" ", "\t")):
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    return fields


def discover_packages(folder: Path, scratch: Path) -> list[Package]:
    """Packages under ``folder``: extracted ones (``DEBIAN/control``) and ``.deb`` files not yet extracted."""
    roots = {p.parent.parent for p in folder.glob("*/DEBIAN/control")}
    extracted_names = {_control_fields((r / "DEBIAN/control").read_text("utf-8")).get("Package") for r in roots}
    for deb in sorted(folder.glob("*.deb")):
        if deb.name.split("_", 1)[0] in extracted_names:
            continue
        target = scratch / deb.stem
        subprocess.run(["dpkg-deb", "-R", str(deb), str(target)], check=True)
        roots.add(target)
    packages = []
    for root in sorted(roots):
        fields = _control_fields((root / "DEBIAN/control").read_text("utf-8"))
        name = fields["Package"]
        packages.append(
            Package(
                name=name,
                version=fields.get("Version", "?"),
                source=fields.get("Source", name).split()[0],
                homepage=fields.get("Homepage", ""),
                maintainer=fields.get("Maintainer", ""),
                root=root,
            )
        )
    return sorted(packages, key=lambda p: p.name)


def language_dirs(package: Package, lang: str) -> list[Path]:
    base = package.root / "usr/share/man"
    return sorted(d for d in base.glob(f"{lang}*") if d.is_dir() and re.fullmatch(rf"{lang}([_.@].*)?", d.name))


def packages_for(packages: list[Package], lang: str) -> list[Package]:
    """The dedicated ``manpages-<lang>*`` packages if present, else every package with pages in ``lang``."""
    shipping = [p for p in packages if language_dirs(p, lang)]
    dedicated = [p for p in shipping if p.name == f"manpages-{lang}" or p.name.startswith(f"manpages-{lang}-")]
    return dedicated or shipping


# ----------------------------------------------------------------------------------------------------------
# roff → plain text
# ----------------------------------------------------------------------------------------------------------


def _delimited(text: str, start: int) -> int:
    """Index just past an escape argument delimited by ``text[start]`` (``\\w'..'``, ``\\h'..'``)."""
    if start >= len(text):
        return start
    delimiter = text[start]
    end = text.find("]" if delimiter == "[" else delimiter, start + 1)
    return len(text) if end < 0 else end + 1


def _name_arg(text: str, start: int) -> tuple[str, int]:
    """A roff name argument at ``start``: ``x``, ``(xx`` or ``[name]``; returns (name, index past it)."""
    if start >= len(text):
        return "", start
    if text[start] == "(":
        return text[start + 1 : start + 3], start + 3
    if text[start] == "[":
        end = text.find("]", start + 1)
        end = len(text) if end < 0 else end
        return text[start + 1 : end], end + 1
    return text[start], start + 1


def _special(name: str) -> str:
    if name in SPECIAL_CHARS:
        return SPECIAL_CHARS[name]
    match = re.fullmatch(r"u([0-9A-Fa-f]{4,6})(_[0-9A-Fa-f]{4,6})*", name)
    if match:
        return "".join(chr(int(part.lstrip("u"), 16)) for part in name.split("_"))
    if name.startswith("char") and name[4:].isdigit():
        return chr(int(name[4:]))
    return ""


def unescape(text: str, strings: dict[str, str]) -> str:
    """Plain text of one roff input line: fonts, sizes and motions removed, specials and strings replaced.

    A trailing ``\\c`` is kept as the marker ``\\x00`` (the next line continues this one without a break).
    """
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        if i + 1 >= len(text):
            break
        code = text[i + 1]
        i += 2
        if code in '"#':
            break
        if code in "fF":
            _, i = _name_arg(text, i)
        elif code == "(" or code == "[":
            name, i = _name_arg(text, i - 1)
            out.append(_special(name))
        elif code == "*":
            name, i = _name_arg(text, i)
            out.append(strings.get(name, ""))
        elif code == "n":
            if i < len(text) and text[i] in "+-":
                i += 1
            _, i = _name_arg(text, i)
        elif code in "gkmMO$":
            _, i = _name_arg(text, i)
        elif code == "s":
            if i < len(text) and text[i] in "+-":
                i += 1
            if i < len(text) and text[i] in "(['":
                if text[i] == "(":
                    i += 3
                else:
                    i = _delimited(text, i)
            else:
                while i < len(text) and text[i].isdigit():
                    i += 1
        elif code in ESCAPE_DELIMITED:
            i = _delimited(text, i)
        elif code == "z":
            pass  # zero-width: the next character is still printed
        elif code == "c":
            out.append("\x00")
        elif code in "e\\E":
            out.append("\\")
        elif code == "-":
            out.append("-")
        elif code == "'":
            out.append("'")
        elif code == "`":
            out.append("`")
        elif code == ".":
            out.append(".")
        elif code in ESCAPE_SPACE:
            out.append(" ")
        elif code in ESCAPE_DROPPED:
            pass
        else:
            out.append(code)
    return "".join(out)


def split_args(text: str) -> list[str]:
    """roff request arguments: blank-separated, ``"quoted with spaces"``, ``""`` inside quotes is ``"``."""
    args: list[str] = []
    i = 0
    while i < len(text):
        while i < len(text) and text[i] in " \t":
            i += 1
        if i >= len(text):
            break
        if text[i] == '"':
            i += 1
            current = []
            while i < len(text):
                if text[i] == '"':
                    if i + 1 < len(text) and text[i + 1] == '"':
                        current.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                if text[i] == "\\" and i + 1 < len(text):
                    current.append(text[i : i + 2])
                    i += 2
                    continue
                current.append(text[i])
                i += 1
            args.append("".join(current))
        else:
            start = i
            while i < len(text) and text[i] not in " \t":
                i += 2 if text[i] == "\\" else 1
            args.append(text[start:i])
    return args


def _is_wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in "WF"


def join_fill(left: str, right: str) -> str:
    """Join two filled lines: no space between two wide (CJK) characters, one space otherwise."""
    if not left:
        return right
    if not right:
        return left
    if left.endswith("\x00"):
        return left[:-1] + right
    if _is_wide(left[-1]) and _is_wide(right[0]):
        return left + right
    return left.rstrip() + " " + right.lstrip()


@dataclass
class Section:
    """A page section: its heading and paragraphs of plain text."""

    heading: str
    paragraphs: list[str] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)


class RoffText:
    """A small man(7)/mdoc(7) to plain-text converter: enough for retrieval text, not for typesetting."""

    def __init__(self) -> None:
        self.strings = dict(DEFAULT_STRINGS)
        self.sections: list[Section] = [Section("")]
        self.current = ""
        self.no_fill = False
        self.tag_pending = False
        self.url: list[str] = []
        self.conditions: list[bool] = []
        self._table_data = False

    # paragraph handling ------------------------------------------------------------------------------
    def flush(self) -> None:
        text = self.current.replace("\x00", "").strip()
        if text:
            self.sections[-1].paragraphs.append(re.sub(r"[ \t]+", " ", text) if not self.no_fill else text)
        self.current = ""

    def add_text(self, text: str) -> None:
        if self.no_fill:
            self.current = (self.current + "\n" if self.current else "") + text.replace("\x00", "")
        else:
            self.current = join_fill(self.current, text.strip() if not text.endswith("\x00") else text.lstrip())
        if self.tag_pending:
            self.tag_pending = False
            self.flush()

    def heading(self, text: str) -> None:
        self.flush()
        self.sections.append(Section(re.sub(r"\s+", " ", text).strip().strip('"').strip()))

    # conditionals ------------------------------------------------------------------------------------
    @staticmethod
    def _condition(text: str) -> tuple[bool, str]:
        """Evaluate a ``.if``/``.ie`` condition as nroff would (``n`` true, ``t`` false, anything else false)."""
        text = text.lstrip()
        negate = text.startswith("!")
        if negate:
            text = text[1:]
        if text[:1] in "nt" and (len(text) == 1 or text[1] in " \t\\"):
            value, rest = text[0] == "n", text[1:]
        else:
            # String comparisons ('a'b'), registers (\n(.g), expressions: skip the condition, call it false.
            match = re.match(r"('([^']*)'([^']*)'|\S+)", text)
            value, rest = False, text[match.end() :] if match else ""
        return value != negate, rest

    # main loop ---------------------------------------------------------------------------------------
    def convert(self, source: str) -> list[Section]:
        lines = source.replace("\r\n", "\n").split("\n")
        # Escaped newlines join lines before anything else.
        joined: list[str] = []
        buffer = ""
        for line in lines:
            if line.endswith("\\") and not line.endswith("\\\\"):
                buffer += line[:-1]
                continue
            joined.append(buffer + line)
            buffer = ""
        if buffer:
            joined.append(buffer)
        skip_until: str | None = None
        skip_depth = 0
        for line in joined:
            if skip_depth:
                skip_depth += line.count("\\{") - line.count("\\}")
                continue
            if skip_until is not None:
                if line.strip() == skip_until or line.strip().startswith(skip_until + " "):
                    skip_until = None
                elif skip_until == ".TE":
                    self._table_row(line)
                continue
            result = self.line(line)
            if isinstance(result, tuple):
                kind, value = result
                if kind == "until":
                    skip_until = value
                elif kind == "depth":
                    skip_depth = int(value)
        self.flush()
        return self.sections

    def _table_row(self, line: str) -> None:
        # tbl: options end with ';', formats end with '.'; data rows are tab-separated cells.
        stripped = line.strip()
        if not self._table_data:
            if stripped.endswith(".") and re.fullmatch(r"[a-zA-Z0-9|.,;()\s^_=\-]*", stripped):
                self._table_data = True
            return
        if stripped in {"_", "=", "T{", "T}"} or (stripped.startswith(".") and not stripped.startswith(".\\")):
            return
        cells = [unescape(c, self.strings).strip() for c in line.replace("T{", "").replace("T}", "").split("\t")]
        text = " ".join(c for c in cells if c)
        if text:
            self.flush()
            self.add_text(text)
            self.flush()

    def line(self, line: str) -> tuple[str, str] | None:
        if line.startswith(('.\\"', "'\\\"", '\\"', ".\\#", "\\#")) or line.strip() in {".", "'"}:
            return None
        if line.startswith("\\}") or line.strip() == ".\\}":
            return None
        if not line.startswith((".", "'")):
            if not line.strip():
                if not self.no_fill:
                    self.flush()
                else:
                    self.current += "\n"
                return None
            self.add_text(unescape(line, self.strings))
            return None
        body = line[1:].lstrip()
        match = re.match(r"(\S+)\s*(.*)$", body)
        if not match:
            return None
        request, rest = match.group(1), match.group(2)
        if '\\"' in rest:
            rest = rest[: rest.index('\\"')]
        if request in {"if", "ie", "el"}:
            if request == "el":
                value = not (self.conditions.pop() if self.conditions else True)
                remainder = rest
            else:
                value, remainder = self._condition(rest)
                if request == "ie":
                    self.conditions.append(value)
            remainder = remainder.strip()
            opens = remainder.count("\\{") - remainder.count("\\}")
            if not value:
                return ("depth", str(opens)) if opens > 0 else None
            remainder = remainder.replace("\\{", "").replace("\\}", "").strip()
            if remainder:
                return self.line(remainder)
            return None
        if request in SKIPPED_BLOCKS:
            if request == "TS":
                self.flush()
                self._table_data = False
            end = SKIPPED_BLOCKS[request]
            if request in {"de", "am"}:
                args = split_args(rest)
                end = "." + args[1] if len(args) > 1 else ".."
            return ("until", end)
        self.request(request, rest)
        return None

    def request(self, request: str, rest: str) -> None:
        args = split_args(rest)
        text_args = [unescape(a, self.strings) for a in args]
        if request in {"SH", "SS", "Sh", "Ss"}:
            self.no_fill = False
            self.heading(" ".join(text_args))
        elif request in PARAGRAPH_BREAK:
            self.flush()
            if request == "It" and text_args:
                self.add_text(self._mdoc(args))
        elif request in LINE_BREAK:
            self.flush()
            if request == "It" and args:
                self.add_text(self._mdoc(args))
        elif request in {"TP", "TQ"}:
            self.flush()
            self.tag_pending = True
        elif request == "IP":
            self.flush()
            if text_args and text_args[0].strip():
                self.add_text(text_args[0])
                self.flush()
        elif request in NO_FILL_ON:
            self.flush()
            self.no_fill = True
        elif request in NO_FILL_OFF:
            self.flush()
            self.no_fill = False
        elif request == "Bd":
            self.flush()
            self.no_fill = "-literal" in args or "-unfilled" in args
        elif request in MAN_FONT_ALTERNATING:
            self.add_text("".join(text_args))
        elif request in MAN_FONT_SINGLE and request not in MDOC_CALLABLE:
            if text_args:
                self.add_text(" ".join(text_args))
        elif request in {"ds", "as"} and args:
            name = args[0]
            value = rest[len(name) :].lstrip()
            value = value[1:] if value.startswith('"') else value
            value = unescape(value, self.strings)
            self.strings[name] = self.strings.get(name, "") + value if request == "as" else value
        elif request in {"UR", "MT"}:
            self.url = [text_args[0] if text_args else ""]
        elif request in {"UE", "ME"}:
            if self.url and self.url[0]:
                self.add_text(f"<{self.url[0]}>{''.join(text_args)}")
            self.url = []
        elif request == "OP" and text_args:
            self.add_text("[" + " ".join(text_args) + "]")
        elif request == "SY":
            self.flush()
            self.add_text(" ".join(text_args))
        elif request in {"Nm", "Nd"} or request in MDOC_CALLABLE:
            text = self._mdoc([request, *args])
            if text:
                self.add_text(text)
        # Everything else (.TH .RS .RE .in .ti .ad .na .hy .ft .PD .UC .Dd .Dt .Os .nr .so ...) has no text.

    def _mdoc(self, tokens: list[str]) -> str:
        """Render an mdoc line's macros and arguments (``.Fl x Ar file`` → ``-x file``)."""
        parts: list[str] = []
        closers: list[str] = []
        no_space = False
        i = 0
        while i < len(tokens):
            token = tokens[i]
            i += 1
            text = ""
            if token in MDOC_CALLABLE or token in {"Nm", "Nd"}:
                if token == "Fl":
                    nxt = tokens[i] if i < len(tokens) and tokens[i] not in MDOC_CALLABLE else ""
                    text = "-" + unescape(nxt, self.strings)
                    i += 1 if nxt else 0
                elif token == "Xr" and i + 1 < len(tokens):
                    text = f"{unescape(tokens[i], self.strings)}({tokens[i + 1]})"
                    i += 2
                elif token == "Fn" and i < len(tokens):
                    name, fn_args = tokens[i], []
                    i += 1
                    while i < len(tokens) and tokens[i] not in MDOC_CALLABLE:
                        fn_args.append(unescape(tokens[i], self.strings))
                        i += 1
                    text = f"{unescape(name, self.strings)}({', '.join(fn_args)})"
                elif token in {"Ns", "Ap"}:
                    no_space = True
                    if token == "Ap":
                        parts.append("'")
                    continue
                elif token in MDOC_WRAP:
                    opener, closer = MDOC_WRAP[token]
                    if opener:
                        parts.append(opener)
                        no_space = True
                    if closer and not opener:
                        parts.append(closer)
                    elif closer:
                        closers.append(closer)
                    continue
                elif token == "Nm":
                    if i < len(tokens) and tokens[i] not in MDOC_CALLABLE:
                        text = unescape(tokens[i], self.strings)
                        self.strings.setdefault("__mdoc_name__", text)
                        i += 1
                    else:
                        text = self.strings.get("__mdoc_name__", "")
                elif token == "Nd":
                    text = "-"  # mdoc's NAME separator: "name - description"
                else:
                    continue
            else:
                text = unescape(token, self.strings)
            if parts and (no_space or (text in {",", ".", ";", ":", ")", "]", "?", "!"} and not closers)):
                parts[-1] += text
            elif text in {",", ".", ";", ":", ")", "]"} and closers:
                parts[-1] += "".join(reversed(closers)) + text
                closers = []
            else:
                parts.append(text)
            no_space = False
        text = " ".join(p for p in parts if p)
        return text + "".join(reversed(closers))


# ----------------------------------------------------------------------------------------------------------
# Pages
# ----------------------------------------------------------------------------------------------------------


@dataclass
class Page:
    """One parsed man page."""

    lang: str
    package: Package
    path: Path
    name: str  # ls.1
    roff: str
    description: str = ""
    body: str = ""
    notice: str = ""
    licence: str = ""
    package_licence: str = ""
    drop: str = ""

    @property
    def doc_id(self) -> str:
        return f"{self.lang}-{self.name}"

    @property
    def title(self) -> str:
        stem, _, section = self.name.rpartition(".")
        return f"{stem}({section})" if stem else self.name

    @property
    def relative_path(self) -> str:
        return self.path.relative_to(self.package.root).as_posix()


def read_page(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    for encoding in ("utf-8", "euc-jp", "euc-kr"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="replace")


def is_redirect(roff: str) -> bool:
    """A page whose only content is a ``.so`` to another page."""
    lines = [ln for ln in roff.splitlines() if ln.strip() and not ln.startswith(('.\\"', "'\\\""))]
    return bool(lines) and all(ln.startswith(".so") for ln in lines)


def leading_notice(roff: str) -> str:
    """The page's roff comments before its first section (copyright, permission notice, translator credits)."""
    notice: list[str] = []
    for line in roff.splitlines():
        if re.match(r"^[.']\s*S[Hh]\b", line):
            break
        match = re.match(r"^[.']\\\"(.*)$", line) or re.match(r'^\\"(.*)$', line)
        if match:
            notice.append(match.group(1).rstrip())
    text = "\n".join(notice)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def detect_licence(roff: str, body: str) -> str:
    """A licence label from the page itself: linux-man-pages markers, SPDX tags, then known phrases.

    Comments are searched first; a licence named only in the page text (e.g. the COPYRIGHT section of a
    help2man page) is labelled ``"<label> (page text)"``.
    """
    marker = LICENCE_MARKER.search(roff)
    if marker:
        return marker.group(1)
    spdx = SPDX.search(roff)
    if spdx:
        return spdx.group(1).strip()
    comments = "\n".join(m.group(1) for m in re.finditer(r"^[.']\\\"(.*)$", roff, re.M))
    for label, pattern in LICENCE_PATTERNS:
        if pattern.search(comments):
            return label
    for label, pattern in LICENCE_PATTERNS:
        if pattern.search(body):
            return f"{label} (page text)"
    return "UNSTATED_IN_PAGE"


def files_stanzas(text: str) -> Iterator[tuple[str, list[str], str]]:
    """Each ``Files:`` stanza of a DEP-5 copyright file: the stanza, its file patterns, its licence name."""
    for stanza in re.split(r"\n\s*\n", text):
        files = re.search(r"^Files:(.*(?:\n[ \t].*)*)", stanza, re.M)
        lic = re.search(r"^License:\s*(.+)$", stanza, re.M)
        if files and lic:
            yield stanza, files.group(1).split(), lic.group(1).strip()


def dep5_licence(package: Package, page_path: str, lang: str) -> str:
    """The ``License:`` of the machine-readable copyright stanza whose ``Files:`` match the upstream page path.

    Upstream trees name pages ``man/<lang>/manN/page.N``; the last matching stanza wins (DEP-5 rule).
    Packages without a DEP-5 copyright file give ``""``.
    """
    if not package.copyright_file.is_file():
        return ""
    text = package.copyright_file.read_text("utf-8", errors="replace")
    if not text.startswith("Format:"):
        return ""
    page = page_path.rsplit("/", 1)[-1].removesuffix(".gz")
    section = page_path.rsplit("/", 2)[-2]
    candidates = [f"man/{lang}/{section}/{page}", f"{lang}/{section}/{page}", page]
    licence = ""
    for _, patterns, name in files_stanzas(text):
        matched = [p for p in patterns if any(fnmatch.fnmatchcase(c, p) for c in candidates)]
        if matched:
            # Only the catch-all matched: the stanza may not be about this page at all (upstream may keep it
            # elsewhere, e.g. xz-utils' src/scripts/*.1), so say so.
            licence = name + (" (Files: *)" if matched == ["*"] else "")
    return licence


def name_section(sections: list[Section]) -> int | None:
    for index, section in enumerate(sections):
        heading = section.heading.upper().replace(" ", "")
        if heading in {h.upper() for h in NAME_HEADINGS} or heading.startswith("NAME"):
            return index
    # Fallback: the first section whose text has a "names - description" line.
    for index, section in enumerate(sections[1:], start=1):
        if any(re.search(r"\s[-–—]\s", p) for p in section.paragraphs[:1]):
            return index
    return None


def parse_description(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    match = re.search(r"\s[-–—−]+\s|\s[-–—]+(?=\S)|\\-", text)
    if not match:
        return ""
    return text[match.end() :].strip()


def normalized(text: str) -> str:
    """For matching: NFKC, case-folded, whitespace and trailing sentence punctuation removed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return re.sub(r"\s+", "", text).rstrip("。.．!！")


SENTENCE_END = re.compile(r"(?<=[。！？!?])|(?<=\.)(?=\s)")


def remove_description(body: str, description: str) -> str:
    """Drop every sentence of the body that contains the whole description."""
    needle = normalized(description)
    if not needle:
        return body
    kept_paragraphs = []
    for paragraph in body.split("\n"):
        if needle not in normalized(paragraph):
            kept_paragraphs.append(paragraph)
            continue
        sentences = [s for s in SENTENCE_END.split(paragraph) if s]
        kept = [s for s in sentences if needle not in normalized(s)]
        text = "".join(kept).strip()
        if text:
            kept_paragraphs.append(text)
    return "\n".join(kept_paragraphs)


def script_share(text: str, lang: str) -> tuple[int, float]:
    """(characters in the language's script, their share of the non-space characters)."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return 0, 0.0
    ranges = SCRIPTS[lang]
    in_script = sum(1 for c in chars if any(lo <= ord(c) <= hi for lo, hi in ranges))
    return in_script, in_script / len(chars)


def render_body(sections: list[Section], skip: int) -> str:
    blocks: list[str] = []
    for index, section in enumerate(sections):
        if index == skip:
            continue
        if section.heading:
            blocks.append(section.heading)
        blocks.extend(section.paragraphs)
    text = "\n".join(blocks)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def parse_page(page: Page) -> None:
    """Fill description, body, notice and licence; set ``drop`` to a reason when the page is unusable."""
    sections = RoffText().convert(page.roff)
    index = name_section(sections)
    if index is None:
        page.drop = "no NAME section"
        return
    name_text = " ".join(sections[index].paragraphs)
    page.description = parse_description(name_text)
    if not page.description:
        page.drop = "no description in NAME"
        return
    page.body = remove_description(render_body(sections, index), page.description)
    page.notice = leading_notice(page.roff)
    page.licence = detect_licence(page.roff, page.body)
    page.package_licence = dep5_licence(page.package, page.relative_path, page.lang)


def collect_pages(packages: list[Package], lang: str) -> tuple[list[Page], Counter[str]]:
    """All real pages of ``lang`` (symlinks, ``.so`` redirects and byte-identical copies skipped)."""
    skipped: Counter[str] = Counter()
    pages: list[Page] = []
    seen_hashes: set[str] = set()
    seen_names: set[str] = set()
    for package in packages:
        for directory in language_dirs(package, lang):
            for path in sorted(directory.glob("man*/*")):
                if not path.is_file() or path.is_symlink():
                    skipped["symlink"] += path.is_symlink()
                    continue
                roff = read_page(path)
                if is_redirect(roff):
                    skipped[".so redirect"] += 1
                    continue
                digest = hashlib.sha256(roff.encode("utf-8")).hexdigest()
                name = path.name.removesuffix(".gz")
                if digest in seen_hashes or name in seen_names:
                    skipped["duplicate file"] += 1
                    continue
                seen_hashes.add(digest)
                seen_names.add(name)
                pages.append(Page(lang=lang, package=package, path=path, name=name, roff=roff))
    return pages, skipped


def select_pages(pages: list[Page], lang: str, max_pages: int) -> tuple[list[Page], Counter[str]]:
    """Apply the filters; returns the kept pages (sorted by id) and the drop reasons counted."""
    for page in pages:
        parse_page(page)
        if page.drop:
            continue
        in_script, share = script_share(page.description, lang)
        if len(page.description) < MIN_DESCRIPTION_CHARS:
            page.drop = "description too short"
        elif in_script < MIN_SCRIPT_CHARS or share < MIN_SCRIPT_SHARE:
            page.drop = f"description not in {LANGUAGE_NAMES.get(lang, lang)}"
        elif len(page.body) < MIN_BODY_CHARS:
            page.drop = f"body under {MIN_BODY_CHARS} characters"
        elif normalized(page.description) in normalized(page.body):
            page.drop = "description still in body"
    alive = [p for p in pages if not p.drop]
    descriptions = Counter(normalized(p.description) for p in alive)
    bodies = Counter(p.body for p in alive)
    for page in alive:
        if descriptions[normalized(page.description)] > 1:
            page.drop = "description shared with another page"
        elif bodies[page.body] > 1:
            page.drop = "body shared with another page"
    kept = sorted((p for p in pages if not p.drop), key=lambda p: p.doc_id)
    if len(kept) > max_pages:
        ranked = sorted(kept, key=lambda p: hashlib.sha256(p.doc_id.encode("utf-8")).hexdigest())
        for page in ranked[max_pages:]:
            page.drop = f"over the {max_pages}-page cap (deterministic sample)"
        kept = sorted(ranked[:max_pages], key=lambda p: p.doc_id)
    return kept, Counter(p.drop for p in pages if p.drop)


# ----------------------------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------------------------


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_set(out: Path, lang: str, packages: list[Package], kept: list[Page], stats: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "qrels").mkdir(exist_ok=True)
    corpus = [
        {
            "_id": p.doc_id,
            "title": p.title,
            "text": p.body,
            "metadata": {
                "package": p.package.name,
                "version": p.package.version,
                "path": p.relative_path,
                "licence": p.licence,
                **({"package_licence": p.package_licence} if p.package_licence else {}),
                "notice": p.notice,
            },
        }
        for p in kept
    ]
    queries = [{"_id": p.doc_id, "text": p.description, "metadata": {"page": p.title}} for p in kept]
    _jsonl(out / "corpus.jsonl", corpus)
    _jsonl(out / "queries.jsonl", queries)
    qrels = ["query-id\tcorpus-id\tscore"] + [f"{p.doc_id}\t{p.doc_id}\t1" for p in kept]
    (out / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    (out / "README.md").write_text(readme(lang, packages, kept, stats), encoding="utf-8")


def _copyright_summary(package: Package, lang: str, kept: list[Page]) -> list[str]:
    path = package.copyright_file
    if not path.is_file():
        return [f"`{package.name}` ships no copyright file at `/usr/share/doc/{package.name}/copyright`."]
    text = path.read_text("utf-8", errors="replace")
    rel = f"/usr/share/doc/{package.name}/copyright"
    if not text.startswith("Format:"):
        return [f"`{rel}`, verbatim:", "", "```text", text.rstrip(), "```"]
    lines = [f"`{rel}` (machine-readable); the stanzas that cover these pages, verbatim:", "", "```text"]
    header = text.split("\n\n", 1)[0]
    lines.append(header.rstrip())
    wanted = {p.package_licence for p in kept if p.package == package}
    shown: set[str] = set()
    for stanza, patterns, name in files_stanzas(text):
        if "*" in patterns or any(f"/{lang}/" in p for p in patterns):
            lines += ["", stanza.strip()]
            shown.add(name)
    # The licence texts of the licences named above (stand-alone "License:" stanzas).
    for stanza in re.split(r"\n\s*\n", text):
        if stanza.startswith("License:"):
            name = stanza.split("\n", 1)[0].removeprefix("License:").strip()
            if name in shown | wanted:
                lines += ["", stanza.strip()]
    lines.append("```")
    return lines


def readme(lang: str, packages: list[Package], kept: list[Page], stats: dict[str, Any]) -> str:
    language = LANGUAGE_NAMES.get(lang, lang)
    used = [p for p in packages if any(k.package == p for k in kept)]
    lines = [
        f"# manpages_{lang}: {language} man-page known-item retrieval set (BEIR layout)",
        "",
        f"{stats['queries']} queries, {stats['documents']} documents, one relevant document per query "
        f"(score 1, `qrels/test.tsv`). Median document length {stats['median_chars']} characters "
        f"(mean {stats['mean_chars']}, total {stats['total_chars']:,}).",
        "",
        f"    rag-pipeline bench --beir eval_sets/manpages_{lang}",
        "",
        "Built by `tools/build_manpage_eval_sets.py` (its docstring has the exact commands); do not edit by hand.",
        "",
        "## Source",
        "",
        "| Debian package (bookworm) | version | source package | upstream | Debian maintainer | pages used |",
        "|---|---|---|---|---|---|",
    ]
    for package in used:
        upstream = _upstream(package)
        count = sum(1 for k in kept if k.package == package)
        maintainer = re.sub(r"\s*<[^>]*>", "", package.maintainer) or "?"
        lines.append(
            f"| `{package.name}` | `{package.version}` | `{package.source}` | {upstream} | {maintainer} | {count} |"
        )
    lines += [
        "",
        "Packages fetched with `apt-get download` from the Debian 12 (bookworm) archive "
        "(`http://deb.debian.org/debian`, e.g. https://packages.debian.org/bookworm/"
        f"{used[0].name if used else ''}); pages read from `usr/share/man/{lang}/man*/`.",
    ]
    if lang == "ko":
        lines += [
            "",
            "Debian 12 has no `manpages-ko` package (the KLDP Korean man-page package left Debian long ago), so "
            "this set gathers the Korean pages that ordinary packages ship. It is therefore small: treat its "
            "metrics as a smoke test of Korean tokenization, not as a precise benchmark (at this size one query "
            f"moves recall by {100 / max(1, stats['queries']):.1f} points).",
        ]
    lines += ["", "## Licences", ""]
    licences = Counter(p.licence for p in kept)
    if lang == "ja":
        lines += [
            "The package's copyright file says the pages are distributed under *varieties of licenses*: each "
            "translated page is under the licence of the original English page (Debian ships the package in "
            "`main`, i.e. as DFSG-free; the `+dfsg` version suffix marks an upstream tarball repacked for "
            "the DFSG). The set is therefore **mixed-licence** and is redistributed under the package's terms: "
            "every document stays under the licence of its page, whose copyright and permission notice "
            "(the page's leading roff comment, translator credits included) is kept verbatim in the "
            "corpus row's `metadata.notice`. Nothing here adds restrictions; the original nroff sources "
            "are in the Debian source package `manpages-ja` of the version above.",
        ]
    else:
        lines += [
            "Each package has its own licence; each page's licence is stated in its leading roff comment, "
            "which is kept verbatim in the corpus row's `metadata.notice` (the label is "
            "`metadata.licence`; `metadata.package_licence` is the Debian copyright file's stanza for the "
            "page). All are free licences that allow redistribution of modified versions (Debian `main`). "
            "The set is **mixed-licence**: every document stays under the licence of its page.",
        ]
    lines += [
        "",
        "Licence labels of the pages in this set (`metadata.licence`), from `%%%LICENSE_START(...)` markers of "
        "the Linux man-pages project, `SPDX-License-Identifier` lines, or the wording of the page's comments "
        "(`(page text)`: found only in the page's text, e.g. a help2man COPYRIGHT section). Phrase-based labels "
        "are a guide for filtering, not a legal determination; the notice itself is authoritative:",
        "",
        "| licence (as labelled in the page) | documents |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {count} |" for name, count in licences.most_common()]
    if licences.get("UNSTATED_IN_PAGE"):
        lines += [
            "",
            "`UNSTATED_IN_PAGE`: the page's comments name no licence (e.g. help2man pages generated from a "
            "program's `--help`, whose licence is the program's, or pages carrying only a copyright line); "
            "these fall under the package copyright file's general terms quoted below.",
        ]
    if len(kept) <= 100:
        lines += [
            "",
            "Per page: the licence its own notice states, and the Debian copyright stanza matched by path "
            "(`(Files: *)` = only the catch-all matched, which may not be about the page). Where they differ, "
            "the page's notice is the more specific statement; honour both.",
            "",
            "| id | package | page notice | Debian copyright stanza |",
            "|---|---|---|---|",
        ]
        lines += [f"| `{p.doc_id}` | `{p.package.name}` | {p.licence} | {p.package_licence or '-'} |" for p in kept]
    lines += ["", "### Copyright files", ""]
    shown_files: dict[str, str] = {}
    for package in used:
        lines += [f"#### `{package.name}`", ""]
        text = package.copyright_file.read_text("utf-8", errors="replace") if package.copyright_file.is_file() else ""
        if text and text in shown_files:
            lines += [f"Identical to `{shown_files[text]}`'s.", ""]
            continue
        shown_files[text] = package.name
        lines += [*_copyright_summary(package, lang, kept), ""]
    lines += [
        "## Attribution",
        "",
    ]
    if lang == "ja":
        lines += [
            "Japanese translations by the JM Project (https://linuxjm.osdn.jp/) and its translators, named in "
            "each page's notice; the original English pages by their authors (Linux man-pages project, GNU "
            "projects, BSD and others), also named in each notice. Packaged for Debian by the maintainer named in "
            "the table above.",
        ]
    elif lang == "ko":
        lines += [
            "Korean translations by the translators of each upstream project (man-db, shadow, psmisc, "
            "XZ Utils; most pages are generated with po4a from the projects' translation files), original pages "
            "by the authors named in each page's notice. Packaged for Debian by the maintainers named in the "
            "table above.",
        ]
    else:
        lines += [
            f"{language} translations by the translators named in each page's notice; original pages by the "
            "authors named there too. Packaged for Debian by the packages' maintainers.",
        ]
    lines += [
        "",
        "## Construction",
        "",
        "Known-item: for every man page, the one-line description of its NAME section (the text after "
        f"`\\-` under `.SH {NAME_HEADING_SHOWN.get(lang, 'NAME')}` / `.SH NAME`, or mdoc `.Nd`) is the query; "
        "the rest of the page, converted from roff to plain text (requests, font and size escapes, comments, "
        "macro definitions and tbl formats removed; special characters mapped), is the only relevant "
        "document. The NAME section is removed from the document, which keeps the page name only as its "
        "title (`ls(1)`), and every sentence of the body containing the whole description "
        "(NFKC, case- and whitespace-insensitive) is removed, so the query never occurs verbatim in the "
        "document.",
        "",
        f"Ids: `{lang}-<page>.<section>` (e.g. `{lang}-{kept[0].name if kept else 'ls.1'}`), the same for "
        "query and document.",
        "",
        "Pages considered and dropped:",
        "",
        "| step | pages |",
        "|---|---|",
    ]
    for reason, count in stats["skipped"].items():
        lines.append(f"| skipped: {reason} | {count} |")
    lines.append(f"| parsed pages | {stats['parsed']} |")
    for reason, count in stats["dropped"].most_common():
        lines.append(f"| dropped: {reason} | {count} |")
    lines.append(f"| **kept** | **{stats['documents']}** |")
    lines += [
        "",
        f"Filters: description under {MIN_DESCRIPTION_CHARS} characters; description with "
        f"fewer than {MIN_SCRIPT_CHARS} {language}-script characters or under {int(MIN_SCRIPT_SHARE * 100)}% of "
        f"its non-space characters in that script (mostly ASCII: not in {language}); description identical "
        "(normalized) to another page's (all such pages dropped: the query would be ambiguous); identical "
        f"bodies; body under {MIN_BODY_CHARS} characters; description still in the body after the sentence "
        "removal. "
        f"No cap applies below {MAX_PAGES:,} pages (above it, a deterministic sample by SHA-256 of the id).",
        "",
    ]
    return "\n".join(lines)


def _upstream(package: Package) -> str:
    text = package.copyright_file.read_text("utf-8", errors="replace") if package.copyright_file.is_file() else ""
    match = re.search(r"^Source:\s*\n?\s*(\S+)", text, re.M) or re.search(
        r"downloaded from\s+(\S+?)\.?\s*$", text, re.M
    )
    url = match.group(1) if match else package.homepage
    return url or "?"


def build(extracted: Path, out_root: Path, languages: list[str], max_pages: int) -> dict[str, dict[str, Any]]:
    summary: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="manpages-") as scratch:
        packages = discover_packages(extracted, Path(scratch))
        for lang in languages:
            chosen = packages_for(packages, lang)
            if not chosen:
                print(f"{lang}: no package in {extracted} ships pages under usr/share/man/{lang}/", file=sys.stderr)
                continue
            pages, skipped = collect_pages(chosen, lang)
            kept, dropped = select_pages(pages, lang, max_pages)
            lengths = [len(p.body) for p in kept]
            stats: dict[str, Any] = {
                "packages": [f"{p.name}={p.version}" for p in chosen],
                "skipped": dict(skipped),
                "parsed": len(pages),
                "dropped": dropped,
                "queries": len(kept),
                "documents": len(kept),
                "median_chars": int(statistics.median(lengths)) if lengths else 0,
                "mean_chars": int(statistics.fmean(lengths)) if lengths else 0,
                "total_chars": sum(lengths),
                "licences": dict(Counter(p.licence for p in kept).most_common()),
            }
            write_set(out_root / f"manpages_{lang}", lang, chosen, kept, stats)
            summary[lang] = {**stats, "dropped": dict(dropped)}
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Build known-item BEIR eval sets (manpages_<lang>/) from Debian's translated man pages.",
        epilog="See the module docstring for how to download and extract the packages.",
    )
    parser.add_argument("extracted", type=Path, help="folder of packages extracted with dpkg-deb -R (or .deb files)")
    parser.add_argument("out", type=Path, help="output folder; each language goes to OUT/manpages_<lang>/")
    parser.add_argument(
        "--languages",
        nargs="+",
        default=["ja", "ko"],
        choices=sorted(SCRIPTS),
        help="languages to build (default: ja ko)",
    )
    parser.add_argument("--max-pages", type=int, default=MAX_PAGES, help="cap per language (default: %(default)s)")
    args = parser.parse_args(argv)
    if not args.extracted.is_dir():
        parser.error(f"not a folder: {args.extracted}")
    summary = build(args.extracted, args.out, args.languages, args.max_pages)
    print(json.dumps(summary, ensure_ascii=False, indent=2))
    return 0 if summary else 1


if __name__ == "__main__":
    raise SystemExit(main())
