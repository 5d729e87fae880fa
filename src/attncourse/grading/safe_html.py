"""What of a student's notebook may be active in a browser of the course staff: nothing.

Every page the course renders from a student's notebook (formgrader's view of the autograded notebook, the
feedback) goes through nbconvert's bleach-based sanitizer with the plain tags the course's own cells use: no
`<script>`, event handlers, SVG, iframes, forms, styles or `javascript:` links, no output types that run code
(JavaScript, widget views), no widget state. The autograded notebook itself is sanitized before it is written
to `autograded/`, so formgrader never sees the student's markup.
"""
import functools
import re
from html.parser import HTMLParser
from typing import Any

import bleach
from bleach import ALLOWED_ATTRIBUTES, ALLOWED_TAGS
from nbconvert.filters.markdown import markdown2html
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbformat import NotebookNode

TAGS = sorted(set(ALLOWED_TAGS) | {"div", "span", "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "table",
                                   "thead", "tbody", "tr", "th", "td", "pre", "sup", "sub", "img", "del"})
COURSE_CLASSES = {"course-title"}  # the title slide; the course's verdict badges are added after sanitizing
PROTOCOLS = ["http", "https", "mailto", "attachment"]  # links; images without a scheme are the course's files


def _attribute(tag: str, name: str, value: str) -> bool:
    if name == "class":
        return tag == "div" and value in COURSE_CLASSES
    if tag == "img":
        return name in ("src", "alt", "title", "width", "height")
    return name in ALLOWED_ATTRIBUTES.get(tag, [])


ATTRIBUTES = {tag: _attribute for tag in TAGS}


def sanitizer(**kwargs: Any) -> SanitizeHTML:
    return SanitizeHTML(tags=TAGS, attributes=ATTRIBUTES, **kwargs)


def clean_html(text: str) -> str:
    cleaned: str = bleach.clean(text, tags=TAGS, attributes=ATTRIBUTES, protocols=PROTOCOLS, strip_comments=True)
    return cleaned


class _Probe(HTMLParser):
    """Whether rendered HTML holds anything the sanitizer would remove."""

    def __init__(self) -> None:
        super().__init__()
        self.unsafe = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TAGS:
            self.unsafe = True
        for name, value in attrs:
            url = re.sub(r"[\s\x00-\x1f]", "", value or "").lower()
            scheme = url.split(":", 1)[0] if re.match(r"^[a-z][a-z0-9+.-]*:", url) else ""
            if not _attribute(tag, name, value or "") or (name in ("href", "src") and scheme
                                                           and scheme not in PROTOCOLS):
                self.unsafe = True

    handle_startendtag = handle_starttag


@functools.lru_cache(maxsize=4096)  # the instructor's cells are the same in every student's notebook
def safe_markdown(source: str) -> str:
    """A markdown cell's source that renders inert: rendered as nbconvert renders it (a renderer that lets
    `javascript:` links through), and if that HTML holds anything unsafe, the sanitized HTML replaces the
    markdown (math stays for MathJax). A cell that renders clean keeps its markdown."""
    rendered = markdown2html(source)
    probe = _Probe()
    probe.feed(rendered)
    return clean_html(rendered) if probe.unsafe else source


def sanitize_notebook(nb: NotebookNode) -> NotebookNode:
    """Make a student's notebook inert for a browser, in place: markup sanitized in every cell and output,
    attachments other than images dropped, widget state removed."""
    clean = sanitizer()
    nb.metadata.pop("widgets", None)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type in ("markdown", "raw"):
            cell.source = safe_markdown(cell.source)
        else:
            clean.preprocess_cell(cell, {}, index)
        attachments = cell.get("attachments") or {}
        for name in list(attachments):
            attachments[name] = {k: v for k, v in attachments[name].items() if k in ("image/png", "image/jpeg")}
    return nb
