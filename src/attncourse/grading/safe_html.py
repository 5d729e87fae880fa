"""What of a student's notebook may be active in a browser of the course staff: nothing.

Every page the course renders from a student's notebook (formgrader's view of the autograded notebook, the
feedback) goes through nbconvert's bleach-based sanitizer with the plain tags the course's own cells use: no
`<script>`, event handlers, SVG, iframes, forms, styles or `javascript:` links, no output types that run code
(JavaScript, widget views), no widget state. The autograded notebook itself is sanitized before it is written
to `autograded/`, so formgrader never sees the student's markup.
"""
import functools
import re
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
IMAGE_TYPES = ("image/png", "image/jpeg")  # the pasted images (cell attachments) a page shows
# a pasted image as markdown or HTML: ![alt](attachment:name "title") or <img ... src="attachment:name" ...>
PASTED = re.compile(r"""!\[[^\]\n]*\]\(\s*(?:<attachment:([^>\n]+)>|attachment:([^\s)]+))[^)\n]*\)"""
                    r"""|<img\b[^>]*?\bsrc\s*=\s*["']?attachment:([^\s"'>]+)[^>]*>""", re.IGNORECASE)
VOID_SLASH = re.compile(r"<(img|br|hr)\b([^<>]*?)\s*/>")  # mistune writes <img ... />, the sanitizer <img ...>
RENDERED_AS = "attncourse-pasted-image/"  # where safe_markdown's comparison puts `attachment:` (see there)


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
    the sanitizer's, compared rather than predicted.

    nbconvert embeds a pasted image (`attachment:name`) as it renders, so for the comparison each one is
    rendered as a relative image path, which the sanitizer keeps as it keeps `attachment:`. A void element
    written `<img ... />` and `<img ...>` is the same element."""
    rendered = markdown2html(source.replace("attachment:", RENDERED_AS))
    cleaned = clean_html(rendered)
    return source if cleaned == VOID_SLASH.sub(r"<\1\2>", rendered) else cleaned.replace(RENDERED_AS, "attachment:")


def repair_pasted_images(cell: NotebookNode, why: str = "没有随 notebook 保存") -> list[str]:
    """Keep only the pasted images of a markdown cell that a page can show (PNG, JPEG), and put the words
    "［粘贴的图片 name 没有随 notebook 保存］" where the cell shows one it does not carry (an editor that lost it, a
    GIF): nbconvert stops on such a reference. Returns the names replaced, in order."""
    attachments = cell.get("attachments")
    kept = {name: {k: v for k, v in value.items() if k in IMAGE_TYPES and isinstance(v, str)}
            for name, value in (attachments.items() if isinstance(attachments, dict) else ())
            if isinstance(value, dict)}
    kept = {name: value for name, value in kept.items() if value}
    if kept:
        cell["attachments"] = kept
    else:
        cell.pop("attachments", None)
    replaced: list[str] = []

    def words(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group)
        if name in kept:
            return match.group(0)
        replaced.append(name)
        return f"［粘贴的图片 {name} {why}］"
    source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
    cell["source"] = PASTED.sub(words, source)
    return replaced


def sanitize_notebook(nb: NotebookNode) -> NotebookNode:
    """Make a student's notebook inert for a browser, in place: markup sanitized in every cell and output,
    pasted images other than PNG and JPEG dropped (`repair_pasted_images`), widget state removed."""
    clean = sanitizer()
    nb.metadata.pop("widgets", None)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type in ("markdown", "raw"):
            repair_pasted_images(cell)
            cell.source = safe_markdown(cell.source)
        else:
            clean.preprocess_cell(cell, {}, index)
            cell.pop("attachments", None)
    return nb
