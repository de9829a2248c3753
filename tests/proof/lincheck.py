"""A linearizability checker for DynamoDB histories: Wing & Gong's search with Lowe's memo (WGL),
run per group of keys (P-compositionality, Horn & Kroening 2015).

No maintained Python checker exists (Porcupine is Go, Knossos Clojure), so this is a compact one
of our own. A history is a list of :class:`Op`: what a client asked (a *call*), what it was
answered (an *outcome*, or ``None`` when the answer never came: a timeout, a dropped connection)
and when, in ``time.monotonic_ns()`` (one clock for every process on Linux). The history is
linearizable if the calls can be put in one order that respects real time (an op that completed
before another was invoked comes first) and in which the sequential model below gives every op
exactly the outcome it observed. An op without an outcome may take effect at any point after its
invocation, or never.

The sequential model is DynamoDB's single-item semantics on items shaped ``{pk, ver, val}``,
written independently of the engine: conditional PutItem / UpdateItem (``SET val ADD ver 1``) /
DeleteItem with their ``ReturnValues``, ``ReturnValuesOnConditionCheckFailure``, consistent
GetItem, TransactWriteItems (all conditions on the state before, every cancellation reason
reported) and TransactGetItems, plus the idempotency layer's claim and complete at its API.

Keys never touched by one op together are independent objects, so the history is split into
groups of keys linked by transactions and each group is checked alone: the search is
exponential in the concurrency of one group, not in the length of the whole history.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

# An item is (ver, val), or None when absent; an idempotency record is ("PENDING", owner) or
# ("COMPLETED", owner, result). The model keeps both kinds in one state, keyed by key.
Item: TypeAlias = tuple[Any, ...] | None
State: TypeAlias = tuple[tuple[str, Item], ...]  # sorted by key, absent keys left out
UNKNOWN: Any = "?"  # an outcome field that was not observed (matches anything)


@dataclass(frozen=True, slots=True)
class Cond:
    """A condition on one item: ``always``, ``absent`` (attribute_not_exists(pk)), ``exists``
    (attribute_exists(pk)) or ``ver`` (ver = :n; false when the item is absent)."""

    kind: Literal["always", "absent", "exists", "ver"] = "always"
    ver: int = 0

    def holds(self, item: Item) -> bool:
        if self.kind == "always":
            return True
        if self.kind == "absent":
            return item is None
        if self.kind == "exists":
            return item is not None
        return item is not None and item[0] == self.ver


ALWAYS = Cond()


@dataclass(frozen=True, slots=True)
class Get:
    key: str


@dataclass(frozen=True, slots=True)
class Put:
    key: str
    ver: int
    val: str
    cond: Cond = ALWAYS


@dataclass(frozen=True, slots=True)
class Update:
    """``SET val = :val ADD ver :one`` (an absent item is created with ver 1)."""

    key: str
    val: str
    cond: Cond = ALWAYS


@dataclass(frozen=True, slots=True)
class Delete:
    key: str
    cond: Cond = ALWAYS


@dataclass(frozen=True, slots=True)
class Check:
    """A transaction's ConditionCheck."""

    key: str
    cond: Cond


Action: TypeAlias = Put | Update | Delete | Check


@dataclass(frozen=True, slots=True)
class TxWrite:
    actions: tuple[Action, ...]


@dataclass(frozen=True, slots=True)
class TxGet:
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Claim:
    """The idempotency layer's ``claim(key)`` by ``owner`` (a client; leases never run out)."""

    key: str
    owner: str


@dataclass(frozen=True, slots=True)
class Complete:
    key: str
    owner: str
    result: str


Call: TypeAlias = Get | Put | Update | Delete | TxWrite | TxGet | Claim | Complete


def keys_of(call: Call) -> tuple[str, ...]:
    if isinstance(call, TxWrite):
        return tuple(a.key for a in call.actions)
    if isinstance(call, TxGet):
        return call.keys
    return (call.key,)


# --- the sequential model --------------------------------------------------------------------


def _read(state: State, key: str) -> Item:
    for k, item in state:
        if k == key:
            return item
    return None


def _write(state: State, key: str, item: Item) -> State:
    rest = [(k, v) for k, v in state if k != key]
    if item is not None:
        rest.append((key, item))
    return tuple(sorted(rest))


def _written(action: Put | Update | Delete, old: Item) -> Item:
    if isinstance(action, Put):
        return (action.ver, action.val)
    if isinstance(action, Update):
        return ((old[0] if old is not None else 0) + 1, action.val)
    return None


def apply(state: State, call: Call) -> tuple[State, tuple[Any, ...]]:
    """The model: the state after ``call`` and the one outcome DynamoDB gives it.

    Outcomes: ``("item", item)`` for Get; ``("ok", item)`` for a write (the old item for Put
    and Delete with ALL_OLD, the new one for Update with ALL_NEW); ``("failed", current)`` for a
    failed condition; ``("ok",)`` or ``("cancelled", codes)`` for TxWrite; ``("items", items)``
    for TxGet; ``("claimed",)``, ``("in_progress",)`` or ``("replay", result)`` for Claim;
    ``("ok",)`` or ``("lost",)`` for Complete.
    """
    if isinstance(call, Get):
        return state, ("item", _read(state, call.key))
    if isinstance(call, (Put, Update, Delete)):
        old = _read(state, call.key)
        if not call.cond.holds(old):
            return state, ("failed", old)
        new = _written(call, old)
        return _write(state, call.key, new), ("ok", new if isinstance(call, Update) else old)
    if isinstance(call, TxWrite):
        codes = tuple(
            "None" if a.cond.holds(_read(state, a.key)) else "ConditionalCheckFailed"
            for a in call.actions
        )
        if any(code != "None" for code in codes):
            return state, ("cancelled", codes)
        for action in call.actions:
            if not isinstance(action, Check):
                state = _write(state, action.key, _written(action, _read(state, action.key)))
        return state, ("ok",)
    if isinstance(call, TxGet):
        return state, ("items", tuple(_read(state, k) for k in call.keys))
    if isinstance(call, Claim):
        record = _read(state, call.key)
        if record is None:
            return _write(state, call.key, ("PENDING", call.owner)), ("claimed",)
        if record[0] == "COMPLETED":
            return state, ("replay", record[2])
        return state, ("claimed",) if record[1] == call.owner else ("in_progress",)
    record = _read(state, call.key)
    if record == ("PENDING", call.owner):
        return _write(state, call.key, ("COMPLETED", call.owner, call.result)), ("ok",)
    if record == ("COMPLETED", call.owner, call.result):
        return state, ("ok",)  # a retry that finds its own completion
    return state, ("lost",)


def matches(expected: Any, observed: Any) -> bool:
    """``observed`` equals ``expected`` except where it holds :data:`UNKNOWN`."""
    if observed is UNKNOWN or observed == UNKNOWN:
        return True
    if isinstance(expected, tuple) and isinstance(observed, tuple):
        return len(expected) == len(observed) and all(map(matches, expected, observed))
    return bool(expected == observed)


# --- histories -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Op:
    """One call in a history. ``outcome`` and ``completed`` are ``None`` when no answer came."""

    client: str
    call: Call
    outcome: tuple[Any, ...] | None
    invoked: int
    completed: int | None

    def __post_init__(self) -> None:
        if self.completed is not None and self.completed < self.invoked:
            raise ValueError(f"{self}: completed before it was invoked")
        if (self.outcome is None) != (self.completed is None):
            raise ValueError(f"{self}: an outcome needs a completion time and vice versa")


@dataclass
class Verdict:
    """The result of :func:`check`. ``ok`` is False with ``explanation`` saying why."""

    ok: bool
    ops: int
    groups: int
    largest_group: int
    explanation: str = ""
    states_explored: int = 0
    failing_keys: tuple[str, ...] = field(default_factory=tuple)

    def __bool__(self) -> bool:
        return self.ok


class GaveUp(Exception):
    """The search passed its step budget: neither linearizable nor not, as far as we know."""


def partition(ops: Sequence[Op]) -> list[list[Op]]:
    """Ops split into groups of keys linked by multi-key calls (union-find), history order kept."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for op in ops:
        first, *rest = keys_of(op.call)
        for other in rest:
            parent[find(other)] = find(first)
    groups: dict[str, list[Op]] = {}
    for op in ops:
        groups.setdefault(find(keys_of(op.call)[0]), []).append(op)
    return list(groups.values())


def check(ops: Iterable[Op], *, max_steps: int = 20_000_000) -> Verdict:
    """Is the history linearizable? Raises :class:`GaveUp` past ``max_steps`` search steps."""
    history = list(ops)
    groups = partition(history)
    explored = 0
    for group in groups:
        failure, steps = _wgl(group, max_steps)
        explored += steps
        if failure is not None:
            return Verdict(
                False,
                len(history),
                len(groups),
                max(map(len, groups)),
                failure,
                explored,
                tuple(sorted({k for op in group for k in keys_of(op.call)})),
            )
    return Verdict(True, len(history), len(groups), max(map(len, groups), default=0), "", explored)


_NEVER = 1 << 62  # the completion time of an op that never completed


def _wgl(ops: list[Op], max_steps: int) -> tuple[str | None, int]:
    """WGL on one group: ``(None, steps)`` if linearizable, else ``(explanation, steps)``."""
    n = len(ops)
    # Events as a doubly linked list over node ids: 0 is the head, 1..2n the events in time
    # order (at equal times calls first: ops whose times touch are concurrent).
    events = sorted(
        [(op.invoked, 0, i) for i, op in enumerate(ops)]
        + [(_NEVER if op.completed is None else op.completed, 1, i) for i, op in enumerate(ops)]
    )
    is_call = [False] + [kind == 0 for _, kind, _ in events]
    op_of = [-1] + [i for _, _, i in events]
    nxt = [*range(1, 2 * n + 1), -1]
    prv = [-1, *range(0, 2 * n)]
    match = [0] * (2 * n + 1)  # a call node -> its return node
    call_node = {}
    for node in range(1, 2 * n + 1):
        if is_call[node]:
            call_node[op_of[node]] = node
        else:
            match[call_node[op_of[node]]] = node

    def lift(node: int) -> None:
        for x in (node, match[node]):
            nxt[prv[x]] = nxt[x]
            if nxt[x] != -1:
                prv[nxt[x]] = prv[x]

    def unlift(node: int) -> None:
        for x in (match[node], node):
            nxt[prv[x]] = x
            if nxt[x] != -1:
                prv[nxt[x]] = x

    state: State = ()
    linearized = 0
    seen: set[tuple[int, State]] = set()
    stack: list[tuple[int, State]] = []
    order: list[int] = []
    best: tuple[list[int], int, State] = ([], -1, ())
    steps = 0
    node = nxt[0]
    while nxt[0] != -1:
        steps += 1
        if steps > max_steps:
            raise GaveUp(f"{n} ops, {steps} steps, {len(seen)} states")
        i = op_of[node]
        if is_call[node]:
            new_state, expected = apply(state, ops[i].call)
            if ops[i].outcome is None or matches(expected, ops[i].outcome):
                candidate = linearized | (1 << i)
                if (candidate, new_state) not in seen:
                    seen.add((candidate, new_state))
                    stack.append((node, state))
                    order.append(i)
                    state, linearized = new_state, candidate
                    lift(node)
                    node = nxt[0]
                    continue
            node = nxt[node]
        else:
            # An op's completion was reached before it could be linearized: undo the last choice.
            if len(order) > len(best[0]):
                best = (list(order), i, state)
            if not stack:
                return _explain(ops, *best), steps
            node, state = stack.pop()
            linearized &= ~(1 << order.pop())
            unlift(node)
            node = nxt[node]
    return None, steps


def _explain(ops: list[Op], order: list[int], blocked: int, state: State) -> str:
    """Why the search failed, from its deepest point: the longest prefix it could linearize and
    the op it could not place next, with the model's answer for it there."""
    lines = [f"not linearizable ({len(ops)} ops on these keys)."]
    lines.append(f"Longest linearizable prefix ({len(order)} ops), last 8:")
    lines += [f"  {_describe(ops[i])}" for i in order[-8:]]
    lines.append(f"State after it: {state}")
    if blocked >= 0:
        op = ops[blocked]
        _, expected = apply(state, op.call)
        lines.append(f"Cannot place next: {_describe(op)}")
        lines.append(f"  the model answers it {expected} there")
        window = [
            o
            for o in ops
            if o is not op
            and o.invoked <= (op.completed or _NEVER)
            and (o.completed or _NEVER) >= op.invoked
        ]
        lines.append(f"Concurrent with it ({len(window)}), first 8:")
        lines += [f"  {_describe(o)}" for o in window[:8]]
    return "\n".join(lines)


def _describe(op: Op) -> str:
    end = "never" if op.completed is None else str(op.completed)
    return f"{op.client} {op.call} -> {op.outcome} [{op.invoked}, {end}]"
