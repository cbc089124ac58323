"""The corrupted prompt the Patching tab starts from: the prompt with one word swapped for a word of the same kind
("France" -> "Italy"), which the user can then edit."""

from __future__ import annotations

import re

# Each word and its swap, both ways; words of the same kind and, in most tokenizers, one token each.
SWAPS = {"France": "Italy", "Germany": "Spain", "Japan": "China", "England": "Russia", "Paris": "Rome",
         "London": "Berlin", "Europe": "Africa", "Monday": "Friday", "January": "July", "John": "Mary",
         "he": "she", "his": "her", "man": "woman", "king": "queen", "boy": "girl", "cat": "dog", "day": "night",
         "red": "blue", "hot": "cold", "big": "small", "good": "bad", "up": "down"}
SWAPS |= {swap: word for word, swap in list(SWAPS.items())}
FALLBACK_NAME = ("Italy", "France")  # a capitalised word not in SWAPS becomes the first, or the second if it is it
WORD = re.compile(r"[A-Za-z]+")


def corrupted_version(prompt: str) -> str:
    """The prompt with its last swappable word swapped: a word of ``SWAPS``, else the last capitalised word after the
    first (a name, likely) for a country; the prompt as it is when it has neither (the user then edits it)."""
    words = list(WORD.finditer(prompt))
    known = [match for match in words if match.group() in SWAPS]
    if known:
        return replaced(prompt, known[-1], SWAPS[known[-1].group()])
    named = [match for match in words[1:] if match.group()[0].isupper()]
    if named:
        word = named[-1].group()
        return replaced(prompt, named[-1], FALLBACK_NAME[word == FALLBACK_NAME[0]])
    return prompt


def replaced(text: str, match: re.Match, word: str) -> str:
    return text[:match.start()] + word + text[match.end():]
