"""The project's eval-set format.

``<name>.jsonl``: one query per line::

    {"id": "q1", "query": "how do I ...", "relevant": {"slack:T1:C1:1700000000.000100": 1},
     "principal": {"user_id": "U1", "groups": ["slack:T1:members"]} | {"person": "alice@acme.com"} | null,
     "exclude": ["jira:site:123"], "tags": ["dev"]}

``relevant`` maps document ids to graded relevance (>= 1 is relevant). ``principal`` runs the
query as that reader (null = the explicit all-documents evaluation principal); ``{"person": EMAIL_OR_ID}`` names
a person whose accounts and groups the principal directory resolves when the set is loaded. ``exclude`` ids are
dropped from results before scoring: documents (e.g. a Jira query issue itself) or child chunks (a mined thread's
question, so the thread is found by its replies alone). ``<name>.meta.json``
describes the set (source, licence, attribution, how it was built).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from rag_pipeline.retrieval.principal import Principal


class EvalQuery(BaseModel):
    """One labelled query."""

    id: str
    query: str
    relevant: dict[str, int]
    # Optional chunk-level judgements: child chunk ids (deterministic, see text/chunking.py) → grade.
    relevant_chunks: dict[str, int] = Field(default_factory=dict)
    principal: Principal | None = None
    # A person named by email or account id ({"principal": {"person": ...}}), resolved through the directory.
    person: str | None = None
    exclude: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _person_principal(cls, data: Any) -> Any:
        principal = data.get("principal") if isinstance(data, dict) else None
        if isinstance(principal, dict) and "person" in principal:
            if set(principal) != {"person"} or not isinstance(principal["person"], str) or not principal["person"]:
                raise ValueError('a person principal is {"person": "<email or account id>"} and nothing else')
            data = {**data, "principal": None, "person": principal["person"]}
        return data

    @property
    def judged(self) -> bool:
        """True when at least one document is relevant (grade ≥ 1): only such queries can be scored or learned from."""
        return any(grade > 0 for grade in self.relevant.values())

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query text is empty")
        return value


class EvalSetMeta(BaseModel):
    """Header of an eval set."""

    name: str
    description: str
    source: str
    license: str
    attribution: str
    queries: int
    # Scope of the search (payload ``source`` values); None searches everything.
    sources: list[str] | None = None
    tags: list[str] = Field(default_factory=list)


def write_eval_set(directory: Path, meta: EvalSetMeta, queries: list[EvalQuery]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{meta.name}.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for query in queries:
            handle.write(query.model_dump_json(exclude_none=True, exclude_defaults=True) + "\n")
    (directory / f"{meta.name}.meta.json").write_text(meta.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path


def load_eval_set(
    path: str | Path, resolve_person: Callable[[str], Principal] | None = None, skip_unknown_people: bool = False
) -> list[EvalQuery]:
    """Read a JSONL eval set; a bad line raises with the file and line number. Lines naming a person get the
    principal ``resolve_person`` gives (the directory's); without one, such a line is an error. With
    ``skip_unknown_people`` a line whose person the directory no longer knows is left out instead (a mined set:
    its author left between the mining and the evaluation; the next mining drops the line)."""
    path = Path(path)
    queries = []
    # split("\n"), not splitlines(): JSON strings may hold U+2028 or U+0085, which splitlines() breaks on.
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            query = EvalQuery.model_validate_json(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: invalid eval query: {exc}") from exc
        if query.person is not None:
            if resolve_person is None:
                raise ValueError(
                    f"{path}:{number}: the principal names the person {query.person!r}, which needs the principal "
                    "directory (run `rag-pipeline index` or `rag-pipeline directory` first)"
                )
            try:
                query = query.model_copy(update={"principal": resolve_person(query.person)})
            except LookupError as exc:
                if skip_unknown_people:
                    continue
                raise ValueError(f"{path}:{number}: {exc}") from exc
        queries.append(query)
    return queries


def load_eval_set_meta(path: str | Path) -> EvalSetMeta:
    """The ``<name>.meta.json`` next to ``<name>.jsonl`` (a minimal header when it is missing)."""
    path = Path(path)
    meta_path = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
    if not meta_path.exists():
        return EvalSetMeta(name=path.stem, description="", source=str(path), license="", attribution="", queries=0)
    try:
        return EvalSetMeta.model_validate_json(meta_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{meta_path}: invalid eval-set header: {exc}") from exc
