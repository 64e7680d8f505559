"""A flame graph as a self-contained SVG, from collapsed stacks (Brendan Gregg's format).

Our own small renderer, so a profile needs nothing downloaded: each frame is a box as wide
as the share of samples whose stack passed through it, callers below callees (the root at
the bottom), siblings in name order; hovering a box shows its full name and samples (an SVG
``<title>``). No script inside: the logviewer serves the file under a policy that forbids
scripts anyway, and the names come from the profiled code.
"""

from __future__ import annotations

import zlib
from typing import Iterable, Mapping
from xml.sax.saxutils import escape, quoteattr

WIDTH = 1200
FRAME_HEIGHT = 16
PAD = 10
TOP = 50
#: Boxes narrower than this (pixels) are left out, with everything above them.
MIN_PX = 0.3
#: The most boxes drawn: bounds the file whatever the stacks.
MAX_BOXES = 20_000
#: Roughly the width of one character at the boxes' font size, for cutting labels.
CHAR_PX = 6.6


class _Node:
    __slots__ = ("name", "count", "children")

    def __init__(self, name: str):
        self.name = name
        self.count = 0
        self.children: dict[str, _Node] = {}


def collapsed(stacks: Mapping[tuple[str, ...], int]) -> str:
    """``root;child;leaf count`` lines (the input of flamegraph.pl, speedscope and others);
    a ``;`` inside a name becomes ``:``."""
    return "".join(";".join(f.replace(";", ":") for f in stack) + f" {n}\n"
                   for stack, n in sorted(stacks.items()) if n > 0)


def _tree(stacks: Iterable[tuple[tuple[str, ...], int]]) -> _Node:
    root = _Node("all")
    for stack, n in stacks:
        if n <= 0:
            continue
        root.count += n
        node = root
        for name in stack:
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = _Node(name)
            child.count += n
            node = child
    return root


def _color(name: str) -> str:
    # flamegraph.pl's "hot" palette, fixed per name so two profiles compare at a glance.
    h = zlib.crc32(name.encode("utf-8", "replace"))
    return f"rgb({205 + h % 50},{(h >> 8) % 230},{(h >> 16) % 55})"


def _depth(node: _Node) -> int:
    return 1 + max((_depth(c) for c in node.children.values()), default=0)


def render(stacks: Mapping[tuple[str, ...], int], title: str = "Flame graph",
           subtitle: str = "", width: int = WIDTH) -> str:
    """The SVG document of ``stacks`` (stack, root first -> samples)."""
    root = _tree(stacks.items())
    total = max(root.count, 1)
    depth = _depth(root)
    height = TOP + depth * FRAME_HEIGHT + 2 * PAD
    scale = (width - 2 * PAD) / total
    out = [f'<?xml version="1.0" standalone="no"?>\n'
           f'<svg version="1.1" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">\n'
           '<style>text{font:11px Verdana,Arial,sans-serif;fill:#000}'
           '.t{font-size:16px}.s{font-size:12px;fill:#555}'
           'g.f:hover rect{stroke:#000;stroke-width:0.6}</style>\n'
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f8f8f8"/>\n'
           f'<text class="t" x="{width / 2:.1f}" y="22" text-anchor="middle">'
           f'{escape(title)}</text>\n'
           f'<text class="s" x="{width / 2:.1f}" y="40" text-anchor="middle">'
           f'{escape(subtitle)}</text>\n']

    drawn = [0]

    def box(node: _Node, x: float, level: int) -> None:
        w = node.count * scale
        if w < MIN_PX or drawn[0] >= MAX_BOXES:
            return
        drawn[0] += 1
        y = height - PAD - (level + 1) * FRAME_HEIGHT
        label = f"{node.name} ({node.count:,} samples, {100.0 * node.count / total:.2f}%)"
        fits = int((w - 6) / CHAR_PX)
        text = node.name if len(node.name) <= fits else \
            (node.name[:fits - 2] + ".." if fits >= 3 else "")
        out.append(f'<g class="f"><title>{escape(label)}</title>'
                   f'<rect x="{PAD + x:.2f}" y="{y}" width="{w:.2f}" '
                   f'height="{FRAME_HEIGHT - 1}" fill="{_color(node.name)}" rx="2" ry="2" '
                   f'data-samples="{node.count}" data-name={quoteattr(node.name)}/>'
                   + (f'<text x="{PAD + x + 3:.2f}" y="{y + FRAME_HEIGHT - 4}">'
                      f'{escape(text)}</text>' if text else "") + '</g>\n')
        cx = x
        for name in sorted(node.children):
            child = node.children[name]
            box(child, cx, level + 1)
            cx += child.count * scale

    box(root, 0.0, 0)
    out.append("</svg>\n")
    return "".join(out)
