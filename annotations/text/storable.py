"""Text a database column can hold. Postgres text and jsonb cannot hold U+0000, and UTF-8 cannot encode an unpaired
surrogate (a pair decodes to one character, so any surrogate left in a str is unpaired). Every check of text that
arrives from outside (a request, a file, a form, a command) asks here; each caller words the refusal for its reader.
"""

NUL = "U+0000"


def unstorable_character(text: str) -> str | None:
    """Why the text cannot be stored, named by its character: a NUL ("U+0000") before any surrogate ("the lone
    surrogate U+D800"), or None when it can be."""
    if "\x00" in text:
        return NUL
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"the lone surrogate U+{ord(text[exc.start]):04X}"
    return None


def is_storable(text: str) -> bool:
    return unstorable_character(text) is None
