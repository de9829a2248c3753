"""The DynamoDB expression language: Condition, Filter, KeyCondition, Update and Projection.

Layout:
    grammar.lark     the one grammar for every expression kind (lark, LALR)
    parser.py        text -> AST (ast.py), lark errors -> DynamoDB syntax-error messages
    validate.py      the semantic pass: placeholders, reserved words, limits, functions, types
    evaluate.py      conditions and filters compiled to closures
    update.py        applying an UpdateExpression
    projection.py    ProjectionExpression
    keycondition.py  KeyConditionExpression against a key schema
    compiled.py      compile_expressions() and the objects it returns
    legacy.py        the legacy parameters (Expected, AttributeUpdates, ...) as those objects
"""

from __future__ import annotations

from .ast import Path
from .compiled import (
    Compiled,
    Condition,
    KeyCondition,
    Projection,
    Update,
    apply_update,
    compile_expressions,
    evaluate,
    key_condition_range,
    project,
)
from .keycondition import RangeCondition
from .legacy import (
    attribute_updates,
    attributes_projection,
    expected_condition,
    filter_condition,
    key_condition,
)
from .update import refuse_key_paths

__all__ = [
    "Compiled",
    "Condition",
    "KeyCondition",
    "Path",
    "Projection",
    "RangeCondition",
    "Update",
    "apply_update",
    "attribute_updates",
    "attributes_projection",
    "compile_expressions",
    "evaluate",
    "expected_condition",
    "filter_condition",
    "key_condition",
    "key_condition_range",
    "project",
    "refuse_key_paths",
]
