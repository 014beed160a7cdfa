"""Find a judge's quoted error span in the answer, and return its offsets only when the quote is there exactly once.

Both the answer and the quote are compared after NFC normalisation and with every run of whitespace collapsed to one
space (the quote's own leading and trailing whitespace dropped), so a model that recomposes accents or reflows
line breaks is still found. Offsets are mapped back to the original, unnormalised answer, in code points. A match
must start and end on character boundaries: it may not take a base letter without the combining marks that follow
it. A quote that is missing, empty or occurs more than once (overlapping occurrences included) gets no offsets.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

Status = Literal["found", "not found", "ambiguous", "empty quote"]


@dataclass(frozen=True)
class QuoteMatch:
    status: Status
    start: int | None = None
    end: int | None = None
    occurrences: int = 0

    @property
    def reason(self) -> str | None:
        if self.status == "found":
            return None
        if self.status == "ambiguous":
            return f"ambiguous ({self.occurrences} occurrences)"
        return self.status


def _joins_previous(character: str) -> bool:
    # Combining marks, and Hangul medial vowels and final consonants, compose with what precedes them under NFC.
    code = ord(character)
    return unicodedata.combining(character) != 0 or 0x1160 <= code <= 0x11FF or 0xD7B0 <= code <= 0xD7FF


def _clusters(text: str) -> list[tuple[int, int]]:
    clusters: list[tuple[int, int]] = []
    for index, character in enumerate(text):
        if clusters and _joins_previous(character) and not text[index - 1].isspace():
            clusters[-1] = (clusters[-1][0], index + 1)
        else:
            clusters.append((index, index + 1))
    return clusters


def _comparable(text: str, nfc: bool) -> tuple[str, list[tuple[int, int, int]]]:
    """The comparable form of ``text`` and, for each of its characters, the original span and cluster it came from."""
    pieces: list[str] = []
    origins: list[tuple[int, int, int]] = []
    for cluster_index, (start, end) in enumerate(_clusters(text)):
        chunk = text[start:end]
        if chunk.isspace():
            if pieces and pieces[-1] == " " and origins[-1][2] == cluster_index - 1:
                origins[-1] = (origins[-1][0], end, cluster_index)
                continue
            chunk = " "
        for character in unicodedata.normalize("NFC", chunk) if nfc else chunk:
            pieces.append(character)
            origins.append((start, end, cluster_index))
    return "".join(pieces), origins


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def locate_quote(text: str, quote: str) -> QuoteMatch:
    needle = _collapsed(unicodedata.normalize("NFC", quote))
    if not needle:
        return QuoteMatch("empty quote")
    haystack, origins = _comparable(text, nfc=True)
    if haystack.strip(" ") != _collapsed(unicodedata.normalize("NFC", text)):
        # Some scripts compose across what this module takes for character boundaries; offsets could then land
        # inside a character, so the text is compared as stored, which may miss a quote but never misplaces one.
        haystack, origins = _comparable(text, nfc=False)
        needle = _collapsed(quote)
    starts: list[int] = []
    position = haystack.find(needle)
    while position != -1:
        end = position + len(needle)
        on_boundaries = (position == 0 or origins[position - 1][2] != origins[position][2]) and (
            end == len(haystack) or origins[end - 1][2] != origins[end][2]
        )
        if on_boundaries:
            starts.append(position)
        position = haystack.find(needle, position + 1)
    if not starts:
        return QuoteMatch("not found")
    if len(starts) > 1:
        return QuoteMatch("ambiguous", occurrences=len(starts))
    first = starts[0]
    last = first + len(needle) - 1
    return QuoteMatch("found", start=origins[first][0], end=origins[last][1], occurrences=1)
