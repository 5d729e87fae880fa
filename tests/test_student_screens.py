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

from conftest import ROOT

pytestmark = pytest.mark.slow  # a fresh venv and the student setup: about a minute

A1 = "a1_scoring"
ANSWERED = "masked_softmax"  # the one question answered (correctly)
WRONG = "additive_attention"  # answered wrongly in the terminal test
SRC = Path(__file__).resolve().parents[1] / "src"


def notebook(answers=(ANSWERED,), wrong=()) -> nbformat.NotebookNode:
    """The released notebook with the catalog's correct answer in the `answers` cells and a wrong one (ReLU
    instead of tanh) in the `wrong` cells; every other question untouched."""
    catalog = load_catalog(ROOT, A1)
    rel = nbformat.read(ROOT / "release" / A1 / f"{catalog.NOTEBOOK}.ipynb", as_version=4)
    full = answered(rel, source_notebook(ROOT, A1, catalog))
    nb = copy.deepcopy(rel)
    for cell, solved in zip(nb.cells, full.cells, strict=True):
        if grade_id(cell) in answers:
            cell.source = solved.source
        elif grade_id(cell) in wrong:
            assert "torch.tanh" in solved.source
            cell.source = solved.source.replace("torch.tanh", "torch.relu")
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


@pytest.mark.needs_browser
def test_validate_button_in_the_students_jupyterlab(student, tmp_path):
    """One question answered correctly: the notebook opens unmodified, no news pop-up, and Validate's dialog says
    in Chinese, question by question, that it passed and the others are not answered, in < 5,000 characters."""
    python, env, _ = student
    (tmp_path / A1).mkdir()
    nbformat.write(notebook(), tmp_path / A1 / "scoring.ipynb")
    with jupyterlab(tmp_path, python=python, env=env) as url, Browser() as browser:
        browser.open(f"{url}/lab/tree/{A1}/scoring.ipynb", settle=5)
        page = browser.page
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
        browser.wait(3)
        tab = page.locator(".jp-mod-current.lm-TabBar-tab, .lm-mod-current.lm-TabBar-tab").first
        assert "jp-mod-dirty" not in (tab.get_attribute("class") or ""), "the notebook opens modified"
        toasts = page.locator(".Toastify__toast").all_inner_texts()
        assert not toasts, f"a pop-up covers the page: {toasts}"
        assert page.locator(".validate-button").count() == 0, "nbgrader's English Validate button is still there"
        page.get_by_role("button", name="Validate（验证）").click()
        dialog = page.locator(".jp-Dialog-content")
        dialog.wait_for(timeout=600_000)
        page.locator(".jp-Dialog-content .attncourse-validate").wait_for(timeout=600_000)
        text = dialog.inner_text()
        browser.screenshot(tmp_path / "validate.png")
    assert "验证结果" in text and "✔ 通过：1. 掩蔽 softmax（masked softmax）" in text, text
    assert "○ 未作答：2. 加性注意力" in text and "通过 1，未通过 0，未作答 6" in text, text
    assert len(text) < 5000, len(text)
    assert "The following cell failed" not in text and "Traceback" not in text, text
