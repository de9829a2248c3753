"""The previous key schemes of a key migration's window (:mod:`.migration`).

Each one's keys as the version that used it wrote them, its request builders, and its records
read in its layout."""

from __future__ import annotations

from ..config import IdempotencyConfig
from ..errors import ConfigurationError, MissingKeyError
from ..key_migration import KeyScheme
from ..keys import KeyBuilder
from ..layout import layout_of
from ..record import Record
from ..requests import Item, Key, Requests

__all__ = ["Scheme", "SchemeKeys"]


class SchemeKeys:
    """The DynamoDB key a :class:`KeyScheme` gives a caller's key (on the table's key
    attributes), as the version that used it wrote it."""

    __slots__ = ("_builder", "_double_hash", "_prefix")

    def __init__(
        self,
        scheme: KeyScheme,
        *,
        partition_key: str,
        sort_key: str | None,
        max_key_length: int,
        hash_function: str,
    ) -> None:
        self._builder = KeyBuilder(
            prefix=scheme.key_prefix,
            scope=scheme.scope,
            partition_key=partition_key,
            sort_key=sort_key,
            max_key_length=max_key_length,
            hash_function=hash_function,
        )
        # The old shape differs only for a partition key alone and no scope at all.
        self._double_hash = scheme.empty_scope_part and sort_key is None and not scheme.scope
        self._prefix = scheme.key_prefix

    def key(self, key: str, scope: str | None = None) -> tuple[Key, str]:
        """The ``Key`` dict and a printable record id, as :meth:`.keys.KeyBuilder.key`."""
        dkey, record_id = self._builder.key(key, scope)
        if self._double_hash and not scope:
            if not isinstance(key, str) or not key:
                raise MissingKeyError("the idempotency key must be a non-empty string")
            ((name, value),) = dkey.items()
            record_id = f"{self._prefix}##{value['S'][len(self._prefix) + 1 :]}"
            dkey = {name: {"S": record_id}}
        return dkey, record_id


class Scheme:
    """A previous scheme's keys and request builders, and its metric label."""

    __slots__ = ("keys", "label", "layout", "requests")

    def __init__(self, scheme: KeyScheme, config: IdempotencyConfig) -> None:
        self.keys = SchemeKeys(
            scheme,
            partition_key=config.partition_key,
            sort_key=config.sort_key,
            max_key_length=config.max_key_length,
            hash_function=config.hash_function,
        )
        old = config.with_(
            key_prefix=scheme.key_prefix,
            scope=scheme.scope,
            layout=scheme.layout,
            key_migration=None,
        )
        self.requests = Requests(old)
        self.layout = scheme.layout
        self.label = scheme.name

    def read(self, item: Item) -> Record:
        try:
            return Record.from_item(item, self.layout)
        except (KeyError, ValueError, TypeError) as exc:
            found = layout_of(item)
            what = "no known layout" if found is None else f"the {found.name!r} layout"
            raise ConfigurationError(
                f"the item stored under the previous scheme's key ({self.label}) is in {what}, "
                f"not that scheme's {self.layout.name!r} layout: fix KeyScheme.layout"
            ) from exc
