"""Executing the decks and writing offline HTML slides (reveal.js and MathJax from local copies)."""
import copy
import shutil
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert import SlidesExporter

from .grading.execution import QuietKernel

class QuietClient(QuietKernel, NotebookClient):
    pass


TEMPLATES = Path(__file__).parent / "templates"
# Local copies installed from the npm registry by the setup (`npm install` in build/vendor).
VENDOR_PACKAGES = {"reveal.js": ["dist", "plugin"], "mathjax": ["MathJax.js", "config", "extensions", "fonts",
                                                                 "jax", "localization"],
                   "requirejs": ["require.js"], "jquery": ["dist"]}


def execute(path, timeout=120):
    """Run a notebook top to bottom in its own folder; returns (executed notebook, seconds)."""
    nb = nbformat.read(path, as_version=4)
    start = time.time()
    QuietClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(Path(path).parent)}}).execute()
    return nb, time.time() - start


def copy_vendor(node_modules, out_dir):
    """Copy the parts of reveal.js, MathJax, require.js and jQuery that the slides load."""
    for package, parts in VENDOR_PACKAGES.items():
        for part in parts:
            src, dst = Path(node_modules) / package / part, Path(out_dir) / "vendor" / package / part
            if not src.exists():
                raise FileNotFoundError(f"{src} 不存在：请先运行安装脚本（npm 安装 reveal.js 与 MathJax）")
            if dst.exists():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)


def exporter():
    return SlidesExporter(
        template_name="course_reveal", extra_template_basedirs=[str(TEMPLATES)],
        reveal_url_prefix="vendor/reveal.js", reveal_theme="white", reveal_transition="none",
        reveal_scroll=True, reveal_width="1280", reveal_height="800",
        mathjax_url="vendor/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
        require_js_url="vendor/requirejs/require.js", jquery_url="vendor/jquery/dist/jquery.min.js",
        font_awesome_url="", embed_images=True)


def write_slides(executed_nb, deck_path, out_dir):
    """`<out_dir>/<deck>.slides.html`, images embedded, scripts from `<out_dir>/vendor/`."""
    # nbconvert embeds only images below the path it is given: point it at the course root and
    # make the decks' `../img/` links relative to that.
    nb = copy.deepcopy(executed_nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = cell.source.replace("](../img/", "](img/").replace('src="../img/', 'src="img/')
    root = Path(deck_path).resolve().parent.parent
    body, _ = exporter().from_notebook_node(nb, resources={"metadata": {"path": str(root)}})
    target = Path(out_dir) / (Path(deck_path).stem + ".slides.html")
    target.write_text(body, encoding="utf-8")
    return target
