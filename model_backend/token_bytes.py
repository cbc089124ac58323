"""The bytes each token stands for, and token labels that show a character split across tokens as its bytes
(``⟨e6 97⟩``) instead of U+FFFD: byte-level BPE (GPT-2, SmolLM2) and SentencePiece's byte fallback (Llama, Gemma)
both cut Japanese, emoji and Cyrillic characters into tokens that are no text on their own."""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate

BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")
SENTENCEPIECE_SPACE = "▁"
BYTE_SEPARATOR = "\u00a0"  # a no-break space: inside a byte mark it is not drawn as a visible "␣"


@lru_cache(maxsize=1)
def byte_level_alphabet() -> dict[str, int]:
    """Byte-level BPE's printable stand-in for each byte (``Ġ`` for a space), mapped back to the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {**{chr(b): b for b in printable}, **{chr(256 + n): b for n, b in enumerate(others)}}


def is_byte_level(tokenizer) -> bool:
    """Whether the tokenizer's pieces spell bytes in byte-level BPE's alphabet (its decoder says so)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return backend is not None and "ByteLevel" in repr(backend.decoder)


def token_bytes(tokenizer, token_ids: list[int]) -> list[bytes]:
    """The UTF-8 bytes each token writes: byte-level pieces mapped back to their bytes, SentencePiece's ``▁`` as a
    space and ``<0xE6>`` as its byte, an added or special token as its own text."""
    added = {i: token.content for i, token in getattr(tokenizer, "added_tokens_decoder", {}).items()}
    pieces = tokenizer.convert_ids_to_tokens(list(token_ids))
    alphabet = byte_level_alphabet() if is_byte_level(tokenizer) else None
    written = []
    for token_id, piece in zip(token_ids, pieces):
        if token_id in added or piece is None:
            written.append((added.get(token_id) or tokenizer.decode([token_id])).encode("utf-8"))
        elif alphabet is not None and all(char in alphabet for char in piece):
            written.append(bytes(alphabet[char] for char in piece))
        elif fallback := BYTE_FALLBACK.fullmatch(piece):
            written.append(bytes([int(fallback.group(1), 16)]))
        else:
            written.append(piece.replace(SENTENCEPIECE_SPACE, " ").encode("utf-8"))
    return written


def utf8_characters(data: bytes) -> list[tuple[int, int, str | None]]:
    """``data`` cut into characters: (start, end, the character), or (start, start + 1, None) for a byte that
    begins no complete UTF-8 character."""
    characters, start = [], 0
    while start < len(data):
        length = utf8_length(data[start])
        try:
            character = data[start:start + length].decode("utf-8") if length else None
        except UnicodeDecodeError:
            character = None
        end = start + length if character else start + 1
        characters.append((start, end, character))
        start = end
    return characters


def utf8_length(lead: int) -> int:
    """How many bytes a UTF-8 character starting with byte ``lead`` has; 0 for a byte no character starts with."""
    if lead < 0x80:
        return 1
    return 2 if 0xC2 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF5 else 0


def byte_mark(part: bytes, character: str | None) -> str:
    """A piece of a character as its bytes, and the character it completes when known: ``⟨e6 97 of 日⟩``."""
    hex_bytes = BYTE_SEPARATOR.join(f"{b:02x}" for b in part)
    of = f"{BYTE_SEPARATOR}of{BYTE_SEPARATOR}{character}" if character else ""
    return f"⟨{hex_bytes}{of}⟩"


def sequence_labels(pieces: list[bytes]) -> list[str]:
    """One label per token of a sequence: its text, where a character is split between consecutive tokens each
    token's share of its bytes and the character they complete together (``⟨e6 97 of 日⟩``, ``⟨a5 of 日⟩``), and
    bytes that complete no character as they are (``⟨e6 97⟩``)."""
    ends = list(accumulate(len(piece) for piece in pieces))
    data = b"".join(pieces)
    texts, strays = [""] * len(pieces), [b""] * len(pieces)  # strays: bytes of no character, not yet marked

    def add(k: int, text: str = "", stray: bytes = b"") -> None:
        if strays[k] and not stray:
            texts[k] += byte_mark(strays[k], None)
            strays[k] = b""
        texts[k], strays[k] = texts[k] + text, strays[k] + stray

    for start, end, character in utf8_characters(data):
        first, last = bisect_right(ends, start), bisect_right(ends, end - 1)
        if first == last:
            add(first, text=character) if character is not None else add(first, stray=data[start:end])
            continue
        for k in range(first, last + 1):
            add(k, text=byte_mark(data[max(start, ends[k] - len(pieces[k])):min(end, ends[k])], character))
    for k in range(len(pieces)):
        add(k)
    return texts


def token_labels(pieces: list[bytes]) -> list[str]:
    """Each token's label read on its own (a lens cell, a prediction): a split character as its bytes only."""
    return [whole_text(piece) or sequence_labels([piece])[0] for piece in pieces]


def whole_text(piece: bytes) -> str | None:
    """The piece's text when it is whole UTF-8 (most tokens), else None."""
    try:
        return piece.decode("utf-8")
    except UnicodeDecodeError:
        return None
