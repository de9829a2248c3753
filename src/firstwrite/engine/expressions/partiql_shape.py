"""How deep a PartiQL statement and its parameters nest, measured before anything recurses.

lark builds a statement's tree without recursion, but the builder (:mod:`.partiql`), the
planner and the expression checks recurse over it, as every pass over a parameter does; so
the tree and the parameters are measured here first, with loops:

* **Values.** A value nested deeper than DynamoDB's 32 levels (:data:`~firstwrite.engine.values.MAX_NESTING`)
  is refused with DynamoDB's message for an item nested too deep (:data:`NESTING_TOO_DEEP`),
  the answer such a value gets from the item checks the statement runs into anyway. Levels
  are counted as for an item: an INSERT's tuple is the item, its attributes are level 1; any
  other literal (in a ``WHERE``, a ``SET``) is level 1 itself; so is each parameter.
* **Conditions.** Parentheses, ``NOT``, function calls and operands nested deeper than
  :data:`MAX_NESTING` levels are refused as the expression grammar refuses them
  (:mod:`.parser`): over 300 operators, DynamoDB's ``The expression contains too many
  operators; operator count: 301``; else ``The expression has redundant parentheses;`` (the
  messages of the expression the ``WHERE`` becomes, without its ``Invalid ...Expression:``
  prefix). A chain of ``AND`` (or ``OR``) is one level however long (walked with a loop).

:data:`MAX_NESTING` keeps the recursive passes inside Python's recursion limit in any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lark import Token
from lark import Tree as LarkTree

from ..errors import DynamoDBError, validation
from ..values import MAX_NESTING as MAX_VALUE_LEVELS
from ..values import NESTING_TOO_DEEP
from .parser import MAX_OPERATORS

__all__ = ["MAX_NESTING", "parameters_error", "tree_error"]

MAX_NESTING = 400
TOO_MANY_OPERATORS = (
    f"The expression contains too many operators; operator count: {MAX_OPERATORS + 1}"
)
REDUNDANT_PARENTHESES = "The expression has redundant parentheses;"

_VALUE_NODES = frozenset(
    {"string", "number", "true", "false", "null", "param", "map", "list", "bag"}
)
_CONTAINERS = frozenset({"map", "list"})  # a set's members are not a level down
_CHAINS = frozenset({"and_", "or_"})
_OPERATORS = frozenset(
    {"and_", "or_", "not_", "compare", "between", "in_", "missing", "not_missing", "call", "arith"}
)


def tree_error(tree: LarkTree[Token]) -> DynamoDBError | None:
    """DynamoDB's error for a statement tree nested too deep (the module docstring), or None."""
    operators = 0
    deepest = 0
    calls = 0  # the most calls nested in one another
    # (node, condition depth, value level: None outside a value, calls around it)
    stack: list[tuple[LarkTree[Token], int, int | None, int]] = [(tree, 1, None, 0)]
    while stack:
        node, depth, level, around = stack.pop()
        kind = node.data
        if level is None and kind in _VALUE_NODES:
            level = 1
        if level is not None:
            if level > MAX_VALUE_LEVELS:
                return validation(NESTING_TOO_DEEP)
            inner = level + 1 if kind in _CONTAINERS else level
            for child in node.children:
                if isinstance(child, LarkTree):
                    stack.append((child, depth, inner, around))
            continue
        if kind in _OPERATORS:
            operators += 1
        if kind == "call":
            around += 1
            calls = max(calls, around)
        deepest = max(deepest, depth)
        for child in node.children:
            if not isinstance(child, LarkTree):
                continue
            if kind == "insert" and child.data in _VALUE_NODES:
                stack.append(
                    (child, depth + 1, 0, around)
                )  # the item itself: its attributes are level 1
            elif kind in _CHAINS and child.data == kind:
                stack.append((child, depth, None, around))  # a link of the chain: the same level
            else:
                stack.append((child, depth + 1, None, around))
    if calls > MAX_OPERATORS:  # all in one expression: over its operator count, whatever else
        return validation(TOO_MANY_OPERATORS)
    if deepest > MAX_NESTING:
        return validation(
            TOO_MANY_OPERATORS if operators > MAX_OPERATORS else REDUNDANT_PARENTHESES
        )
    return None


def parameters_error(parameters: Sequence[Any]) -> DynamoDBError | None:
    """DynamoDB's error for a parameter nested deeper than an item's 32 levels, or None.

    Only the nesting is judged (an ``L`` or ``M`` member one level down); anything else about
    a parameter is left to the checks of the request it ends up in."""
    stack: list[tuple[Any, int]] = [(p, 1) for p in parameters]
    while stack:
        value, level = stack.pop()
        if level > MAX_VALUE_LEVELS:
            return validation(NESTING_TOO_DEEP)
        if not isinstance(value, dict) or len(value) != 1:
            continue
        ((kind, raw),) = value.items()
        if kind == "L" and isinstance(raw, (list, tuple)):
            stack.extend((member, level + 1) for member in raw)
        elif kind == "M" and isinstance(raw, dict):
            stack.extend((member, level + 1) for member in raw.values())
    return None
