"""Issue 3: fault injection, TTL and streams cost nothing while off.

Five engines measured together on the direct client's conditional put: one whose hook lists
were emptied (nothing installed: the least "off" can cost), the engine as constructed (every
feature off, its hooks installed), and one engine per feature switched on in a way that does
nothing for this workload.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _workload as w
from ._common import Section, Settings, Table, run_interleaved, scratch_dir
from .engine_direct import Direct, available

BASELINE = "hook lists emptied (nothing installed)"
AS_IS = "engine as is (features off)"


def _emptied(engine: Any, client: Any) -> None:
    # Streams, TTL and replication stop working on this engine: it only serves as the floor.
    engine.hooks.change_hooks.clear()
    engine.hooks.interceptors.clear()


def _streams(engine: Any, client: Any) -> None:
    client.update_table(
        TableName=w.TABLE,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )


def _ttl(engine: Any, client: Any) -> None:
    client.update_time_to_live(
        TableName=w.TABLE,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
    )


def _faults_never_firing(engine: Any, client: Any) -> None:
    """Throttle an operation on a table the workload never touches: configured, never firing."""
    faults = getattr(engine, "faults", None)
    if faults is None:
        raise RuntimeError("Engine has no fault injector (engine.faults) yet")
    faults.throttle(operation="Scan", table="no-such-table", rate=1.0)
    if not engine.hooks.interceptors:
        raise RuntimeError("a configured fault installed no interceptor")


VARIANTS: dict[str, Callable[[Any, Any], None] | None] = {
    AS_IS: None,
    "streams enabled (NEW_AND_OLD_IMAGES)": _streams,
    "TTL enabled (attribute absent from items)": _ttl,
    "faults configured, never firing": _faults_never_firing,
}


def _hooks(engine: Any) -> str:
    def names(hooks: list[Any]) -> str:
        return (
            ", ".join(
                f"{getattr(h, '__module__', '?')}.{getattr(h, '__qualname__', type(h).__name__)}"
                for h in hooks
            )
            or "none"
        )

    return (
        f"{len(engine.hooks.change_hooks)} change hook(s) ({names(engine.hooks.change_hooks)}) and "
        f"{len(engine.hooks.interceptors)} interceptor(s) ({names(engine.hooks.interceptors)})"
    )


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    section = Section(
        key="overhead",
        title="Cost of fault injection / TTL / streams when off (issue 3)",
        method=[
            "The *success* workload of the direct client (`DirectClient`, `durability='normal'`, "
            "fresh-key conditional puts), on five engines measured together. Baseline: an "
            "engine whose `change_hooks` and `interceptors` lists were emptied after "
            "construction (nothing installed, the least 'off' can cost). **engine as is**: "
            "`Engine(path)` untouched, every feature off (the hooks it installs are listed "
            "below): its ratio is the cost of the features being off.",
            "The other rows switch one feature on in a way that does nothing for this workload "
            "(a stream on the table, TTL on an attribute the items lack, a throttle fault on "
            "Scan of another table): the price of having it on.",
            f"{settings.reps} repetitions of {settings.duration:g} s each, interleaved.",
        ],
    )
    why = available()
    if why is not None:
        section.error = why
        return section
    with scratch_dir("overhead-") as directory:
        contenders = [Direct("success", directory, name=BASELINE, configure=_emptied)]
        for label, configure in VARIANTS.items():
            contenders.append(Direct("success", directory, name=label, configure=configure))
        log("  overhead / success")
        series, skipped = run_interleaved(contenders, settings, log=log)
        probe = Direct("success", directory, name="probe")
        probe.setup()
        as_is = _hooks(probe.engine)
        probe.teardown()
        section.tables.append(
            Table(
                title="conditional put, fresh keys",
                series=series,
                ours=[s.name for s in series if s.name != BASELINE],
                skipped=skipped,
                notes=[
                    f"`Engine(path)` as constructed has {as_is}.",
                    "Ratios near 1.00x (within the spread) mean no measurable cost. "
                    "No pass/fail target: the brief asks for the ratios.",
                ],
            )
        )
    return section
