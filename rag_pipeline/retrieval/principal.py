"""Who a search runs as. Every search takes a principal; the all-documents reader exists only for evaluation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rag_pipeline.index.store import AclCondition


class Principal(BaseModel):
    """A reader: a user id (plus the person's other account ids, ``user_ids``: one person has a Slack id and a
    Jira account id) and the groups it belongs to.

    ``all_documents`` skips access control. Only evaluation sets it (through
    :meth:`all_documents_for_evaluation`), so a caller has to ask for it by name.
    """

    model_config = ConfigDict(frozen=True)

    user_id: str | None = None
    user_ids: tuple[str, ...] = Field(default_factory=tuple)
    groups: tuple[str, ...] = Field(default_factory=tuple)
    all_documents: bool = False

    @field_validator("all_documents")
    @classmethod
    def _not_from_data(cls, value: bool) -> bool:
        # An eval-set line or request body must never switch access control off.
        if value:
            raise ValueError("all_documents cannot be set from data; use Principal.all_documents_for_evaluation()")
        return value

    @classmethod
    def all_documents_for_evaluation(cls) -> Principal:
        return cls.model_construct(user_id=None, groups=(), all_documents=True)

    def acl_condition(self) -> AclCondition | None:
        """The index filter for this reader (None: no access filter)."""
        if self.all_documents:
            return None
        return AclCondition(self.all_user_ids(), tuple(self.groups))

    def all_user_ids(self) -> tuple[str, ...]:
        """Every account id of this reader, the primary one first."""
        first = (self.user_id,) if self.user_id is not None else ()
        return tuple(dict.fromkeys((*first, *self.user_ids)))

    def admits(self, acl: Mapping[str, Any]) -> bool:
        """True when a point's ``acl`` payload lets this reader see it (the check leak counting uses)."""
        if self.all_documents:
            return True
        restricted = acl.get("restricted_to") or ()
        if restricted and not set(self.groups) & set(restricted):
            return False  # a restricted comment: the reader must hold its restriction as well as the ACL
        return bool(
            acl.get("public")
            or bool(set(self.all_user_ids()) & set(acl.get("users") or ()))
            or set(self.groups) & set(acl.get("groups") or ())
        )
