"""Command-line words: negative numbers that argparse would take for options."""

from __future__ import annotations


def mark_negative_numbers(argv: list[str], number_options: dict[str, int]) -> list[str]:
    """``argv`` with the negative values (``--pose 0 0 -1e6 0 0 0``) of the options in
    ``number_options`` (option -> how many values it takes) marked as values: argparse reads a word starting with ``-`` as an option unless it looks like ``-1`` or
    ``-1.5``, so ``-1e6`` or ``-inf`` would be refused. A leading space keeps the word a value;
    ``float`` and ``int`` ignore it."""
    out = list(argv)
    i = 0
    while i < len(out):
        count = number_options.get(out[i], 0)
        for j in range(i + 1, min(i + 1 + count, len(out))):
            word = out[j]
            if word.startswith("-") and not word.startswith("--") and _is_number(word):
                out[j] = " " + word
        i += 1 + count if count else 1
    return out


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True
