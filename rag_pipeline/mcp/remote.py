"""The MCP tools answered by a running search service of the same folder, over its HTTP API (issue 54).

The stdio MCP server (``rag-pipeline mcp``) and a running ``rag-pipeline serve`` cannot both hold the embedded
index: the service holds it and would lend it only between its own queries, so a second holder waited minutes.
When ``<data dir>/service.json`` names a live service, the stdio server sends each tool call to it instead, as its
reader (``X-User-Id`` / ``X-User-Email``, the service token from the settings) — the same directory resolves the
same person, so the results are the service's for that reader. If the service goes away, :class:`FallbackTools`
opens the index itself from then on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar
from urllib.parse import quote

import httpx

from rag_pipeline.mcp.backends import AnswersOff, ToolBackend, tool_search_result
from rag_pipeline.retrieval.tree_view import TreeView
from rag_pipeline.serving.access import AccessRefused
from rag_pipeline.serving.active_tools import SESSION_HEADER, ActiveSetRefused
from rag_pipeline.serving.feedback import FeedbackDisabled
from rag_pipeline.serving.identity import EMAIL_HEADER, USER_ID_HEADER, Reader
from rag_pipeline.serving.schemas import FeedbackRequest, SearchRequest, ToolOutcomeRequest, ToolSearchRequest
from rag_pipeline.serving.shared_index import IndexUnavailable
from rag_pipeline.serving.tool_selection import ActiveAction

log = logging.getLogger(__name__)
ResultT = TypeVar("ResultT")


class ServiceGone(IndexUnavailable):
    """The recorded service could not be reached (stopped, killed): the caller may use the index itself."""


class RemoteTools:
    """The tools over ``url``'s ``/v1`` API, as the reader given by ``user_id`` / ``email``."""

    def __init__(self, url: str, user_id: str | None, email: str | None, token: str | None = None,
                 timeout_seconds: float = 60.0) -> None:  # fmt: skip
        headers = {k: v for k, v in ((USER_ID_HEADER, user_id), (EMAIL_HEADER, email)) if v}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.url = url.rstrip("/")
        self._client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_seconds)

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._client.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ServiceGone(f"the search service at {self.url} did not answer ({type(exc).__name__})") from None

    @staticmethod
    def _refused(response: httpx.Response) -> IndexUnavailable:
        try:
            message = str(response.json().get("error"))
        except ValueError:
            message = response.text[:200]
        return IndexUnavailable(f"the search service answered {response.status_code}: {message}")

    def _answer(self, response: httpx.Response, *, missing: bool = False) -> Any:
        """The answer's JSON; None for a 404 where ``missing`` allows one (not found, or not the caller's to read:
        the service does not tell them apart); any other status is refused with the service's own message."""
        if missing and response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._refused(response)
        return response.json()

    def search(self, request: SearchRequest, reader: Reader) -> dict[str, Any]:
        body = request.model_dump(mode="json", exclude_none=True)
        return tool_search_result(self._answer(self._call("POST", "/v1/search", json=body)))

    def document(self, document_id: str, reader: Reader) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self._answer(
            self._call("GET", f"/v1/documents/{quote(document_id, safe='')}"), missing=True
        )
        return found

    def _access(self, path: str, person: str | None) -> dict[str, Any]:
        response = self._call("GET", path, params={"person": person} if person is not None else None)
        if response.status_code in (403, 404):
            error = response.json()
            raise AccessRefused(response.status_code, str(error.get("field")), str(error.get("error")))
        found: dict[str, Any] = self._answer(response)
        return found

    def whois(self, reader: Reader, person: str | None) -> dict[str, Any]:
        return self._access("/v1/whois", person)

    def tree(self, reader: Reader, prefix: str | None) -> list[dict[str, Any]]:
        response = self._call("GET", "/v1/tree", params={"prefix": prefix} if prefix is not None else None)
        sources: list[dict[str, Any]] = self._answer(response)["sources"]
        return sources

    def tree_view(self, reader: Reader, prefix: str | None, view: TreeView) -> dict[str, Any]:
        params = {"prefix": prefix, **view.model_dump()}
        body: dict[str, Any] = self._answer(
            self._call("GET", "/v1/tree", params={k: v for k, v in params.items() if v is not None})
        )
        body.pop("reader", None)
        return body

    def explain(self, document_id: str, reader: Reader, person: str | None) -> dict[str, Any]:
        return self._access(f"/v1/explain/{quote(document_id, safe='')}", person)

    def search_tools(self, request: ToolSearchRequest, reader: Reader, session: str = "") -> dict[str, Any]:
        body = request.model_dump(mode="json", exclude_none=True)
        headers = {SESSION_HEADER: session} if session else None
        found: dict[str, Any] = self._answer(self._call("POST", "/v1/tools/search", json=body, headers=headers))
        return found

    def active_tools(self, action: ActiveAction, names: list[str], reader: Reader, session: str = "") -> dict[str, Any]:
        headers = {SESSION_HEADER: session} if session else None
        if action == "get":
            response = self._call("GET", "/v1/tools/active", headers=headers)
        else:
            path = {"activate": "/v1/tools/active", "deactivate": "/v1/tools/active/deactivate"}.get(action)
            body = {"names": names} if path else None
            response = self._call("POST", path or "/v1/tools/active/reset", json=body, headers=headers)
        if response.status_code in (404, 409):
            refused = response.json()
            raise ActiveSetRefused(str(refused.get("error")), response.status_code, str(refused.get("field")))
        changed: dict[str, Any] = self._answer(response)
        return changed

    def tool_outcome(self, name: str, request: ToolOutcomeRequest, reader: Reader) -> dict[str, Any] | None:
        path = f"/v1/tools/{quote(name, safe='')}/outcome"
        recorded: dict[str, Any] | None = self._answer(
            self._call("POST", path, json=request.model_dump(mode="json")), missing=True
        )
        return recorded

    def ask(self, question: str, reader: Reader) -> dict[str, Any]:
        body = {"messages": [{"role": "user", "content": question}]}
        response = self._call("POST", "/v1/chat/completions", json=body)
        if response.status_code == 503:
            raise AnswersOff(str(response.json().get("error", {}).get("message", "answers are off on the service")))
        completion: dict[str, Any] = self._answer(response)
        rag = completion.get("rag", {})
        failed = rag.get("answer_error")
        return {"question": rag.get("question", question),
                "answer": None if failed else completion["choices"][0]["message"]["content"],
                "answer_error": failed, "sources": completion.get("sources", []), "notices": rag.get("notices", []),
                "invalid_citations": rag.get("invalid_citations", []), "model": completion.get("model")}  # fmt: skip

    def feedback(self, request: FeedbackRequest, reader: Reader) -> dict[str, Any] | None:
        response = self._call("POST", "/v1/feedback", json=request.model_dump(mode="json"))
        if response.status_code == 404 and response.json().get("field") != "document_id":
            raise FeedbackDisabled(str(response.json().get("error")))
        recorded: dict[str, Any] | None = self._answer(response, missing=True)
        return recorded

    def close(self) -> None:
        self._client.close()


class FallbackTools:
    """``primary`` (the running service) until it is gone (:class:`ServiceGone`), then ``open_local()`` for good."""

    def __init__(self, primary: ToolBackend, open_local: Callable[[], ToolBackend]) -> None:
        self.primary: ToolBackend | None = primary
        self._open_local = open_local
        self._local: ToolBackend | None = None

    def _backend(self) -> ToolBackend:
        if self.primary is not None:
            return self.primary
        if self._local is None:
            self._local = self._open_local()
        return self._local

    def _switch(self, exc: ServiceGone) -> ToolBackend:
        log.warning("%s; searching the index in this process from now on", exc)
        self.primary = None
        return self._backend()

    def _on(self, call: Callable[[ToolBackend], ResultT]) -> ResultT:
        """``call`` on the running service, or on the index here once the service is gone."""
        try:
            return call(self._backend())
        except ServiceGone as exc:
            return call(self._switch(exc))

    def search(self, request: SearchRequest, reader: Reader) -> dict[str, Any]:
        return self._on(lambda tools: tools.search(request, reader))

    def document(self, document_id: str, reader: Reader) -> dict[str, Any] | None:
        return self._on(lambda tools: tools.document(document_id, reader))

    def whois(self, reader: Reader, person: str | None) -> dict[str, Any]:
        return self._on(lambda tools: tools.whois(reader, person))

    def tree(self, reader: Reader, prefix: str | None) -> list[dict[str, Any]]:
        return self._on(lambda tools: tools.tree(reader, prefix))

    def tree_view(self, reader: Reader, prefix: str | None, view: TreeView) -> dict[str, Any]:
        return self._on(lambda tools: tools.tree_view(reader, prefix, view))

    def explain(self, document_id: str, reader: Reader, person: str | None) -> dict[str, Any]:
        return self._on(lambda tools: tools.explain(document_id, reader, person))

    def search_tools(self, request: ToolSearchRequest, reader: Reader, session: str = "") -> dict[str, Any]:
        return self._on(lambda tools: tools.search_tools(request, reader, session))

    def active_tools(self, action: ActiveAction, names: list[str], reader: Reader, session: str = "") -> dict[str, Any]:
        return self._on(lambda tools: tools.active_tools(action, names, reader, session))

    def ask(self, question: str, reader: Reader) -> dict[str, Any]:
        return self._on(lambda tools: tools.ask(question, reader))

    def tool_outcome(self, name: str, request: ToolOutcomeRequest, reader: Reader) -> dict[str, Any] | None:
        return self._on(lambda tools: tools.tool_outcome(name, request, reader))

    def feedback(self, request: FeedbackRequest, reader: Reader) -> dict[str, Any] | None:
        return self._on(lambda tools: tools.feedback(request, reader))


class RefusedBesideService:
    """The primary of :class:`FallbackTools` where a service this process cannot send its calls to holds the
    folder: each call is refused at once with what to use instead (waiting for an index the service only lends
    between its own queries took minutes); once the service is gone, :class:`ServiceGone` hands over to the
    index."""

    def __init__(self, still_running: Callable[[], bool], message: str) -> None:
        self._still_running = still_running
        self.message = message

    def _refuse(self) -> NoReturn:
        if self._still_running():
            raise IndexUnavailable(self.message)
        raise ServiceGone("the search service that held this folder has stopped")

    def search(self, request: SearchRequest, reader: Reader) -> dict[str, Any]:
        self._refuse()

    def document(self, document_id: str, reader: Reader) -> dict[str, Any] | None:
        self._refuse()

    def whois(self, reader: Reader, person: str | None) -> dict[str, Any]:
        self._refuse()

    def tree(self, reader: Reader, prefix: str | None) -> list[dict[str, Any]]:
        self._refuse()

    def tree_view(self, reader: Reader, prefix: str | None, view: TreeView) -> dict[str, Any]:
        self._refuse()

    def explain(self, document_id: str, reader: Reader, person: str | None) -> dict[str, Any]:
        self._refuse()

    def search_tools(self, request: ToolSearchRequest, reader: Reader, session: str = "") -> dict[str, Any]:
        self._refuse()

    def active_tools(self, action: ActiveAction, names: list[str], reader: Reader, session: str = "") -> dict[str, Any]:
        self._refuse()

    def ask(self, question: str, reader: Reader) -> dict[str, Any]:
        self._refuse()

    def tool_outcome(self, name: str, request: ToolOutcomeRequest, reader: Reader) -> dict[str, Any] | None:
        self._refuse()

    def feedback(self, request: FeedbackRequest, reader: Reader) -> dict[str, Any] | None:
        self._refuse()
