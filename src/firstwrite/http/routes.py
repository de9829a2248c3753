"""Which requests the middleware guards: routes matched by path pattern and method.

A pattern is a path whose segments may be ``{name}`` (any one segment) and whose last segment
may be ``*`` (anything below, including nothing): ``/payments``, ``/payments/{id}/refunds``,
``/admin/*``. A compiled ``re.Pattern`` is matched against the whole path instead.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["DEFAULT_METHODS", "INHERIT", "Fingerprint", "Route", "compile_pattern"]

DEFAULT_METHODS = frozenset({"POST", "PATCH"})


class _Inherit(enum.Enum):
    INHERIT = enum.auto()


INHERIT = _Inherit.INHERIT
"""A route setting not given: the middleware's own applies."""

Fingerprint = str | tuple[str, ...] | Callable[[Any, bytes], Any] | None
"""What identifies a request beyond its key, method and path:

* ``"body"``: the query string and the exact body bytes (the default);
* a tuple of JSON field names (dotted for nested fields, ``"amount"``, ``"card.last4"``): the
  query string and those fields of a JSON body (a body that is not JSON: its bytes);
* a callable ``(request, body) -> value``: the value (JSON types or bytes) is fingerprinted;
* ``None``: the key alone (no mismatch check).
"""


@dataclass(frozen=True, slots=True)
class Route:
    """A rule for the requests whose path matches ``path`` and whose method is in ``methods``.

    ``exclude=True`` leaves matching requests alone. ``require_key`` answers 400 to a request
    without the header (otherwise it runs unguarded). ``fingerprint``, ``lease`` (seconds),
    ``wait`` (the bounded wait for an in-progress twin) and ``budget`` (seconds for the whole
    request, handler included, that the store's calls and their retries must fit in) override
    the middleware's defaults.
    ``transactional=True`` defers the claim to the handler, which claims the key together with
    its own DynamoDB writes (``claim_with``, one ``TransactWriteItems``); see ``docs/http.md``.
    ``replay="status-only"`` keeps the status and headers of the route's responses, never their
    bodies (a retry gets the status without the body; ``docs/results.md``).
    """

    path: str | re.Pattern[str]
    methods: Iterable[str] = DEFAULT_METHODS
    require_key: bool = False
    exclude: bool = False
    fingerprint: Fingerprint | _Inherit = INHERIT
    lease: float | None = None
    wait: float | None = None
    budget: float | None = None
    transactional: bool = False
    replay: Literal["full", "status-only"] | None = None
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", compile_pattern(self.path))
        methods = frozenset(m.upper() for m in self.methods)
        if not methods:
            raise ValueError(f"route {self.label!r} has no methods")
        object.__setattr__(self, "methods", methods)
        if self.lease is not None and self.lease <= 0:
            raise ValueError(f"route {self.label!r}: lease must be > 0 seconds")
        if self.wait is not None and self.wait < 0:
            raise ValueError(f"route {self.label!r}: wait must be >= 0 seconds")
        if self.budget is not None and not self.budget > 0:
            raise ValueError(f"route {self.label!r}: budget must be > 0 seconds")
        if self.replay not in (None, "full", "status-only"):
            raise ValueError(f"route {self.label!r}: replay is 'full' or 'status-only'")
        if self.exclude and (self.require_key or self.transactional):
            raise ValueError(f"route {self.label!r}: an excluded route cannot require a key")

    @property
    def label(self) -> str:
        """The pattern as written: names the route in logs and in the Retry-After estimate."""
        return self.path if isinstance(self.path, str) else self.path.pattern

    def matches(self, method: str, path: str) -> bool:
        return method in self.methods and self._regex.fullmatch(path) is not None


_SEGMENT = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")


def compile_pattern(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    """The regular expression a route pattern stands for (see the module docstring)."""
    if isinstance(pattern, re.Pattern):
        return pattern
    if not pattern.startswith("/"):
        raise ValueError(f"a route pattern starts with '/': {pattern!r}")
    parts = pattern.split("/")
    out: list[str] = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "*":
            if not last:
                raise ValueError(f"'*' may only end a route pattern: {pattern!r}")
            out.append(".*")  # "/admin/*" matches "/admin/" and "/admin/a/b"
        elif _SEGMENT.fullmatch(part):
            out.append("[^/]+")
        elif "{" in part or "}" in part or "*" in part:
            raise ValueError(f"bad segment {part!r} in route pattern {pattern!r}")
        else:
            out.append(re.escape(part))
    text = "/".join(out)
    if pattern.endswith("/*"):
        text = text[: -len("/.*")] + "(?:/.*)?"  # "/admin/*" matches "/admin" too
    return re.compile(text)
