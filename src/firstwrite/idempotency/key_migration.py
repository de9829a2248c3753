"""Changing the key scheme without a duplicate window: :class:`KeyScheme` and :class:`KeyMigration`.

A guard told its previous scheme(s) (``IdempotencyConfig(key_migration=KeyMigration(...))``)
claims, until the window ends, under its own key *and* each previous scheme's key in one
``TransactWriteItems``, and completes, fails and renews the previous keys too, so an old and a
new version of a service running side by side see each other's claims. The transitions, and
which record decides what, are in :mod:`firstwrite.idempotency._machine.migration`; the rollout
steps in docs/migrations.md. Once the window has ended the guard writes its own key alone, as
a guard without ``key_migration`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigurationError
from .layout import DEFAULT, RecordLayout


@dataclass(frozen=True, slots=True)
class KeyScheme:
    """How a previous version keyed its records: prefix, configured scope, record layout, and
    ``empty_scope_part`` for the old unscoped shape ``<prefix>##<key>`` (see
    :meth:`old_unscoped`). The key attributes (``partition_key``, ``sort_key``) are the table's,
    shared with the current configuration. ``label`` names the scheme in the
    ``firstwrite_legacy_key_hits_total`` metric (default: its key's shape)."""

    key_prefix: str = "IDEMPOTENCY"
    scope: str = ""
    layout: RecordLayout = DEFAULT
    empty_scope_part: bool = False
    label: str = ""

    def __post_init__(self) -> None:
        if "#" in self.key_prefix or not self.key_prefix:
            raise ConfigurationError("KeyScheme.key_prefix must be non-empty, without '#'")
        if not isinstance(self.layout, RecordLayout):
            raise ConfigurationError("KeyScheme.layout must be a RecordLayout")

    @classmethod
    def old_unscoped(
        cls, key_prefix: str = "IDEMPOTENCY", layout: RecordLayout = DEFAULT
    ) -> KeyScheme:
        """The unscoped key written before ``<prefix>#<key>``: ``<prefix>##<key>``."""
        return cls(key_prefix=key_prefix, layout=layout, empty_scope_part=True)

    @property
    def name(self) -> str:
        """The metric label: ``label``, else e.g. ``IDEMPOTENCY##<key>`` or ``OLD#<scope>#<key>``."""
        if self.label:
            return self.label
        middle = "#" if self.empty_scope_part else (f"{self.scope}#" if self.scope else "")
        suffix = "" if self.layout.name == DEFAULT.name else f" ({self.layout.name} layout)"
        return f"{self.key_prefix}#{middle}<key>{suffix}"


@dataclass(frozen=True, slots=True)
class KeyMigration:
    """The previous schemes and the window during which their keys are written too.

    The window runs until ``started_at + window`` (epoch seconds), ``window`` defaulting to the
    configuration's ``retention``: set ``started_at`` to when the last instance of the previous
    version stopped taking requests (a later time only lengthens the window), so that every
    record it wrote has expired before the guard stops looking for it. Claims made before
    ``started_at`` are inside the window too."""

    previous: tuple[KeyScheme, ...]
    started_at: float
    window: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "previous", tuple(self.previous))
        if not self.previous or not all(isinstance(s, KeyScheme) for s in self.previous):
            raise ConfigurationError("KeyMigration.previous needs one or more KeyScheme")
        if self.window is not None and not self.window > 0:
            raise ConfigurationError("KeyMigration.window must be > 0 seconds (or None: retention)")

    def ends_at(self, retention: float) -> float:
        """When the window ends (epoch seconds)."""
        return self.started_at + (retention if self.window is None else self.window)
