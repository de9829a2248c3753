"""The console sits above the engine and the layer: the engine never imports it, and it reaches
the engine only through the modules any client of the engine uses."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def _architecture() -> ModuleType:
    """tests/test_architecture.py, whose import checker these tests reuse (loaded by path:
    ``tests`` is not a package)."""
    path = Path(__file__).resolve().parents[1] / "test_architecture.py"
    spec = importlib.util.spec_from_file_location("firstwrite_test_architecture", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ARCHITECTURE = _architecture()
SRC: Path = _ARCHITECTURE.SRC
_imports = _ARCHITECTURE._imports

# What the console may import from the engine: the public names, the wire protocol function
# (the raw request runner answers exactly as the server does) and the TTL sweeper's settings
# (scenario 2 stages a lagging sweeper).
ALLOWED_ENGINE = {
    "firstwrite.engine",
    "firstwrite.engine.DynamoDBError",
    "firstwrite.engine.Engine",
    "firstwrite.engine.local_client",
    "firstwrite.engine.create_app",
    "firstwrite.engine.wire",
    "firstwrite.engine.wire.wire_call",
    "firstwrite.engine.features.ttl",
    "firstwrite.engine.features.ttl.TTLConfig",
    # The one Host and Origin policy every app the project serves applies (issue 27).
    "firstwrite.engine.server.origins",
    "firstwrite.engine.server.origins.OriginPolicy",
}


def test_the_engine_never_imports_the_console() -> None:
    offenders = {
        str(path.relative_to(SRC)): sorted(
            name for name in _imports(path) if name.startswith("firstwrite.console")
        )
        for path in (SRC / "engine").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_console_uses_only_the_engines_client_surface() -> None:
    used = {
        name
        for path in (SRC / "console").rglob("*.py")
        for name in _imports(path)
        if name.startswith("firstwrite.engine")
    }
    assert used, "the checker must see the console's imports"
    assert used <= ALLOWED_ENGINE, sorted(used - ALLOWED_ENGINE)


def test_the_layer_is_used_through_its_public_package() -> None:
    internal = {
        str(path.relative_to(SRC)): sorted(
            name
            for name in _imports(path)
            if name.startswith("firstwrite.idempotency.")
            and name.rsplit(".", 1)[0] != "firstwrite.idempotency"
            and name
            not in {
                "firstwrite.idempotency.metrics",
                "firstwrite.idempotency.metrics.COUNTERS",
                "firstwrite.idempotency.metrics.HISTOGRAMS",
            }
        )
        for path in (SRC / "console").rglob("*.py")
    }
    assert {k: v for k, v in internal.items() if v} == {}


def test_templates_and_assets_are_package_data() -> None:
    pyproject = (Path(SRC).parents[1] / "pyproject.toml").read_text()
    assert '"console/templates/*.html"' in pyproject and '"console/static/*"' in pyproject
