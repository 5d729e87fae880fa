"""Text that came from a student's code or files, made safe for where it is shown.

Reasons, verdict messages, flags, notes and names can carry what the student wrote: terminal escape sequences
(that could forge a "✔ 20/20" line), markdown or HTML (an image that loads from the network when the report
opens), spreadsheet formulas, megabytes of text. Each place gets its own escaping and a length cap.
"""
import re

MAX = 500  # characters of one message kept for a person to read
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$])")  # every character markdown may read as markup


def cap(text: object, limit: int = MAX) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f"……（共 {len(text)} 个字符，其余省略）"


def plain(text: object, limit: int = MAX) -> str:
    """One line of plain text: control characters (terminal escapes, bidi overrides) removed, capped."""
    return cap(CONTROL.sub("", str(text).replace("\n", " ").replace("\r", " ")), limit)


def for_terminal(text: object, limit: int = MAX) -> str:
    return plain(text, limit)


def for_csv(text: object, limit: int = MAX) -> str:
    """A CSV cell a spreadsheet shows as text: no formula."""
    text = plain(text, limit)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def for_markdown(text: object, limit: int = MAX) -> str:
    """Inline markdown that renders as the same text: no markup, no link or image, no HTML, no table break."""
    return MARKDOWN.sub(r"\\\1", plain(text, limit))
