"""Who may see and touch what: one object-level authorization rule for ``/v1`` and the Agent Server API.

Every run, thread and Agent Server run belongs to the principal that created it (``runs.submitted_by``,
``agent_threads.created_by``). The rule, for both APIs:

- a **submitter** sees and touches only what it owns; anything else is answered as if it did
  not exist (404, never 403, so an id is not confirmed);
- a **reviewer** sees everything and changes only what it owns (403 on someone else's, since
  it can see it) — deciding an interrupt is a review and stays open to it;
- an **admin** sees and changes everything.

A deployment whose ``langgraph.json`` names a LangGraph ``Auth`` with ``@auth.on`` handlers
decides access by those handlers instead (:mod:`services.api.agent_auth`); their filters become
a :class:`Scope`'s ``metadata`` and are applied in SQL like the owner is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from overseer.errors import InvalidRequestError

Action = Literal["read", "write"]
"""``read``: see a resource (get, list, search, join, stream); ``write``: change or delete it."""

ROLES = ("submitter", "reviewer", "admin")


@dataclass(frozen=True)
class Principal:
    """The authenticated caller.

    Attributes:
        subject: the identity that owns what it creates (a token's ``subject``, or the
            identity a custom ``Auth`` handler returned).
        role: ``submitter`` | ``reviewer`` | ``admin``.
        permissions: a custom ``Auth`` user's permissions (empty for tokens).
        user: the user object a custom ``Auth`` handler returned (its ``@auth.on`` handlers
            receive it as ``ctx.user``); None for tokens.
    """

    subject: str
    role: str
    permissions: tuple[str, ...] = ()
    user: Any = field(default=None, compare=False, repr=False)

    @property
    def is_admin(self) -> bool:
        """Admins may do everything."""
        return self.role == "admin"


@dataclass(frozen=True)
class Scope:
    """The rows a caller may reach: an owner, metadata filters, both or neither (all rows).

    Attributes:
        owner: only rows created by this subject; None for any owner.
        metadata: LangGraph ``Auth`` filters on the row's metadata (``{"key": value}``,
            ``{"key": {"$eq": value}}``, ``{"key": {"$contains": value | [values]}}``, all
            of them ANDed); None for none.
    """

    owner: str | None = None
    metadata: Mapping[str, Any] | None = None

    def sql(self, args: list[Any], *, owner_column: str,
            metadata_column: str | None = None) -> str:
        """A SQL condition for this scope, appending its parameters to ``args``.

        Args:
            args: the query's positional parameters so far (``$1`` … ``$n``); extended in place.
            owner_column: the column holding the owner (e.g. ``created_by``).
            metadata_column: the ``jsonb`` column the metadata filters apply to; required
                when the scope has metadata filters.

        Returns:
            ``TRUE`` for an unrestricted scope, else conditions joined by ``AND``.

        Raises:
            InvalidRequestError: a metadata filter Overseer cannot apply (unknown operator),
                or metadata filters on a resource without metadata.
        """
        clauses: list[str] = []
        if self.owner is not None:
            args.append(self.owner)
            clauses.append(f"{owner_column} = ${len(args)}")
        if self.metadata:
            if metadata_column is None:
                raise InvalidRequestError("authorization filters name metadata this resource "
                                          "does not have")
            equal: dict[str, Any] = {}
            for key, condition in self.metadata.items():
                if isinstance(condition, Mapping):
                    for op, value in condition.items():
                        if op == "$eq":
                            equal[str(key)] = value
                        elif op == "$contains":
                            args.append(str(key))
                            args.append(json.dumps(_as_list(value)))
                            clauses.append(f"({metadata_column} -> ${len(args) - 1}) "
                                           f"@> ${len(args)}::jsonb")
                        else:
                            raise InvalidRequestError(
                                f"authorization filter operator {op!r} is not supported",
                                details={"supported": ["$eq", "$contains"]})
                else:
                    equal[str(key)] = condition
            if equal:
                args.append(json.dumps(equal))
                clauses.append(f"{metadata_column} @> ${len(args)}::jsonb")
        return " AND ".join(clauses) if clauses else "TRUE"

    def admits(self, owner: str | None, metadata: Mapping[str, Any] | None = None) -> bool:
        """Whether a row with this owner and metadata is in scope (the Python twin of :meth:`sql`)."""
        if self.owner is not None and owner != self.owner:
            return False
        for key, condition in (self.metadata or {}).items():
            have = (metadata or {}).get(key)
            ops = condition if isinstance(condition, Mapping) else {"$eq": condition}
            for op, value in ops.items():
                if op == "$eq" and have != value:
                    return False
                if op == "$contains" and not (
                        isinstance(have, list) and all(v in have for v in _as_list(value))):
                    return False
                if op not in ("$eq", "$contains"):
                    raise InvalidRequestError(
                        f"authorization filter operator {op!r} is not supported")
        return True


ANY = Scope()
"""Every row: admins, reviewers reading, and the runtime itself after a check."""


def scope(principal: Principal, action: Action) -> Scope:
    """What ``principal`` may reach to ``action`` by the owner rule (see the module docstring).

    Returns:
        :data:`ANY` for admins, and for reviewers reading; otherwise the principal's own rows.
    """
    if principal.is_admin or (action == "read" and principal.role == "reviewer"):
        return ANY
    return Scope(owner=principal.subject)


def can(principal: Principal, action: Action, owner: str | None) -> bool:
    """Whether ``principal`` may ``action`` a resource owned by ``owner`` (the owner rule)."""
    return scope(principal, action).admits(owner)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]
