"""The TA's screens, opened in Chromium as a TA opens them, for a class graded on this machine (one graded on a
Dask cluster writes the same gradebook, records and autograded notebooks: tests/test_cluster.py): formgrader (list the
class with each student's outcome in Chinese, open a submission, see why a submission is held and the flagged line,
decide on it by a named TA, read the student's own outputs, grade a written answer and see the grades reach
`course report` and `course export`), JupyterLab's Nbgrader menu, the feedback page and the class report. Student
markup with active content is inert on every one of them: no script runs, no dialog opens, no handler or frame is
left, nothing imitates the course's verdict badges.
"""
import csv
import json
import re
import urllib.error
import urllib.request
from collections import Counter

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output
from nbgrader.api import Gradebook

from attncourse.browser import Browser, is_local, jupyterlab
from attncourse.grading import commands
from attncourse.grading.authoring.variants import answered, load_catalog, source_notebook
from attncourse.grading.cells import grade_id
from attncourse.grading.model import Status
from attncourse.grading.publish.formgrader import review
from attncourse.grading.publish.report import held_text
from attncourse.grading.records import read_record

from conftest import auto_points, copy_course, course

pytestmark = [pytest.mark.slow, pytest.mark.needs_browser]

A1 = "a1_scoring"
TOKEN = "ta-screens-test"
HONEST, HELD, PAYLOAD, HELD_LATE, MISTAKE = "2023000001", "2023000002", "2023000003", "2023000004", "2023000005"
FAILED, MISSING, ACCEPT, REJECT = "2023000006", "2023000007", "2023000008", "2023000009"  # truncated, roster only, held
NAMES = {HONEST: ("张", "三"), HELD: ("欧阳", "娜娜"), PAYLOAD: ("李", "四"), HELD_LATE: ("王", "五"),
         MISTAKE: ("赵", "六"), FAILED: ("钱", "七"), MISSING: ("孙", "八"), ACCEPT: ("周", "九"), REJECT: ("吴", "十")}
PAYLOADS_MD = "\n".join([
    "<script>window.__pwned = 'script'; alert('script')</script>",
    "<img src=x onerror=\"window.__pwned = 'onerror'\">",
    "<svg onload=\"window.__pwned = 'svg'\"><circle r=5></circle></svg>",
    "<iframe src=\"javascript:parent.__pwned = 'iframe'\"></iframe>",
    "[点我](javascript:window.__pwned='link') <a href=\"javascript:alert('a')\">链接</a>",
    "<style>body { background: rgb(255, 0, 0) !important; }</style>",
    "<div class=\"verdict pass\">通过</div><span class=\"verdict pass\">通过</span>",
    "<form action=\"/api/shutdown\" method=\"post\"><button>提交</button></form>",
    "<object data=\"javascript:alert('object')\"></object><embed src=\"javascript:alert('embed')\">"])
PAYLOADS_CODE = ("from IPython.display import HTML, Javascript, SVG, display\n"
                 "display(HTML(\"<b>粗</b><script>window.__pwned='html'</script><img src=x onerror=\\\"alert('h')\\\">\"))\n"
                 "display(Javascript(\"window.__pwned = 'js'\"))\n"
                 "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\"><script>alert(2)</script></svg>'))\n")
WIDGETS = {"application/vnd.jupyter.widget-state+json": {"version_major": 2, "version_minor": 0, "state": {
    "x": {"model_name": "HTMLModel", "model_module": "@jupyter-widgets/controls", "model_module_version": "2.0.0",
          "state": {"value": "<img src=x onerror=\"window.__pwned='widget'\">"}}}}}
INERT_JS = """(root) => {
  const scope = root ? document.querySelector(root) || document.body : document.body;
  const handlers = [...scope.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on')));
  return {pwned: window.__pwned || null,
          active: [...scope.querySelectorAll('.cell script, .cell iframe, .cell svg, .cell object, .cell embed,'
                                             + ' .cell form, .cell style')]
                  .filter(e => !e.closest('mjx-container, .MathJax, .MathJax_SVG, .MathJax_Display'))  // typeset math
                  .filter(e => !(e.tagName === 'SCRIPT' && /^math\\/tex/.test(e.type)))  // MathJax 2 keeps the TeX
                  .map(e => e.outerHTML.slice(0, 80)),
          handlers: handlers.map(e => e.outerHTML.slice(0, 80)),
          js_links: [...scope.querySelectorAll('a')].filter(a => /^\\s*javascript:/i.test(a.getAttribute('href') || ''))
                    .length,
          background: getComputedStyle(document.body).backgroundColor};
}"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class graded on this machine. (A class graded on a Dask cluster gets the same gradebook, records and
    autograded notebooks, which is what these screens read: tests/test_cluster.py.)"""
    root = copy_course(tmp_path_factory.mktemp("ta_screens"))
    course(root, "release", A1)
    catalog = load_catalog(root, A1)
    src = source_notebook(root, A1, catalog)
    rel = nbformat.read(root / "release" / A1 / "scoring.ipynb", as_version=4)
    honest = answered(rel, src)
    for cell in honest.cells:
        if grade_id(cell) == "variance_experiment":  # the student's own run, which the written answer cites
            cell.outputs = [new_output("stream", name="stdout", text="var_unscaled = 4096.5（学生自己的数字）\n")]
    held = answered(rel, src)
    for cell in held.cells:
        if grade_id(cell) == "masked_softmax":
            cell.source = "import ctypes  # 一个评分程序必须看一眼的写法\n" + cell.source
    held_late = answered(rel, src)  # held in its last test only: a TA decides on it in formgrader
    for cell in held_late.cells:
        if grade_id(cell) == "variance_experiment":
            cell.source = "import ctypes\n" + cell.source
    payload = answered(rel, src)
    payload.cells += [new_markdown_cell(PAYLOADS_MD), new_code_cell(PAYLOADS_CODE, outputs=[
        new_output("display_data", data={"text/html": "<script>window.__pwned='kept'</script>",
                                         "text/plain": "x"})])]
    payload.metadata["widgets"] = WIDGETS
    mistake = answered(rel, src)  # weights masked, output from the unmasked ones: right shapes, wrong values
    for cell in mistake.cells:
        if grade_id(cell) == "dot_product_attention":
            cell.source = cell.source.replace("torch.bmm(self.dropout(self.attention_weights), values)",
                                              "torch.bmm(self.dropout(torch.softmax(scores, dim=-1)), values)")
            assert "torch.softmax(scores" in cell.source, cell.source
    graded_ones = (HONEST, honest), (HELD, held), (PAYLOAD, payload), (HELD_LATE, held_late), (MISTAKE, mistake), \
        (ACCEPT, held), (REJECT, held)
    for student, nb in graded_ones:
        folder = root / "class" / student / A1
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / "scoring.ipynb")
    text = nbformat.writes(honest)  # a truncated download: the submission fails, with a reason and no score
    (root / "class" / FAILED / A1).mkdir(parents=True)
    (root / "class" / FAILED / A1 / "scoring.ipynb").write_text(text[:len(text) // 2], encoding="utf-8")
    course(root, "grade", A1, "--class", str(root / "class"))
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student, (last, first) in NAMES.items():  # MISSING is on the roster only
            gb.update_or_create_student(student, last_name=last, first_name=first)
        ids = {s: gb.find_submission_notebook("scoring", A1, s).id for s, _ in graded_ones}
    course(root, "feedback")
    course(root, "report")
    return root, ids


@pytest.fixture(scope="module")
def formgrader(graded):
    root, _ = graded
    with jupyterlab(root, token=TOKEN) as url, Browser() as browser:
        yield url, browser


def test_formgrader_lists_the_class(graded, formgrader):
    url, browser = formgrader
    browser.open(f"{url}/formgrader/manage_assignments?token={TOKEN}", settle=1)
    browser.page.wait_for_selector(f"text={A1}", timeout=60_000)
    browser.open(f"{url}/formgrader/manage_students", settle=1)
    browser.page.wait_for_selector(f"text={HONEST}", timeout=60_000)
    text = browser.page.inner_text("body")
    assert all(s in text for s in (HONEST, HELD, PAYLOAD)) and "欧阳" in text


TABLE_JS = """() => [...document.querySelectorAll('#main-table tr')].map(tr => ({
  cells: [...tr.cells].map(td => td.innerText.trim()),
  status: [...tr.querySelectorAll('.course-status')].map(e => e.innerText.trim()),
  marked: tr.className, links: [...tr.querySelectorAll('a')].map(a => a.getAttribute('href'))}))"""
# what a page shows outside the notebook's own text (the student's and the assignment's) and the records' reasons,
# hidden parts excluded
CHROME_JS = """() => {
  const skip = '.text_cell_render, .input_area, .output_wrapper, pre, code, script, style, svg, .course-reason';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const e = node.parentElement;
    if (e.closest(skip) || !e.offsetParent && getComputedStyle(e).position !== 'fixed') continue;
    found.push(node.nodeValue.trim());
  }
  for (const e of document.querySelectorAll('[placeholder], [title]:not(.course-status, .course-reason)'))
    if (!e.closest(skip) && e.offsetParent) found.push(e.getAttribute('placeholder') || '', e.getAttribute('title') || '');
  return found.filter(t => t).join(' | ');
}"""
# English words a Chinese page may show: names of things (nbgrader, the notebook's file), keys on the keyboard
ENGLISH_ALLOWED = {"nbgrader", "formgrader", "notebook", "scoring", "ipynb", "README", "UTC", "LMS", "Markdown",
                   "MathJax", "Jupyter", "tab", "shift", "control", "escape", "enter"}


def _english(text):
    """The English words in `text`, ids and file names (a1_scoring, 2023000001, scoring.ipynb) and allowed words
    aside."""
    tokens = [t for t in re.findall(r"[\w.#-]+", text, re.ASCII) if not re.search(r"[_\d]|\w\.\w", t)]
    return sorted({w for t in tokens for w in re.findall(r"[A-Za-z]{2,}", t) if w not in ENGLISH_ALLOWED})


def _page(browser, url, root, shot):
    """Open a formgrader list and wait for its rows; the screenshot (1280×800) goes to build/screens/ of the
    course; returns the rows and what the page shows outside notebooks."""
    browser.open(url, settle=0)
    browser.page.wait_for_selector("table.dataTable, .course-assignment", timeout=60_000)  # all rows drawn
    (root / "build" / "screens").mkdir(exist_ok=True)
    browser.screenshot(root / "build" / "screens" / f"{shot}.png")
    return browser.evaluate(TABLE_JS), browser.evaluate(CHROME_JS)


def _outcomes(root):
    return {o.student: o for o in commands.class_outcomes(root, [A1])}


def test_every_list_is_chinese_and_shows_each_rows_outcome(graded, formgrader):
    """Manage Assignments, Manage Students (and its dialog), a student's assignments and notebooks, Manage
    Submissions and Manual Grading's three lists: each row's status in the words of `course report` (as the records have it now), held
    and failed rows marked, no number where there is no grade, the roster's names, and no English label."""
    root, ids = graded
    url, browser = formgrader
    outcomes = _outcomes(root)
    labels = {s: o.status.label for s, o in outcomes.items()}
    assert set(labels) == set(NAMES) and labels[FAILED] == Status.FAILED.label, labels
    assert labels[MISSING] == Status.MISSING.label and labels[HELD] == Status.HELD.label, labels
    counts = Counter(labels.values())
    marked = {Status.HELD: "course-row-held", Status.FAILED: "course-row-failed", Status.MISSING: "course-row-missing"}
    english = {}

    rows, english["manage_assignments"] = _page(browser, f"{url}/formgrader/manage_assignments?token={TOKEN}", root,
                                                "manage_assignments")
    [row] = [r for r in rows if r["cells"][0] == A1]
    assert sorted(row["status"]) == sorted(f"{label} {n}" for label, n in counts.items()), row

    rows, english["manage_students"] = _page(browser, f"{url}/formgrader/manage_students", root, "manage_students")
    browser.page.click("#main-table tr .edit a")  # the dialog that edits a student's name
    browser.page.wait_for_selector("#edit-student-modal .save")
    english["edit_student"] = browser.evaluate(CHROME_JS)
    assert "学号" in english["edit_student"] and "保存" in english["edit_student"], english["edit_student"]
    by_id = {r["cells"][1]: r for r in rows}
    assert set(by_id) == set(NAMES), by_id.keys()
    for student, row in by_id.items():
        o = outcomes[student]
        assert row["status"] == [f"{A1} {o.status.label}"] and row["cells"][0] == "".join(NAMES[student]), row
        score = row["cells"][4]
        if o.status.is_grade:
            assert score == f"{o.score:g} / {o.max_score:g}", row
        else:
            assert score == ("待复核" if o.status == Status.HELD else "—"), row
        assert marked.get(o.status, "course-row-") in row["marked"], row

    rows, english["manage_submissions"] = _page(browser, f"{url}/formgrader/manage_submissions/{A1}", root,
                                                "manage_submissions")
    by_id = {r["cells"][1]: r for r in rows}
    assert set(by_id) == set(NAMES) and all(len(r["cells"]) == 5 for r in rows), rows
    for student, row in by_id.items():
        o = outcomes[student]
        assert row["status"] == [o.status.label] and row["cells"][0] == "".join(NAMES[student]), row
        assert (row["cells"][4] == "—") == (not o.status.has_score), row  # no 0 that is not a grade
        if o.status == Status.HELD:  # the held points in the report's words, not the 0 nbgrader keeps meanwhile
            assert row["cells"][4] == held_text(o), row

    rows, english["gradebook"] = _page(browser, f"{url}/formgrader/gradebook", root, "gradebook")
    [row] = [r for r in rows if r["cells"][0] == A1]
    assert sorted(row["status"]) == sorted(f"{label} {n}" for label, n in counts.items()), row
    rows, english["gradebook_notebooks"] = _page(browser, f"{url}/formgrader/gradebook/{A1}", root,
                                                 "gradebook_notebooks")
    assert sorted(rows[0]["status"]) == sorted(f"{label} {n}" for label, n in counts.items()), rows
    rows, english["gradebook_submissions"] = _page(browser, f"{url}/formgrader/gradebook/{A1}/scoring", root,
                                                   "gradebook_submissions")
    by_submission = {next(link.rsplit("/", 1)[1] for link in r["links"] if "/submissions/" in link): r for r in rows}
    assert set(by_submission) == set(ids.values()), by_submission.keys()
    for student, submission in ids.items():
        row = by_submission[submission]
        assert row["status"] == [labels[student]] and marked.get(outcomes[student].status, "") in row["marked"], row

    rows, english["student_assignments"] = _page(browser, f"{url}/formgrader/manage_students/{FAILED}", root,
                                                 "student_assignments")
    [row] = [r for r in rows if r["cells"][0] == A1]
    assert row["status"] == [Status.FAILED.label] and set(row["cells"][2:6]) == {"—"}, row
    rows, english["student_notebooks"] = _page(browser, f"{url}/formgrader/manage_students/{FAILED}/{A1}", root,
                                               "student_notebooks")
    assert [(r["cells"][0], r["status"], r["cells"][2]) for r in rows] == [("scoring", [Status.FAILED.label], "—")]
    rows, _ = _page(browser, f"{url}/formgrader/manage_students/{HONEST}/{A1}", root, "student_notebooks_graded")
    assert rows[0]["status"] == [Status.GRADED.label] and re.fullmatch(r"[\d.]+ / 28", rows[0]["cells"][2]), rows
    left = {page: words for page, words in ((p, _english(t)) for p, t in english.items()) if words}
    assert not left, (left, english)


def test_the_grading_page_and_its_keyboard_help_are_chinese(graded, formgrader):
    """The grading page around the notebook (navigation, headings, scoring buttons, comment boxes) and its keyboard
    help."""
    root, ids = graded
    url, browser = formgrader
    browser.open(f"{url}/formgrader/submissions/{ids[HONEST]}?token={TOKEN}", settle=1)
    text = browser.evaluate(CHROME_JS)
    assert "满分" in text and "学生的答案" in text and "下一份" in text, text[:2000]
    browser.screenshot(root / "build" / "screens" / "formgrade.png")
    browser.page.click(".help")
    browser.page.wait_for_selector("#help-dialog .shortcut-help")
    browser.wait(0.5)  # the dialog fades in
    text += " | " + browser.evaluate(CHROME_JS)
    assert "快捷键" in text and "到下一份提交的同一个框" in text, text[-1500:]
    assert not _english(text), (_english(text), text[:3000])


def _open_submission(graded, formgrader, student):
    root, ids = graded
    url, browser = formgrader
    browser.open(f"{url}/formgrader/gradebook/{A1}/scoring", settle=1)
    link = browser.page.wait_for_selector(f"a[href$='/submissions/{ids[student]}']", timeout=60_000)
    browser.dialogs.clear()
    link.click()
    browser.page.wait_for_selector("#notebook-container, .cell", timeout=60_000)
    browser.wait(2)
    return browser


def _api(url, path, method="GET"):
    request = urllib.request.Request(f"{url}{path}", method=method, headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def test_formgrader_lists_mark_a_held_submission_without_counting_its_held_points(graded, formgrader):
    """Manual Grading's list flags the held submission and reads its score as the report does (the points and
    how many of them wait for review), never the points nbgrader counts meanwhile; a student's assignments and
    notebooks read the same; Manage Students marks it as waiting for a person."""
    root, ids = graded
    url, browser = formgrader
    listed = {row["student"]: row for row in _api(url, f"/formgrader/api/submitted_notebooks/{A1}/scoring")}
    assert listed, "formgrader lists no submission"
    held, honest = listed[HELD], listed[HONEST]
    assert held["flagged"] and held["needs_manual_grade"] and not honest["flagged"]
    with open(root / "build" / "grades.csv", encoding="utf-8-sig") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert held["score"] == float(rows[HELD]["score"]) < auto_points(A1) and float(rows[HELD]["withheld_for_review"])
    browser.open(f"{url}/formgrader/gradebook/{A1}/scoring?token={TOKEN}", settle=1)
    row = browser.page.wait_for_selector(f"tr:has(a[href$='/submissions/{ids[HELD]}'])", timeout=60_000)
    assert row.query_selector(".flagged .glyphicon") is not None, row.inner_html()[:500]
    words = held_text(_outcomes(root)[HELD])
    assert row.query_selector(".score").inner_text() == words and row.query_selector(".code-score").inner_text() \
        == Status.HELD.label, row.inner_html()[:1000]
    browser.open(f"{url}/formgrader/manage_students/{HELD}", settle=1)
    row = browser.page.wait_for_selector(f"tr:has-text('{A1}')", timeout=60_000)
    assert row.query_selector(".needs-manual-grade .glyphicon") is not None, row.inner_html()[:500]
    assert row.query_selector(".score").inner_text() == words, row.inner_html()[:1000]
    browser.open(f"{url}/formgrader/manage_students/{HELD}/{A1}", settle=1)
    row = browser.page.wait_for_selector("table.dataTable tbody tr .score", timeout=60_000)
    assert row.inner_text() == words, row.inner_text()


def test_manage_assignments_shows_the_course_and_no_button_around_it(graded, formgrader):
    url, browser = formgrader
    browser.open(f"{url}/formgrader/manage_assignments?token={TOKEN}", settle=1)
    text = browser.page.inner_text("body")
    assert A1 in text and "已发布" in text and "course release" in text and "draft" not in text, text[:1500]
    assert "exchange" not in text.lower() and browser.page.query_selector("button, .btn-primary") is None
    assert browser.page.query_selector(f"a[href$='/formgrader/gradebook/{A1}']") is not None
    refused = _api(url, f"/formgrader/api/assignment/{A1}/generate_feedback", method="POST")
    assert refused["success"] is False and "course feedback" in refused["error"], refused
    refused = _api(url, f"/formgrader/api/submission/{A1}/{HONEST}/autograde", method="POST")
    assert refused["success"] is False and "course grade" in refused["error"], refused
    browser.open(f"{url}/formgrader/manage_submissions/{A1}", settle=2)
    browser.page.wait_for_selector(f"text={HONEST}", timeout=60_000)
    visible = browser.evaluate("[...document.querySelectorAll('.autograde a, .generate-feedback a, .release-feedback a')]"
                               ".filter(e => e.offsetParent !== null).length")
    assert visible == 0 and "course feedback" in browser.page.inner_text("body")


def test_math_renders_in_formgrader_without_network(graded, formgrader):
    """The written question the TA grades against shows typeset math from the course's own MathJax, on a
    machine whose browser reaches nothing but the server."""
    _, ids = graded
    url, browser = formgrader
    browser.requests.clear()
    with browser.offline():
        browser.open(f"{url}/formgrader/submissions/{ids[HONEST]}?token={TOKEN}", settle=1)
        browser.page.wait_for_selector(".MathJax_CHTML, .MathJax, mjx-container", timeout=60_000)
        typeset = browser.evaluate("document.querySelectorAll('.MathJax_CHTML, .MathJax, mjx-container').length")
        remote = [u for u in browser.requests if not is_local(u)]
        assert typeset > 0 and not [u for u in remote if "mathjax" in u.lower()], (typeset, remote)


TA, TA2 = "李助教", "王 助教"
ACCEPTED_NOTE, REJECTED_NOTE = "ctypes 只用来查看版本，没有碰评分程序", "ctypes 读取了评分程序的内存"


def _post(url, path, body):
    request = urllib.request.Request(f"{url}{path}", method="POST", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _banner(browser, shot=None):
    """The review banner's text; the screenshot shows the page's top (formgrader scrolls to the first score)."""
    text = browser.page.wait_for_selector("#course-banner", timeout=60_000).inner_text()
    if shot:
        browser.evaluate("window.scrollTo(0, 0)")
        browser.screenshot(shot)
    return text


@pytest.fixture(scope="module")
def decided(graded, formgrader):
    """Three held submissions decided in formgrader as TAs do it, on a token-only server (its user is anonymous):
    ACCEPT accepted and REJECT rejected with the page's action by TA, HELD_LATE's held cell scored by TA2. What the
    pages showed on the way is returned for the tests."""
    root, ids = graded
    url, browser = formgrader
    seen = {}
    for given in ("", "Anonymous Io", "root"):  # nobody is named: the decision is refused, nothing recorded
        seen[f"api {given!r}"] = _post(url, f"{review.API}/{ids[ACCEPT]}", {"accept": True, "reviewer": given})
    seen["api record"] = read_record(root, A1, ACCEPT).review

    page = browser.page
    browser.open(f"{url}/formgrader/submissions/{ids[ACCEPT]}/", settle=0)  # no name typed in this browser yet
    seen["field"] = page.wait_for_selector("#course-reviewer").input_value()
    seen["accept before"] = _banner(browser, root / "build" / "screens" / "held.png")
    browser.page.fill("#course-review-note", ACCEPTED_NOTE)
    browser.page.fill("#course-reviewer", TA)
    browser.page.click("#course-review button[data-accept=true]")
    browser.page.wait_for_selector("#course-banner:has-text('已复核')", timeout=60_000)  # the page is drawn again
    seen["accept after"] = _banner(browser, root / "build" / "screens" / "accepted.png")
    seen["accept status"], seen["accept form"] = page.inner_text("#course-status"), page.query_selector("#course-review")
    seen["again"] = _post(url, f"{review.API}/{ids[ACCEPT]}", {"accept": False, "note": "再点一次", "reviewer": TA2})

    browser.open(f"{url}/formgrader/submissions/{ids[REJECT]}/", settle=0)
    seen["remembered"] = page.wait_for_selector("#course-reviewer").input_value()
    browser.page.click("#course-review button[data-accept=false]")  # without a reason
    seen["no reason"] = browser.page.inner_text("#course-review-message")
    seen["no reason record"] = read_record(root, A1, REJECT).review
    browser.page.fill("#course-review-note", REJECTED_NOTE)
    browser.page.click("#course-review button[data-accept=false]")
    browser.page.wait_for_selector("#course-banner:has-text('已复核')", timeout=60_000)
    seen["reject after"] = _banner(browser, root / "build" / "screens" / "rejected.png")
    seen["reject status"] = page.inner_text("#course-status")

    [(cell, points)] = read_record(root, A1, HELD_LATE).held.items()
    browser.open(f"{url}/formgrader/submissions/{ids[HELD_LATE]}/", settle=0)
    page.evaluate("localStorage.clear()")
    page.fill("#course-reviewer", "")
    box = browser.page.wait_for_selector(f"input.score#{cell}")
    box.fill(f"{points:g}")
    box.press("Tab")  # no reviewer named: the score is not saved
    browser.page.wait_for_function("document.querySelector('#course-review-message').innerText.length > 0")
    browser.wait(1)
    seen["unnamed"], seen["unnamed box"] = browser.page.inner_text("#course-review-message"), box.input_value()
    seen["unnamed record"] = read_record(root, A1, HELD_LATE).review
    browser.page.fill("#course-reviewer", TA2)
    box.fill(f"{points:g}")
    box.press("Tab")  # the last held cell scored: the page is drawn again with the decision
    browser.page.wait_for_selector("#course-banner:has-text('已复核')", timeout=60_000)
    seen["scored after"] = _banner(browser, root / "build" / "screens" / "reviewed.png")
    listed = {row["student"]: row for row in _api(url, f"/formgrader/api/submitted_notebooks/{A1}/scoring")}
    seen["listed"] = {s: listed[s] for s in (ACCEPT, REJECT, HELD_LATE, HELD)}
    return seen


def test_a_decision_needs_a_named_reviewer_never_the_anonymous_jupyter_user(decided):
    for given in ("", "Anonymous Io", "root"):
        status, answer = decided[f"api {given!r}"]
        assert status == 400 and not answer["success"] and "复核人" in answer["error"], (given, answer)
    assert decided["api record"] is None and decided["field"] == "", decided["field"]
    assert decided["remembered"] == TA  # the browser remembers the name the TA typed
    assert "复核人" in decided["unnamed"] and decided["unnamed box"] == "" and decided["unnamed record"] is None


def test_held_submissions_are_accepted_and_rejected_on_their_page_by_a_named_ta(graded, decided):
    """One action per submission, with a reason and the reviewer's name, recorded as `course review` records it;
    the page's banner then shows the decision, who, when and why, and no form."""
    root, _ = graded
    assert "⚠ 待复核" in decided["accept before"] and "复核这份提交" in decided["accept before"]
    accepted, rejected = read_record(root, A1, ACCEPT).review, read_record(root, A1, REJECT).review
    assert accepted.decision == Status.ACCEPTED and accepted.by == TA and accepted.note == ACCEPTED_NOTE, accepted
    assert rejected.decision == Status.REJECTED and rejected.by == TA and rejected.note == REJECTED_NOTE, rejected
    assert "不计入时请写明理由" in decided["no reason"] and decided["no reason record"] is None
    for key, review_, mark in (("accept", accepted, "✔"), ("reject", rejected, "✘")):
        banner = decided[f"{key} after"]
        assert f"{mark} 已复核：{review_.decision.label}（{TA}，{review_.at[:10]}" in banner, banner
        assert review_.note in banner and "待复核" not in banner and "导入了 ctypes" in banner, banner
        assert decided[f"{key} status"] == review_.decision.label
    assert decided["accept form"] is None
    status, answer = decided["again"]  # a second decision (another TA, a second click) changes nothing
    assert status == 400 and "已经复核过" in answer["error"] and read_record(root, A1, ACCEPT).review == accepted


def test_held_cells_scored_one_by_one_are_a_decision_signed_by_the_named_ta(graded, decided):
    root, _ = graded
    reviewed = read_record(root, A1, HELD_LATE).review
    assert reviewed.decision == Status.REVIEWED and reviewed.by == "王 助教" and reviewed.at, reviewed
    assert f"✔ 已复核：{Status.REVIEWED.label}（王 助教" in decided["scored after"], decided["scored after"]


def test_tests_failed_and_the_flag_follow_the_decision(decided):
    """The decided submissions' answers are right: Tests Failed? and Flagged? are off, whatever was decided;
    the undecided one stays flagged with its tests read as failed (their points held)."""
    listed = decided["listed"]
    for student in (ACCEPT, REJECT, HELD_LATE):
        assert not listed[student]["failed_tests"] and not listed[student]["flagged"], listed[student]
        assert listed[student]["course"]["status"] != Status.HELD, listed[student]
    assert listed[HELD]["flagged"] and listed[HELD]["course"]["label"] == Status.HELD.label


def test_the_records_the_report_and_the_export_agree(graded, decided):
    """After the decisions: grades.csv, the report and the LMS export give each student the outcome the records
    give (the one formgrader lists), decisions signed by the TAs' names, and no number where there is no grade."""
    root, _ = graded
    course(root, "report")
    course(root, "export", "--to", "build/lms_after_decisions.csv")
    outcomes = _outcomes(root)
    with open(root / "build" / "grades.csv", encoding="utf-8-sig") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    with open(root / "build" / "lms_after_decisions.csv", encoding="utf-8-sig") as f:
        lms = {r["学号"]: r for r in csv.DictReader(f)}
    assert set(rows) == set(lms) == set(NAMES), (rows.keys(), lms.keys())
    for student, o in outcomes.items():
        row = rows[student]
        assert row["status"] == o.status and row["name"] == lms[student]["姓名"] == "".join(NAMES[student]), row
        assert row["score"] == (f"{o.score:g}" if o.status.has_score else ""), row
        wanted = f"{o.score:g}" if o.status.is_grade else "待复核" if o.status == Status.HELD else ""
        assert lms[student][A1] == wanted, (lms[student], o.status)
    assert float(rows[ACCEPT]["score"]) == auto_points(A1) and rows[ACCEPT]["reviewed_by"] == TA
    assert rows[ACCEPT]["review_note"] == ACCEPTED_NOTE and TA in lms[ACCEPT]["说明"]
    assert rows[REJECT]["status"] == Status.REJECTED and float(rows[REJECT]["score"]) < auto_points(A1)
    assert rows[HELD_LATE]["review_decision"] == Status.REVIEWED and rows[HELD_LATE]["reviewed_by"] == "王 助教"
    assert float(rows[HELD_LATE]["score"]) == auto_points(A1) and rows[HELD_LATE]["withheld_for_review"] == "0"
    assert lms[FAILED][A1] == lms[MISSING][A1] == "" and "评分失败" in lms[FAILED]["说明"]
    exported = (root / "build" / "grades.csv").read_text(encoding="utf-8-sig") + json.dumps(lms, ensure_ascii=False)
    assert not re.search(r"\b[0-9a-f]{32}\b|anonymous|\broot\b", exported, re.IGNORECASE)
    report_text = (root / "build" / "report" / "report.md").read_text(encoding="utf-8")
    assert "已复核的提交" in report_text and TA in report_text and "王 助教" in report_text


def test_the_nbgrader_menu_offers_formgrader_only(formgrader):
    """JupyterLab's Nbgrader menu in the instructor's environment (scripts/setup.sh): no course list, assignment
    list or Create Assignment, which would go around the course's commands."""
    url, browser = formgrader
    browser.open(f"{url}/lab?token={TOKEN}", settle=0)
    browser.page.get_by_role("menuitem", name="Nbgrader").click(timeout=120_000)
    browser.wait(0.5)
    items = browser.page.locator("#jp-mainmenu-nbgrader .lm-Menu-item:visible").all_inner_texts()
    browser.page.keyboard.press("Escape")
    assert [item.strip() for item in items] == ["Formgrader"], items


def test_the_reviewer_field_starts_with_a_known_person_only(tmp_path):
    """The name a decision is signed with, unless the TA types one: the logged-in user where the server knows a
    person (JupyterHub), else c.Reviewer.name; never a token-only server's anonymous user."""
    from types import SimpleNamespace

    from jupyter_server.auth import User
    hub, anonymous = User("zhangsan", "zhangsan", "张三"), User("6c1f0a9e2b3d4c5e8f7a6b5c4d3e2f10", "Anonymous Io")
    course_dir = SimpleNamespace(root=str(tmp_path))
    on = {who: SimpleNamespace(current_user=user, coursedir=course_dir) for who, user in (("hub", hub),
                                                                                         ("token", anonymous))}
    assert review.jupyter_user(on["hub"]) == "张三" and review.jupyter_user(on["token"]) == ""
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()  # noqa\n")
    assert review.prefilled(on["token"]) == ""
    with pytest.raises(ValueError, match="复核人"):
        review.signer(on["token"], "")
    (tmp_path / "nbgrader_config.py").write_text('c = get_config()  # noqa\nc.Reviewer.name = "李老师"\n')
    assert review.prefilled(on["token"]) == review.signer(on["token"], " ") == "李老师"
    assert review.prefilled(on["hub"]) == "张三" and review.signer(on["hub"], "王五") == "王五"


def test_a_held_submission_shows_why_and_the_line(graded, formgrader):
    browser = _open_submission(graded, formgrader, HELD)
    text = browser.page.inner_text("body")
    assert "待复核" in text and "导入了 ctypes" in text and "import ctypes" in text, text[:2000]
    assert f"course review {A1} {HELD} --accept" in text


def test_the_ta_reads_the_students_own_outputs(graded, formgrader):
    text = _open_submission(graded, formgrader, HONEST).page.inner_text("body")
    assert "学生提交前自己运行" in text and "4096.5" in text and "评分时没有重新运行" not in text
    nb = nbformat.read(graded[0] / "autograded" / HONEST / A1 / "scoring.ipynb", as_version=4)
    [experiment] = [c for c in nb.cells if grade_id(c) == "variance_experiment"]
    shown = "".join(o.get("text", "") for o in experiment.outputs)  # one run: the student's, labelled
    assert shown.count("——") == 2 and "4096.5" in shown and shown.count("var_unscaled") == 1, shown
    page = (graded[0] / "feedback" / HONEST / A1 / "scoring.html").read_text(encoding="utf-8")
    assert "4096.5" in page and "学生提交前自己运行" in page


def test_a_written_answer_graded_in_formgrader_reaches_the_export(graded, formgrader):
    root, _ = graded
    browser = _open_submission(graded, formgrader, HONEST)
    box = browser.page.wait_for_selector("input.score#why_scale")
    box.fill("1.5")
    box.press("Tab")
    browser.page.wait_for_function("() => !document.querySelector('#why_scale').classList.contains("
                                   "'needs_manual_grade') || document.querySelector('#why_scale').value === '1.5'")
    browser.wait(2)  # the change is saved through formgrader's API
    course(root, "export", "--to", "build/lms.csv")
    with open(root / "build" / "lms.csv", encoding="utf-8-sig") as f:
        rows = {r["学号"]: r for r in csv.DictReader(f)}
    assert float(rows[HONEST][A1]) == auto_points(A1) + 1.5 and rows[HONEST]["姓名"] == "张三", rows[HONEST]
    assert rows[HELD][A1] == "待复核"


def test_student_markup_is_inert_in_formgrader(graded, formgrader):
    browser = _open_submission(graded, formgrader, PAYLOAD)
    found = browser.evaluate(f"({INERT_JS})(null)")
    assert found["pwned"] is None and browser.dialogs == [], (found, browser.dialogs)
    assert found["active"] == [] and found["js_links"] == 0 and found["background"] != "rgb(255, 0, 0)", found
    assert not [h for h in found["handlers"] if "pwned" in h or "alert" in h], found["handlers"]


def test_student_markup_is_inert_in_feedback_and_cannot_imitate_a_verdict(graded, formgrader):
    root, _ = graded
    _, browser = formgrader
    browser.dialogs.clear()
    browser.open((root / "feedback" / PAYLOAD / A1 / "scoring.html").as_uri(), settle=3)
    found = browser.evaluate(f"({INERT_JS})(null)")
    badges = browser.evaluate("document.querySelectorAll('.verdict.pass').length")
    tests = browser.evaluate("document.querySelectorAll('.verdict').length")
    assert found["pwned"] is None and browser.dialogs == [] and found["active"] == [] and found["js_links"] == 0, found
    assert not found["handlers"] and found["background"] != "rgb(255, 0, 0)", found
    nb = nbformat.read(root / "autograded" / PAYLOAD / A1 / "scoring.ipynb", as_version=4)
    assert badges == tests == sum(1 for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
                                  and not c.metadata["nbgrader"].get("solution")), (badges, tests)
    assert "widgets" not in nb.metadata and "application/javascript" not in json.dumps(nb)


ROWS_JS = """() => [...document.querySelectorAll('.aligned')].map(e => {
  const box = e.getBoundingClientRect();
  return [e.textContent.trim().slice(0, 2), Math.round(box.left * 10) / 10, Math.round(box.width * 10) / 10];
})"""


def test_a_failed_comparison_shows_expected_and_actual_over_the_same_positions(graded, formgrader):
    """The student's feedback for a test that compares tensors: the rows 位置 / 期望 / 实际 line up, as drawn in
    Chromium (same left edge, same width: each column is as wide in every row)."""
    root, _ = graded
    _, browser = formgrader
    browser.open((root / "feedback" / MISTAKE / A1 / "scoring.html").as_uri(), settle=2)
    rows = browser.evaluate(ROWS_JS)
    assert [label for label, _, _ in rows[:3]] == ["位置", "期望", "实际"], rows
    for k in range(0, len(rows) - 2, 3):
        (_, left, width), *others = rows[k:k + 3]
        assert all(abs(o_left - left) <= 0.5 and abs(o_width - width) <= 0.5 for _, o_left, o_width in others), rows


def test_the_class_report_opens_and_is_inert(graded, formgrader):
    root, _ = graded
    _, browser = formgrader
    browser.dialogs.clear()
    browser.requests.clear()
    browser.open((root / "build" / "report" / "report.html").as_uri(), settle=1)
    found = browser.evaluate(f"({INERT_JS})(null)")
    text = browser.page.inner_text("body")
    remote = [u for u in browser.requests if not u.startswith(("file:", "data:"))]
    assert HELD in text and found["pwned"] is None and browser.dialogs == [] and remote == [], (found, remote)


def test_a_decision_taken_by_command_shows_in_the_running_formgrader(graded, formgrader):
    """Last: `course review` in another process while formgrader runs; the grading page formgrader then draws
    shows the decision, not what its long-lived gradebook session read before."""
    root, _ = graded
    browser = _open_submission(graded, formgrader, HELD)
    assert "⚠ 待复核" in _banner(browser)
    course(root, "review", A1, HELD, "--accept", "--by", "李助教")
    browser = _open_submission(graded, formgrader, HELD)
    banner = _banner(browser)
    assert f"已复核：{Status.ACCEPTED.label}（李助教" in banner and "⚠ 待复核" not in banner, banner
