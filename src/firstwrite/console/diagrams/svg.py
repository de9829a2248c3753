"""SVG built safely: :mod:`xml.etree` elements, every text and attribute cleaned first.

Diagrams draw user data (keys, item values, error messages), so nothing is ever pasted into
markup as a string. :func:`add` makes elements through :mod:`xml.etree.ElementTree`, which
escapes ``&``, ``<``, ``>`` and quotes; :func:`clean` first replaces what XML 1.0 cannot hold
at all (control characters, lone surrogates from JSON's ``\\ud800``) and the bidirectional
overrides that could make a label read as something else, each with U+FFFD, so the markup is
well-formed XML and UTF-8 encodable whatever a record contains.

:func:`inline` is the markup for a page (styled by ``static/diagram.css``, linked by the page:
the console's Content-Security-Policy allows no inline style); :func:`standalone` is a file of
its own, that stylesheet embedded, for docs and bug reports.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from copy import deepcopy
from pathlib import Path

SVG_NS = "http://www.w3.org/2000/svg"
STYLESHEET = Path(__file__).resolve().parents[1] / "static" / "diagram.css"
# Not an XML 1.0 Char (control characters, surrogates, U+FFFE/U+FFFF), or a bidirectional
# embedding/override/isolate (U+202A-U+202E, U+2066-U+2069).
_UNSAFE = re.compile(
    "[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]|[\u202a-\u202e\u2066-\u2069]"
)


def clean(value: object, limit: int | None = None) -> str:
    """``value`` as text XML can hold, shortened to ``limit`` characters (ending in "…")."""
    text = _UNSAFE.sub("\ufffd", str(value))
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text


def _attribute(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.1f}".removesuffix(".0")
    return clean(value)


def add(parent: ET.Element | None, tag: str, text: object = None, **attrs: object) -> ET.Element:
    """A ``tag`` element (under ``parent`` when given) with ``text`` and ``attrs`` cleaned.

    Attribute names: a trailing ``_`` is dropped (``class_``), other ``_`` become ``-``
    (``text_anchor``); ``None`` values are left out.
    """
    names = {
        (k[:-1] if k.endswith("_") else k.replace("_", "-")): _attribute(v)
        for k, v in attrs.items()
        if v is not None
    }
    node = ET.Element(tag, names) if parent is None else ET.SubElement(parent, tag, names)
    if text is not None:
        node.text = clean(text)
    return node


def root(
    width: float, height: float, *, ident: str, title: str, desc: str, kind: str
) -> ET.Element:
    """An ``<svg>`` of ``width`` x ``height`` user units that scales to its container, named by
    its ``<title>`` and described by its ``<desc>`` (``ident`` prefixes their ids)."""
    svg = add(
        None,
        "svg",
        xmlns=SVG_NS,
        viewBox=f"0 0 {width:.0f} {height:.0f}",
        width=f"{width:.0f}",
        height=f"{height:.0f}",
        class_=f"fw-diagram fw-{kind}",
        role="img",
        aria_labelledby=f"{ident}-title {ident}-desc",
    )
    add(svg, "title", title, id=f"{ident}-title")
    add(svg, "desc", desc, id=f"{ident}-desc")
    add(svg, "rect", class_="backdrop", x=0, y=0, width=f"{width:.0f}", height=f"{height:.0f}")
    return svg


def inline(svg: ET.Element) -> str:
    """The markup to put in an HTML page (the page links ``static/diagram.css``)."""
    return ET.tostring(svg, encoding="unicode")


def standalone(svg: ET.Element) -> str:
    """An SVG file: the stylesheet embedded (light and dark schemes, print), no script."""
    copy = deepcopy(svg)
    style = ET.Element("style")
    style.text = STYLESHEET.read_text(encoding="utf-8")
    copy.insert(2, style)  # after <title> and <desc>
    body = ET.tostring(copy, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"
