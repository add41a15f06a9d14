"""Cutting text where a reader sees a character end.

A limit counts code points, but what a screen draws as one character can be several: a
letter and its accents (``e`` U+0301), a flag (two regional indicators), an emoji family
(people joined by U+200D), a skin tone, a Hindi conjunct (``क्ष``: a consonant, a virama,
a consonant). Cut between them, the text shows something that was never written: half a
flag is a letter in a box, a family a lone man and a dangling joiner, ``é`` an ``e``.

This is the part of Unicode's extended grapheme clusters (UAX #29) that feed text meets,
without its tables: the cut moves back to the start of the cluster it went through.
"""

from __future__ import annotations

import unicodedata

__all__ = ["cut_text", "shown"]

_ZWJ = "\u200d"
_REGIONAL_INDICATORS = range(0x1F1E6, 0x1F200)
_VIRAMA = 9  # unicodedata.combining() of a virama (Devanagari U+094D, Bengali, ...)


def _extends(char: str) -> bool:
    """A character drawn as part of the one before it."""
    code = ord(char)
    return (unicodedata.category(char) in ("Mn", "Mc", "Me")
            or char in "\u200c\u200d"
            or 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF  # variation selectors
            or 0x1F3FB <= code <= 0x1F3FF  # skin tones
            or 0xE0020 <= code <= 0xE007F  # tags (a subdivision's flag)
            or 0x1160 <= code <= 0x11FF)  # Hangul vowels and final consonants (jamo)


def _inside_cluster(text: str, index: int) -> bool:
    """Whether a cut before ``text[index]`` goes through a cluster."""
    char, before = text[index], text[index - 1]
    if _extends(char) or before == _ZWJ:
        return True
    if unicodedata.combining(before) == _VIRAMA and char.isalpha():
        return True  # a conjunct: the virama joins the consonants on either side
    if ord(char) in _REGIONAL_INDICATORS:
        run = 0  # regional indicators pair up from the first of a run
        while index - run - 1 >= 0 and ord(text[index - run - 1]) in _REGIONAL_INDICATORS:
            run += 1
        return run % 2 == 1
    return False


def cut_text(text: str, limit: int) -> str:
    """At most ``limit`` code points of ``text``, ending where a character as drawn
    ends. A single cluster longer than ``limit`` (hundreds of stacked accents) is cut
    where the limit falls, rather than to nothing."""
    if len(text) <= limit:
        return text
    end = limit
    while end > 0 and _inside_cluster(text, end):
        end -= 1
    return text[:end] if end > 0 else text[:limit]


def shown(text: str, limit: int) -> str:
    """``text`` as one line of a message shows it: white space runs as one space, no
    control characters, at most ``limit`` characters (the last one ``…`` when cut).
    What a server sends (a page's title, a ``Location``, a ``Content-Encoding``) goes
    into errors and warnings so, never whole: a 20 KB header made a 20 KB report line."""
    text = "".join(c for c in " ".join(text.split()) if c.isprintable())
    return text if len(text) <= limit else cut_text(text, limit - 1) + "\u2026"
