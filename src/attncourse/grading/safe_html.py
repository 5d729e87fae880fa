"""What of a student's notebook may be active in a browser of the course staff: nothing.

Every page the course renders from a student's notebook (formgrader's view of the autograded notebook, the
feedback) goes through nbconvert's bleach-based sanitizer with the plain tags the course's own cells use: no
`<script>`, event handlers, SVG, iframes, forms, styles or `javascript:` links, no output types that run code
(JavaScript, widget views), no widget state. The autograded notebook itself is sanitized before it is written
to `autograded/`, so formgrader never sees the student's markup.
"""
import functools
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


@functools.lru_cache(maxsize=4096)  # the instructor's cells are the same in every student's notebook
def safe_markdown(source: str) -> str:
    """A markdown cell's source that renders inert: rendered as nbconvert renders it (a renderer that lets
    `javascript:` links through) and sanitized; where the sanitizer changed anything, its HTML replaces the
    markdown (math stays for MathJax). A cell the sanitizer leaves as it is keeps its markdown: one policy,
    the sanitizer's, compared rather than predicted."""
    rendered = markdown2html(source)
    cleaned = clean_html(rendered)
    return source if cleaned == rendered else cleaned


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
