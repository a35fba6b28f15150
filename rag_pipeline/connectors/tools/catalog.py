"""Tool definitions: read from a catalog file or an MCP server's listing, checked, and made into documents.

A catalog is JSON: a list of tools, or ``{"tools": [...]}``. Each tool is MCP's shape (``name``, ``description``,
``inputSchema``), the OpenAI function shape (``{"type": "function", "function": {"name", "description",
"parameters"}}``) or this project's (``input_schema``), with optional ``tags`` (strings) and ``critical`` (always
offered by tool search). A tool that is not such an object is a problem naming its place; the others are kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rag_pipeline.sources.document import Acl, Document, content_hash
from rag_pipeline.sources.problems import RecordProblem
from rag_pipeline.text.tokens import cl100k

SOURCE_NAME = "tools"
CATALOG_CONTAINER = "catalog"
_NOT_ID = re.compile(r"[^A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


class ToolDefinition(BaseModel):
    """One tool as an agent loads it: name, description, JSON Schema of its arguments, tags, where it comes from."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    tags: tuple[str, ...] = ()
    critical: bool = False
    server: str | None = None  # the MCP server's URL; None for a catalog entry

    def as_openai_tool(self) -> dict[str, Any]:
        """The definition as a chat-completions ``tools`` entry: what loading the tool costs in prompt tokens."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.input_schema},
        }

    def prompt_tokens(self) -> int:
        """cl100k tokens of the tool as a model is given it (its JSON entry)."""
        return len(cl100k().encode(json.dumps(self.as_openai_tool(), ensure_ascii=False, separators=(",", ":"))))

    def searchable_text(self) -> str:
        """What is embedded and BM25-indexed: the name (also as words), description, arguments and tags."""
        words = " ".join(_CAMEL.sub(" ", self.name).replace("_", " ").replace("-", " ").replace(".", " ").split())
        lines = [self.name, words, self.description.strip()]
        arguments = _arguments(self.input_schema)
        if arguments:
            lines.append("Arguments: " + "; ".join(arguments))
        if self.tags:
            lines.append("Tags: " + ", ".join(self.tags))
        return "\n".join(line for line in lines if line)


def _arguments(schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return []
    required = set(schema.get("required") or ())
    out = []
    for name, spec in properties.items():
        spec = spec if isinstance(spec, Mapping) else {}
        kind = spec.get("type")
        head = f"{name} ({kind}{', required' if name in required else ''})" if kind else str(name)
        described = str(spec.get("description") or "").strip()
        out.append(f"{head}: {described}" if described else head)
    return out


def parse_tool(raw: Any, server: str | None = None) -> ToolDefinition:
    """One tool from any of the accepted shapes; ValueError saying what is wrong."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"a tool must be a JSON object, got {type(raw).__name__}")
    if raw.get("type") == "function" and isinstance(raw.get("function"), Mapping):
        raw = {**raw["function"], **{k: v for k, v in raw.items() if k in ("tags", "critical")}}
    schema = raw.get("input_schema", raw.get("inputSchema", raw.get("parameters")))
    if schema is None:
        schema = {"type": "object", "properties": {}}
    if not isinstance(schema, Mapping):
        raise ValueError(f"the input schema must be a JSON object, got {type(schema).__name__}")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("a tool needs a non-empty string 'name'")
    tags = raw.get("tags") or ()
    if not isinstance(tags, Sequence) or isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
        raise ValueError(f"tool {name!r}: 'tags' must be a list of strings")
    description = raw.get("description") or ""
    if not isinstance(description, str):
        raise ValueError(f"tool {name!r}: 'description' must be a string")
    return ToolDefinition(
        name=name.strip(),
        description=description,
        input_schema=dict(schema),
        tags=tuple(tags),
        critical=bool(raw.get("critical", False)),
        server=server,
    )


def read_catalog(path: Path) -> tuple[list[ToolDefinition], list[RecordProblem]]:
    """The tools of a catalog file and a problem per entry that is not a tool; a file that is not JSON (or not
    a list of tools) is one problem naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return [], [RecordProblem(str(path), f"tool catalog cannot be read: {exc}")]
    entries = data.get("tools") if isinstance(data, Mapping) else data
    if not isinstance(entries, list):
        return [], [RecordProblem(str(path), 'tool catalog must be a JSON list of tools or {"tools": [...]}')]
    tools: list[ToolDefinition] = []
    problems: list[RecordProblem] = []
    for i, entry in enumerate(entries):
        try:
            tools.append(parse_tool(entry))
        except ValueError as exc:
            problems.append(RecordProblem(f"{path} tool {i + 1}", str(exc)))
    return tools, problems


def server_container(url: str) -> str:
    """A container id for an MCP server: ``mcp-`` and its host, port and path as letters and digits."""
    stripped = re.sub(r"^[a-z]+://", "", url.strip().lower())
    return ("mcp-" + _NOT_ID.sub("-", stripped).strip("-"))[:64].rstrip("-")


def tool_documents(
    tools: Sequence[ToolDefinition], container: str, read_at: datetime, critical: Sequence[str] = ()
) -> tuple[list[Document], list[RecordProblem]]:
    """One public document per tool (a repeated name in one container is a problem; the first is kept)."""
    documents: list[Document] = []
    problems: list[RecordProblem] = []
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            problems.append(RecordProblem(f"{container} tool {tool.name}", "a second tool of this name was skipped"))
            continue
        seen.add(tool.name)
        tool = tool.model_copy(update={"critical": tool.critical or tool.name in critical})
        text = tool.searchable_text()
        documents.append(
            Document(
                id=f"{SOURCE_NAME}:{container}:{tool.name}",
                source=SOURCE_NAME,
                container=container,
                title=tool.name,
                text=text,
                url=tool.server,
                created=read_at,
                updated=read_at,
                version=read_at.timestamp(),
                content_hash=content_hash(text + json.dumps(tool.model_dump(mode="json"), sort_keys=True)),
                acl=Acl(public=True),
                metadata={"tool": tool.model_dump(mode="json"), "tool_tokens": tool.prompt_tokens()},
            )
        )
    return documents, problems


def tool_payload(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A tool document's definition and its prompt cost as payload, which tool search returns as stored."""
    if "tool" not in metadata:
        return {}
    return {"tool": metadata["tool"], "tool_tokens": int(metadata.get("tool_tokens") or 0)}
