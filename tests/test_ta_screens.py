"""The TA's screens, opened in Chromium as a TA opens them, for a class graded on this machine (one graded on a
Dask cluster writes the same gradebook, records and autograded notebooks: tests/test_cluster.py): formgrader (list the class, open a submission, see why a submission is held and the flagged
line, read the student's own outputs, grade a written answer and see the grade reach `course export`), the
feedback page and the class report. Student markup with active content is inert on every one of them: no
script runs, no dialog opens, no handler or frame is left, nothing imitates the course's verdict badges.
"""
import csv
import json
import urllib.request

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output
from nbgrader.api import Gradebook

from attncourse.browser import Browser, is_local, jupyterlab
from attncourse.grading.authoring.variants import answered, load_catalog, source_notebook
from attncourse.grading.cells import grade_id
from attncourse.grading.records import read_record

from conftest import auto_points, copy_course, course

pytestmark = [pytest.mark.slow, pytest.mark.needs_browser]

A1 = "a1_scoring"
TOKEN = "ta-screens-test"
HONEST, HELD, PAYLOAD, HELD_LATE, MISTAKE = "2023000001", "2023000002", "2023000003", "2023000004", "2023000005"
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
    names = {HONEST: ("张", "三"), HELD: ("欧阳", "娜娜"), PAYLOAD: ("李", "四"), HELD_LATE: ("王", "五"),
             MISTAKE: ("赵", "六")}
    for student, nb in ((HONEST, honest), (HELD, held), (PAYLOAD, payload), (HELD_LATE, held_late),
                        (MISTAKE, mistake)):
        folder = root / "class" / student / A1
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / "scoring.ipynb")
    course(root, "grade", A1, "--class", str(root / "class"))
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student, (last, first) in names.items():
            gb.update_or_create_student(student, last_name=last, first_name=first)
        ids = {s: gb.find_submission_notebook("scoring", A1, s).id for s in names}
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
    """Manual Grading's list flags the held submission and shows the points that count now; Manage Students
    marks it as waiting for a person; the listed score is what the report and the export count."""
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
    assert row.query_selector(".score").inner_text().startswith(f"{held['score']:g} /")
    browser.open(f"{url}/formgrader/manage_students/{HELD}", settle=1)
    row = browser.page.wait_for_selector(f"tr:has-text('{A1}')", timeout=60_000)
    assert row.query_selector(".needs-manual-grade .glyphicon") is not None, row.inner_html()[:500]


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


def test_a_decision_in_formgrader_is_recorded_with_who_and_when(graded, formgrader):
    """A TA who enters the held cell's points in formgrader has decided: the record says so with who and when,
    and the grades CSV, the report and the export count the points and name the decision."""
    root, _ = graded
    held = read_record(root, A1, HELD_LATE).held
    assert held and held == {"test_variance_experiment": 2.0}, held
    browser = _open_submission(graded, formgrader, HELD_LATE)
    for cell, points in held.items():
        box = browser.page.wait_for_selector(f"input.score#{cell}")
        box.fill(f"{points:g}")
        box.press("Tab")
    browser.wait(3)  # saved through formgrader's API
    review = read_record(root, A1, HELD_LATE).review
    assert review is not None and review.decision == "formgrader" and review.by and review.at, review
    course(root, "report")
    course(root, "export", "--to", "build/lms_after_decision.csv")
    with open(root / "build" / "grades.csv", encoding="utf-8-sig") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert rows[HELD_LATE]["review_decision"] == "formgrader" and rows[HELD_LATE]["withheld_for_review"] == "0"
    assert float(rows[HELD_LATE]["score"]) == auto_points(A1)
    with open(root / "build" / "lms_after_decision.csv", encoding="utf-8-sig") as f:
        lms = {r["学号"]: r for r in csv.DictReader(f)}
    assert float(lms[HELD_LATE][A1]) == auto_points(A1) and "formgrader" in lms[HELD_LATE]["说明"]
    report_text = (root / "build" / "report" / "report.md").read_text(encoding="utf-8")
    assert "已复核的提交" in report_text and "在 formgrader 中给分" in report_text


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
