"""The student's screens: `python -m attncourse.student` in a student's environment, the JupyterLab it sets up
(opened in Chromium: the notebook, the Validate button and its dialog) and `nbgrader validate` in a terminal.

The student's environment is made as the bundle's README makes it, without installing anything: a fresh venv
whose packages are this one's (a .pth file), with this environment's Jupyter data and config copied into it, so
that `python -m attncourse.student` changes only that venv, never the instructor's tools in this one.
"""
import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from attncourse.browser import Browser, jupyterlab
from attncourse.grading.authoring.variants import answered, load_catalog, source_notebook
from attncourse.grading.cells import grade_id
from attncourse.validate import questions

from conftest import ROOT

pytestmark = pytest.mark.slow  # a fresh venv and the student setup: about a minute

A1, A4 = "a1_scoring", "a4_rope_mla"
ANSWERED = "masked_softmax"  # the one a1 question answered (correctly) in the terminal test
WRONG = "additive_attention"  # answered wrongly in the terminal test
TWO_OF_EIGHT = ("apply_rope", "mla_cache_bytes", "gqa_equivalent_groups")  # a4's questions 1 and 2, answered
HINT = "形状不对：期望 (2, 5, 16)\n检查 view 与 transpose 的顺序"  # a wrong answer's two-line message
SRC = Path(__file__).resolve().parents[1] / "src"


def notebook(aid=A1, answers=(ANSWERED,), wrong=()) -> nbformat.NotebookNode:
    """The released notebook of `aid` with the catalog's correct answer in the `answers` cells and a wrong one in
    the `wrong` cells (a1: ReLU instead of tanh; elsewhere the stub raises a two-line ValueError instead of
    NotImplementedError); every other question untouched."""
    catalog = load_catalog(ROOT, aid)
    rel = nbformat.read(ROOT / "release" / aid / f"{catalog.NOTEBOOK}.ipynb", as_version=4)
    full = answered(rel, source_notebook(ROOT, aid, catalog))
    nb = copy.deepcopy(rel)
    for cell, solved in zip(nb.cells, full.cells, strict=True):
        if grade_id(cell) in answers:
            cell.source = solved.source
        elif grade_id(cell) in wrong and aid == A1:
            assert "torch.tanh" in solved.source
            cell.source = solved.source.replace("torch.tanh", "torch.relu")
        elif grade_id(cell) in wrong:
            assert "raise NotImplementedError()" in cell.source
            cell.source = cell.source.replace("raise NotImplementedError()", f"raise ValueError({HINT!r})")
    return nb


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    """(python, env, what `python -m attncourse.student` printed) of a student's environment."""
    base = tmp_path_factory.mktemp("student")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "course-deps.pth").write_text(f"{SRC}\n{next(Path(sys.prefix).glob('lib/python3*/site-packages'))}\n")
    for folder in ("etc", "share"):
        shutil.copytree(Path(sys.prefix) / folder, venv / folder, dirs_exist_ok=True)
    env = {"JUPYTER_CONFIG_DIR": str(base / "user-config"), "JUPYTER_DATA_DIR": str(base / "user-data"),
           "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    python = str(venv / "bin" / "python")
    setup = subprocess.run([python, "-m", "attncourse.student"], capture_output=True, text=True,
                           env={**os.environ, **env})
    assert setup.returncode == 0, setup.stdout + setup.stderr
    return python, env, setup


def test_the_student_setup_is_quiet_and_chinese(student):
    _, _, setup = student
    assert setup.stdout.strip().startswith("已完成") and len(setup.stdout.strip().splitlines()) == 1, setup.stdout
    assert "\x1b[" not in setup.stdout + setup.stderr and not setup.stderr.strip(), setup.stderr
    from attncourse.student import still_on
    assert still_on(), "the instructor's tools stay on in this (the instructor's) environment"


def test_nbgrader_validate_reports_per_question_in_chinese(student, tmp_path):
    python, env, _ = student
    nbformat.write(notebook(wrong=(WRONG,)), tmp_path / "scoring.ipynb")
    nbgrader = [python, "-m", "nbgrader", "validate", "scoring.ipynb"]
    run = subprocess.run(nbgrader, cwd=tmp_path, capture_output=True, text=True, env={**os.environ, **env})
    out = run.stdout
    assert "✔ 通过：1. 掩蔽 softmax" in out and "✘ 未通过：2. 加性注意力" in out, out + run.stderr[-2000:]
    assert "○ 未作答：3. 缩放点积注意力" in out and "共 7 题：通过 1，未通过 1，未作答 5" in out, out
    failed = out.split("✘ 未通过：2.")[1].split("○")[0].strip().splitlines()[1:]
    assert failed and all(line.startswith("    test_additive_attention") for line in failed), failed
    assert "Traceback" not in out and "The following cell failed" not in out and "\x1b[" not in out
    assert "--CourseValidator.details=True" in out
    details = subprocess.run([*nbgrader, "--CourseValidator.details=True"], cwd=tmp_path, capture_output=True,
                             text=True, env={**os.environ, **env}).stdout
    assert "详细信息" in details and "AssertionError" in details and "test_additive_attention" in details


def validate_in_lab(page, url, path):
    """Open `path` in the student's JupyterLab, press Validate; (the dialog's text, where its parts lie on the
    1280x800 screen) once the report is shown."""
    page.goto(f"{url}/lab/tree/{path}")
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle'] >> visible=true", timeout=120_000)
    page.wait_for_timeout(3000)
    page.get_by_role("button", name="Validate（验证）").click()
    page.locator(".jp-Dialog-content .attncourse-validate").wait_for(timeout=600_000)
    page.wait_for_timeout(500)
    where = page.evaluate("""() => {
        const box = el => { const r = el.getBoundingClientRect(); return [r.top, r.bottom]; };
        const headline = document.querySelector('.jp-Dialog-content .attncourse-validate-headline');
        const r = headline.getBoundingClientRect();
        const seen = headline.contains(document.elementFromPoint(r.left + 4, (r.top + r.bottom) / 2));
        const list = document.querySelector('.jp-Dialog-content .attncourse-validate pre');
        return {height: innerHeight, headline: box(headline), seen, dialog: box(document.querySelector('.jp-Dialog-content')),
                scrolls: list.scrollHeight > list.clientHeight, headlineText: headline.innerText};
    }""")
    return page.locator(".jp-Dialog-content").inner_text(), where


def in_view(where):
    """The headline and the whole dialog lie on the screen, the headline uncovered (not scrolled away)."""
    top, bottom = where["headline"]
    return where["seen"] and 0 <= top < bottom <= where["height"] and 0 <= where["dialog"][0] <= where["dialog"][1] <= where["height"]


@pytest.mark.needs_browser
def test_validate_button_in_the_students_jupyterlab(student, tmp_path):
    """A student who has answered 2 of a4's questions: the notebook opens unmodified, no news pop-up, and the
    Validate dialog says in Chinese, question by question, that 2 passed and the rest are not answered (未作答, no
    NotImplementedError lines), with the counts on screen when it opens. Then a notebook where every question
    fails: the list scrolls inside the dialog, and the counts stay on screen."""
    python, env, _ = student
    (tmp_path / A4).mkdir()
    nbformat.write(notebook(A4, TWO_OF_EIGHT), tmp_path / A4 / "rope_mla.ipynb")
    every = [grade_id(c) for c in notebook(A4, ()).cells if grade_id(c) and "raise NotImplementedError()" in c.source]
    nbformat.write(notebook(A4, (), wrong=every), tmp_path / A4 / "wrong.ipynb")
    with jupyterlab(tmp_path, python=python, env=env) as url, Browser() as browser:
        page = browser.page
        text, where = validate_in_lab(page, url, f"{A4}/rope_mla.ipynb")
        browser.screenshot(tmp_path / "validate.png")
        tab = page.locator(".jp-mod-current.lm-TabBar-tab, .lm-mod-current.lm-TabBar-tab").first
        assert "jp-mod-dirty" not in (tab.get_attribute("class") or ""), "the notebook opens modified"
        toasts = page.locator(".Toastify__toast").all_inner_texts()
        assert not toasts, f"a pop-up covers the page: {toasts}"
        assert page.locator(".validate-button").count() == 0, "nbgrader's English Validate button is still there"
        page.keyboard.press("Escape")
        failing, crowded = validate_in_lab(page, url, f"{A4}/wrong.ipynb")
        browser.screenshot(tmp_path / "validate-all-failed.png")
    assert "验证结果" in text and "✔ 通过：第 1 题：旋转位置编码 `apply_rope`" in text, text
    n = len(questions(notebook(A4, ())))
    assert where["headlineText"] == f"共 {n} 题：通过 2，未通过 0，未作答 {n - 2}。" and text.count("○ 未作答：") == n - 2, text
    assert "NotImplementedError" not in text and "The following cell failed" not in text and "Traceback" not in text
    assert len(text) < 5000 and in_view(where), (len(text), where)
    assert crowded["headlineText"] == f"共 {n} 题：通过 0，未通过 {n}，未作答 0。", failing
    assert crowded["scrolls"] and failing.count(HINT.splitlines()[1]) >= 10, crowded
    assert in_view(crowded), f"the counts are not on screen when the dialog opens: {crowded}"
