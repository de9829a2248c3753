"""What an expression's text says about its operator count before it is parsed.

DynamoDB refuses an expression of more than 300 operators and functions
(:data:`.parser.MAX_OPERATORS`), but reports a syntax error first. Parsing a long refused
expression with lark is costly, so two things are read off the text with regular expressions:

* :func:`operator_floor`: a lower bound of the operator count of any parse lark accepts. It
  counts only tokens that are an operator wherever they stand in such a parse: in a condition,
  each comparator (``=`` only appears in comparisons there), each ``NOT`` of a run of two or
  more (after a ``NOT``, ``not`` can only be the keyword; a name followed by a word is a syntax
  error), each word followed by ``(`` but ``AND``, ``BETWEEN`` and ``NOT`` (a function call, or
  ``IN (`` and ``OR (``: operators too); in an update, each ``+``, ``-`` and function call.
* :func:`reduced`: the text with each run of three or more ``NOT`` cut to two, which lark
  accepts if and only if it accepts the text.

So when the floor is over the limit and lark accepts the (short) reduced text, the answer is
DynamoDB's "too many operators" whatever the full parse would build; otherwise the text is
parsed as before, and its errors are its own (a syntax error first).
"""

from __future__ import annotations

import re

__all__ = ["operator_floor", "reduced"]

_FLAGS = re.IGNORECASE | re.ASCII
# A word starts where no word character, # or : precedes (those are in the same token).
_NOT_RUN = re.compile(r"(?<![\w#:])not(?:[ \t\r\n]+not)+(?!\w)", _FLAGS)
_LONG_NOT_RUN = re.compile(r"(?<![\w#:])not(?:[ \t\r\n]+not){2,}(?!\w)", _FLAGS)
_WORD = re.compile(r"not", _FLAGS)
_CALL = re.compile(r"(?<![\w#:])(?!(?:and|between|not)(?!\w))[a-z_]\w*[ \t\r\n]*\(", _FLAGS)
_CONDITIONS = frozenset({"ConditionExpression", "FilterExpression", "KeyConditionExpression"})


def operator_floor(kind: str, text: str) -> int:
    """At most the operator count of ``text``'s parse, if lark accepts it as ``kind``."""
    calls = len(_CALL.findall(text)) if "(" in text else 0
    if kind in _CONDITIONS:
        nots = sum(len(_WORD.findall(run)) for run in _NOT_RUN.findall(text))
        return _comparators(text) + nots + calls
    if kind == "UpdateExpression":
        return text.count("+") + text.count("-") + calls
    return 0  # a projection has no operators


def _comparators(text: str) -> int:
    # Each comparator is one or two of these characters (<>, <=, >=); in a text lark accepts,
    # no two comparators touch.
    count = text.count
    return count("=") + count("<") + count(">") - count("<>") - count("<=") - count(">=")


def reduced(text: str) -> str:
    """``text`` with its runs of ``NOT`` cut to two: accepted by lark if and only if it is."""
    return _LONG_NOT_RUN.sub("NOT NOT", text)
