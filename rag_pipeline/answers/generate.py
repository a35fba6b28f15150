"""Writing the answer: one chat completion over the numbered context, through the official ``openai`` client
(``OPENAI_API_KEY``; any OpenAI-compatible server through ``OPENAI_BASE_URL``), whole or streamed.

The documents go in the system message and the question is the user's, so the model cannot take text in a
document for the user's instructions; it is told to answer only from them and to cite ``[N]``. With no
document, there is no call: the answer says nothing was found. A follow-up question in a conversation is
first condensed into a standalone one (one more call), which is what gets searched.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_pipeline.answers.citations import parse_citations
from rag_pipeline.answers.context import ContextDocument, format_context
from rag_pipeline.answers.wording import reader_language, say
from rag_pipeline.sources.registry import searched_sources_phrase

# The English one (every language's: wording.MESSAGES["no_documents"]).
NO_DOCUMENTS_ANSWER = say("no_documents", "en")
SYSTEM_PROMPT = """You answer questions for the people of a company from what they wrote in {sources}.
Answer only from the documents below; if they do not answer the question, say you don't know.
Cite the document behind every statement with its number in square brackets, like [1] or [2][3].
Never cite a number that is not a document below. Answer in the language of the question, briefly.

Documents:

{context}"""
CONDENSE_PROMPT = (
    "Rewrite the user's last question as one standalone question that can be understood without the "
    "conversation (resolve pronouns and references from the earlier turns). Reply with the question only."
)
# USD per million tokens (input, output), from OpenAI's price list; a model not listed reports no cost.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
}


@dataclass
class Usage:
    """Tokens one or more calls used, and their cost where the model's price is known."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    calls: int = 0

    def add(self, model: str, usage: Any) -> None:
        if usage is None:
            self.calls += 1
            return
        prompt, completion = int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0)
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.calls += 1
        price = PRICES.get(model)
        if price is not None:
            self.cost_usd = (self.cost_usd or 0.0) + (prompt * price[0] + completion * price[1]) / 1_000_000

    def as_dict(self) -> dict[str, object]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "llm_calls": self.calls,
        }


@dataclass
class Answer:
    """The answer text, the cited documents (in order of first citation), invented citations and the usage."""

    text: str
    model: str
    context: list[ContextDocument]
    sources: list[ContextDocument] = field(default_factory=list)
    invalid_citations: tuple[int, ...] = ()
    usage: Usage = field(default_factory=Usage)
    # Why there is no answer (the model failed or timed out): ``text`` is then empty (streamed: the words written
    # before it failed) and ``sources`` lists every context document, so the caller still gets what was found.
    failure: str | None = None
    # Steps that degraded on the way without failing the answer (a follow-up searched as typed).
    notices: list[str] = field(default_factory=list)
    # The model's own reasoning text, where an OpenAI-compatible server returns one (``reasoning_content``, as
    # DeepSeek's and vLLM's reasoning models do); None for models that return none (OpenAI's own never do).
    reasoning: str | None = None

    def sources_json(self) -> list[dict[str, object]]:
        return [doc.as_source() for doc in self.sources]


class AnswerModel:
    """A chat model behind the ``openai`` client (``client`` for tests; else one built from the environment)."""

    def __init__(
        self,
        model: str,
        client: Any = None,
        timeout: float = 60.0,
        max_tokens: int = 800,
        temperature: float = 0.0,
        language: str | None = None,
    ) -> None:
        if client is None:
            from openai import OpenAI

            client = OpenAI(timeout=timeout, max_retries=2)
        self.model = model
        self.client = client
        self.max_tokens = max_tokens
        self.temperature = temperature
        # The language of the sentences the project writes itself (RAG_ANSWER_LANGUAGE); None: the question's.
        self.language = language

    def complete(self, messages: list[dict[str, str]], usage: Usage) -> str:
        return reply_text(self.reply(messages, usage))

    def reply(self, messages: Sequence[dict[str, Any]], usage: Usage, **tools: Any) -> Any:
        """One chat completion's message (``tools``/``tool_choice`` for a model that may call them), its usage
        counted."""
        response = self.client.chat.completions.create(
            model=self.model, messages=messages, temperature=self.temperature, max_tokens=self.max_tokens, **tools
        )
        usage.add(self.model, response.usage)
        return response.choices[0].message

    def stream(self, messages: list[dict[str, str]], usage: Usage) -> Iterator[str]:
        chunks = self.client.chat.completions.create(
            model=self.model, messages=messages, temperature=self.temperature, max_tokens=self.max_tokens, stream=True,
            stream_options={"include_usage": True},
        )  # fmt: skip
        counted = False
        for chunk in chunks:
            if chunk.usage is not None:
                usage.add(self.model, chunk.usage)
                counted = True
            for choice in chunk.choices:
                if choice.delta and choice.delta.content:
                    yield choice.delta.content
        if not counted:
            usage.add(self.model, None)


def reply_text(message: Any) -> str:
    """A reply's text: its content, else its refusal, else nothing."""
    return str(message.content or (getattr(message, "refusal", None) or ""))


# Where OpenAI-compatible servers put a reasoning model's thinking: ``reasoning_content`` (DeepSeek, vLLM, SGLang)
# or ``reasoning`` (OpenRouter, Ollama's compatible API). The openai client keeps both as the message's extra fields.
REASONING_FIELDS = ("reasoning_content", "reasoning")


def reasoning_of(message: Any) -> str | None:
    """The reasoning text a reply carries beside its content, None when it carries none."""
    extra = getattr(message, "model_extra", None) or {}
    for name in REASONING_FIELDS:
        value = extra[name] if name in extra else getattr(message, name, None)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def joined_reasoning(parts: Sequence[str | None]) -> str | None:
    """Several replies' reasoning as one text (each round's on its own paragraph), None when none had any."""
    kept = [part for part in parts if part]
    return "\n\n".join(kept) if kept else None


def model_failure(exc: BaseException, role: str = "answer") -> str:
    """A model call's failure in words a caller may see: the kind and HTTP status, never a traceback or a prompt."""
    kind = type(exc).__name__
    if "Timeout" in kind:
        return f"the {role} model did not answer in time ({kind})"
    status = getattr(exc, "status_code", None)
    return f"the {role} model failed ({f'HTTP {status}' if status else kind})"


def unanswered(model: str, context: list[ContextDocument], reason: str, usage: Usage | None = None) -> Answer:
    """No answer, for ``reason``: the sources are every context document the search found."""
    return Answer(text="", model=model, context=context, sources=list(context), usage=usage or Usage(), failure=reason)


def answer_messages(question: str, context: Sequence[ContextDocument]) -> list[dict[str, str]]:
    return [
        {
            "role": "system",
            "content": SYSTEM_PROMPT.format(sources=searched_sources_phrase(), context=format_context(context)),
        },
        {"role": "user", "content": question},
    ]


def _finish(
    text: str, model: str, context: list[ContextDocument], usage: Usage, reasoning: str | None = None
) -> Answer:
    citations = parse_citations(text, (d.number for d in context))
    by_number = {d.number: d for d in context}
    return Answer(text, model, context, [by_number[n] for n in citations.valid], citations.invalid, usage,
                  reasoning=reasoning)  # fmt: skip


def write_answer(
    model: AnswerModel, question: str, context: list[ContextDocument], usage: Usage | None = None
) -> Answer:
    """The answer to ``question`` from ``context`` (no call when the context is empty)."""
    usage = usage or Usage()
    if not context:
        return Answer(say("no_documents", reader_language(question, model.language)), model.model, [], usage=usage)
    message = model.reply(answer_messages(question, context), usage)
    return _finish(reply_text(message), model.model, context, usage, reasoning_of(message))


def stream_answer(
    model: AnswerModel, question: str, context: list[ContextDocument], usage: Usage | None = None
) -> Iterator[str | Answer]:
    """The answer's text as it comes (strings), then the finished :class:`Answer`."""
    usage = usage or Usage()
    if not context:
        nothing = say("no_documents", reader_language(question, model.language))
        yield nothing
        yield Answer(nothing, model.model, [], usage=usage)
        return
    parts = []
    for piece in model.stream(answer_messages(question, context), usage):
        parts.append(piece)
        yield piece
    yield _finish("".join(parts), model.model, context, usage)


def condense_question(model: AnswerModel, turns: Sequence[tuple[str, str]], usage: Usage) -> str:
    """The last user turn of ``turns`` ((role, text), oldest first) as a standalone question; a single turn is
    returned as it is, without a call."""
    turns = [(role, text) for role, text in turns if role in ("user", "assistant")]
    users = [text for role, text in turns if role == "user"]
    if not users:
        raise ValueError("the conversation has no user message")
    last = max(i for i, (role, _) in enumerate(turns) if role == "user")
    if last == 0:
        return users[-1]
    history = "\n".join(f"{role}: {text}" for role, text in turns[:last])
    messages = [
        {"role": "system", "content": CONDENSE_PROMPT},
        {"role": "user", "content": f"Conversation:\n{history}\n\nLast question: {users[-1]}"},
    ]
    condensed = model.complete(messages, usage).strip()
    return condensed or users[-1]
