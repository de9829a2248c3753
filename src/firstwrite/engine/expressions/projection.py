"""ProjectionExpression (and ReturnValues UPDATED_*): keep only the named document paths.

Projection keeps the shape of the item: ``a.b`` returns ``{"a": {"M": {"b": ...}}}``;
list indexes select elements, which come back as a shorter list in index order
(``l[3], l[1]`` -> ``[l1, l3]``). Paths that do not exist are left out, and so is a parent
left with nothing selected below it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..values import AttributeValue, Item
from .ast import Path

# A trie of requested paths: part -> subtrie; ``None`` marks "take the whole value".
Trie = dict[Any, Any]


def build_trie(paths: Iterable[Path]) -> Trie:
    root: Trie = {}
    for path in paths:
        node = root
        for part in path[:-1]:
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            node = nxt
        node[path[-1]] = None  # paths never overlap, so nothing is overwritten
    return root


def project_item(item: Item, trie: Trie) -> Item:
    out: Item = {}
    for name, sub in trie.items():
        value = item.get(name)
        if value is None:
            continue
        picked = value if sub is None else _pick(value, sub)
        if picked is not None:
            out[name] = picked
    return out


def _pick(value: AttributeValue, trie: Trie) -> AttributeValue | None:
    keys = list(trie)
    if isinstance(keys[0], int):
        elements = value.get("L")
        if elements is None:
            return None
        chosen = []
        for index in sorted(keys):
            if index < len(elements):
                sub = trie[index]
                picked = elements[index] if sub is None else _pick(elements[index], sub)
                if picked is not None:
                    chosen.append(picked)
        return {"L": chosen} if chosen else None
    members = value.get("M")
    if members is None:
        return None
    out: dict[str, AttributeValue] = {}
    for key in keys:
        member = members.get(key)
        if member is None:
            continue
        sub = trie[key]
        picked = member if sub is None else _pick(member, sub)
        if picked is not None:
            out[key] = picked
    return {"M": out} if out else None
