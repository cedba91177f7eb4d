"""What a scan preview draws over its points: a legend of its colours and a scale bar.

The legend sits in the top-left corner, one entry a line: a square swatch of the colour, then its
name in capitals of a 3 x 5 px font drawn twice as large. The scale bar sits in the bottom-left
corner, its length a round figure (1, 2 or 5 times a power of ten metres) of at most a quarter of
the image's width in metres, labelled with it. Both are drawn last, over the points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from acres_lidar_ros.errors import OutputError

MARGIN_PX = 4  # from the image's edges to the legend and the scale bar
GLYPH_SCALE = 2  # each font pixel is drawn as GLYPH_SCALE x GLYPH_SCALE image pixels
LINE_PX = 12  # rows from one legend entry to the next
SWATCH_PX = 8  # side of a legend entry's colour square
TEXT_OFFSET_PX = 12  # from the swatch's left edge to its label's
SCALE_BAR_PX = 3  # thickness of the scale bar
SCALE_BAR_FRACTION = 0.25  # the scale bar is at most this fraction of the image's width
TEXT_RGB = np.array([235, 235, 235], np.uint8)
SCALE_BAR_RGB = np.array([255, 255, 255], np.uint8)
PANEL_RGB = np.array([0, 0, 0], np.uint8)  # behind the legend and the scale bar's label

# 3 x 5 px glyphs: five rows top to bottom, '#' is ink.
_GLYPH_ROWS = {
    "A": ".#. #.# ### #.# #.#",
    "B": "##. #.# ##. #.# ##.",
    "C": ".## #.. #.. #.. .##",
    "D": "##. #.# #.# #.# ##.",
    "E": "### #.. ##. #.. ###",
    "F": "### #.. ##. #.. #..",
    "G": ".## #.. #.# #.# .##",
    "H": "#.# #.# ### #.# #.#",
    "I": "### .#. .#. .#. ###",
    "J": "..# ..# ..# #.# .#.",
    "K": "#.# #.# ##. #.# #.#",
    "L": "#.. #.. #.. #.. ###",
    "M": "#.# ### ### #.# #.#",
    "N": "##. #.# #.# #.# #.#",
    "O": ".#. #.# #.# #.# .#.",
    "P": "##. #.# ##. #.. #..",
    "Q": ".#. #.# #.# ##. .##",
    "R": "##. #.# ##. #.# #.#",
    "S": ".## #.. .#. ..# ##.",
    "T": "### .#. .#. .#. .#.",
    "U": "#.# #.# #.# #.# ###",
    "V": "#.# #.# #.# #.# .#.",
    "W": "#.# #.# ### ### #.#",
    "X": "#.# #.# .#. #.# #.#",
    "Y": "#.# #.# .#. .#. .#.",
    "Z": "### ..# .#. #.. ###",
    "0": "### #.# #.# #.# ###",
    "1": ".#. ##. .#. .#. ###",
    "2": "##. ..# .#. #.. ###",
    "3": "##. ..# .#. ..# ##.",
    "4": "#.# #.# ### ..# ..#",
    "5": "### #.. ##. ..# ##.",
    "6": ".## #.. ### #.# ###",
    "7": "### ..# .#. .#. .#.",
    "8": "### #.# ### #.# ###",
    "9": "### #.# ### ..# ##.",
    ".": "... ... ... ... .#.",
    "-": "... ... ### ... ...",
    "+": "... .#. ### .#. ...",
    "_": "... ... ... ... ###",
    " ": "... ... ... ... ...",
}


def _glyph(char: str) -> np.ndarray:
    rows = _GLYPH_ROWS.get(char)
    if rows is None:
        raise OutputError(f"preview text {char!r}: the preview's font has {''.join(sorted(_GLYPH_ROWS))}")
    return np.array([[c == "#" for c in line] for line in rows.split()], bool)


def text_mask(text: str) -> np.ndarray:
    """(10, 8 n - 2) bool ink of ``text`` (capitals): 3 x 5 px glyphs, one column apart, doubled."""
    glyphs = [_glyph(c) for c in text.upper()]
    if not glyphs:
        return np.zeros((5 * GLYPH_SCALE, 0), bool)
    spaced = [np.hstack([g, np.zeros((5, 1), bool)]) for g in glyphs]
    mask = np.hstack(spaced)[:, :-1]
    return np.kron(mask, np.ones((GLYPH_SCALE, GLYPH_SCALE), bool)).astype(bool)


def draw_text(image: np.ndarray, row: int, col: int, text: str, rgb: np.ndarray = TEXT_RGB) -> int:
    """Draw ``text`` with its top-left corner at (``row``, ``col``), clipped to the image; returns
    the column after it."""
    mask = text_mask(text)
    height, width = image.shape[:2]
    rows, cols = np.nonzero(mask)
    rows, cols = rows + row, cols + col
    inside = (rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)
    image[rows[inside], cols[inside]] = rgb
    return col + mask.shape[1]


def scale_bar_length_m(half_width_m: float) -> float:
    """The scale bar's length: the largest 1, 2 or 5 times a power of ten metres that is at most
    ``SCALE_BAR_FRACTION`` of the view's width (``2 half_width_m``)."""
    limit_m = SCALE_BAR_FRACTION * 2.0 * half_width_m
    power = 10.0 ** math.floor(math.log10(limit_m))
    return max(step * power for step in (1.0, 2.0, 5.0) if step * power <= limit_m * (1 + 1e-12))


def length_label(length_m: float) -> str:
    """``"20 M"``, ``"0.5 M"``: a scale bar's length as its label shows it."""
    return f"{length_m:g} M"


def draw_scale_bar(image: np.ndarray, half_width_m: float) -> float:
    """Draw the scale bar in the bottom-left corner; returns its length in metres."""
    size_px = image.shape[0]
    metres_per_px = 2.0 * half_width_m / size_px
    length_m = scale_bar_length_m(half_width_m)
    length_px = int(round(length_m / metres_per_px))
    bottom = size_px - MARGIN_PX
    image[bottom - SCALE_BAR_PX : bottom, MARGIN_PX : MARGIN_PX + length_px] = SCALE_BAR_RGB
    label = length_label(length_m)
    top = bottom - SCALE_BAR_PX - 2 - 5 * GLYPH_SCALE
    image[top - 1 : bottom - SCALE_BAR_PX - 1, MARGIN_PX - 1 : MARGIN_PX + text_mask(label).shape[1] + 1] = PANEL_RGB
    draw_text(image, top, MARGIN_PX, label)
    return length_m


def draw_legend(image: np.ndarray, entries: Sequence[tuple[str, np.ndarray]]) -> None:
    """Draw one legend line per (name, rgb) of ``entries`` from the top-left corner down: the
    entry ``i``'s swatch covers rows ``MARGIN_PX + i LINE_PX`` to ``+ SWATCH_PX`` and columns
    ``MARGIN_PX`` to ``+ SWATCH_PX``."""
    if not entries:
        return
    width = max(text_mask(name).shape[1] for name, _ in entries) + TEXT_OFFSET_PX
    bottom = MARGIN_PX + len(entries) * LINE_PX
    image[MARGIN_PX - 2 : bottom, MARGIN_PX - 2 : MARGIN_PX + width + 2] = PANEL_RGB
    for i, (name, rgb) in enumerate(entries):
        top = MARGIN_PX + i * LINE_PX
        image[top : top + SWATCH_PX, MARGIN_PX : MARGIN_PX + SWATCH_PX] = rgb
        draw_text(image, top - 1, MARGIN_PX + TEXT_OFFSET_PX, name)
