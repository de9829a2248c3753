"""Everything ``Engine(...)`` takes can be imported from ``firstwrite.engine``, the package a user
imports ``Engine`` from: no reaching into ``firstwrite.engine.features.ttl`` for ``TTLConfig``."""

from __future__ import annotations

import inspect
import typing

import firstwrite.engine
from firstwrite.engine.api import Engine


def _named_types(annotation: object) -> set[object]:
    """The classes and aliases an annotation names, ``None`` and builtins left out."""
    found: set[object] = set()
    stack = [annotation]
    while stack:
        current = stack.pop()
        arguments = typing.get_args(current)
        if arguments and typing.get_origin(current) is not typing.Literal:
            stack.extend(arguments)
        elif current is not type(None) and getattr(current, "__module__", "").startswith(
            "firstwrite."
        ):
            found.add(current)
    return found


def test_every_type_engine_takes_is_exported() -> None:
    hints = typing.get_type_hints(Engine.__init__, include_extras=True)
    parameters = inspect.signature(Engine).parameters
    wanted = {t for name in parameters if name in hints for t in _named_types(hints[name])}
    names = {t.__name__ for t in wanted if hasattr(t, "__name__")}
    assert {"Clock", "TTLConfig", "IndexConfig"} <= names
    for kind in wanted:
        assert getattr(firstwrite.engine, kind.__name__) is kind, kind
        assert kind.__name__ in firstwrite.engine.__all__


def test_durability_is_exported_with_its_names() -> None:
    assert typing.get_args(firstwrite.engine.Durability) == ("full", "normal")
    assert "Durability" in firstwrite.engine.__all__


def test_ttl_config_from_the_package_configures_an_engine() -> None:
    from firstwrite.engine import Engine as Exported
    from firstwrite.engine import TTLConfig

    config = TTLConfig(sweep_interval=None, lag=5.0)
    with Exported(ttl_config=config) as engine:
        assert engine.ttl._config is config
