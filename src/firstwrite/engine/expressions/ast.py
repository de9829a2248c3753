"""Node types of parsed expressions.

The parser builds these from ``grammar.lark``; path components may still be ``#name``
placeholders (:class:`NameRef`). The semantic pass (``validate.py``) returns the same node
types with every placeholder resolved, so evaluators only ever see ``str`` / ``int`` parts.

Every node keeps ``start``/``end`` character offsets into its expression text: DynamoDB's
syntax-error messages quote the text around a position, and a few of its syntax errors are
only detected after parsing (a bare operand where a condition is expected).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class NameRef:
    """An ``#name`` placeholder inside a document path (before resolution)."""

    name: str


PathPart = str | int | NameRef
"""A path component: attribute/map key name, list index, or unresolved ``#name``."""

Path = tuple[str | int, ...]
"""A resolved document path: attribute names and list indexes."""


@dataclass(frozen=True, slots=True)
class PathNode:
    parts: tuple[PathPart, ...]
    start: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)

    @property
    def resolved(self) -> Path:
        """The parts as a :data:`Path` (only valid after resolution)."""
        return self.parts  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class ValueRef:
    """An ``:value`` placeholder."""

    name: str
    start: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Call:
    """A function call; ``name`` as written (function names are case-sensitive)."""

    name: str
    args: tuple[Node, ...]
    start: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Paren:
    """Parentheses, kept so the semantic pass can reject redundant pairs."""

    inner: Node
    start: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Arith:
    """``a + b`` / ``a - b`` on the right-hand side of a SET action."""

    op: str
    left: Node
    right: Node
    start: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Compare:
    op: str  # = <> < <= > >=
    left: Node
    right: Node
    start: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Between:
    subject: Node
    low: Node
    high: Node
    start: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class In:
    subject: Node
    options: tuple[Node, ...]
    start: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node
    start: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node
    start: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node
    start: int = field(default=0, compare=False)
    end: int = field(default=0, compare=False)


Node = PathNode | ValueRef | Call | Paren | Arith | Compare | Between | In | And | Or | Not

CONDITION_NODES = (Compare, Between, In, And, Or, Not)


# --- UpdateExpression ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetAction:
    path: PathNode
    value: Node


@dataclass(frozen=True, slots=True)
class RemoveAction:
    path: PathNode


@dataclass(frozen=True, slots=True)
class AddAction:
    path: PathNode
    value: ValueRef


@dataclass(frozen=True, slots=True)
class DeleteAction:
    path: PathNode
    value: ValueRef


Action = SetAction | RemoveAction | AddAction | DeleteAction


@dataclass(frozen=True, slots=True)
class Clause:
    keyword: str  # SET, REMOVE, ADD or DELETE (upper case)
    actions: tuple[Action, ...]
    start: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class UpdateTree:
    clauses: tuple[Clause, ...]


@dataclass(frozen=True, slots=True)
class ProjectionTree:
    paths: tuple[PathNode, ...]


Tree = Node | UpdateTree | ProjectionTree
