"""The Validate report (attncourse/validate.py) of executed student versions, without a kernel: one line per
question first, then a failed test's message in at most two lines, never a test's source or a traceback."""
import nbformat
from nbformat.v4 import new_output

from attncourse.grading.cells import grade_id
from attncourse.validate import summary, tracebacks

from conftest import ROOT

NOT_DONE = new_output("error", ename="NotImplementedError", evalue="",
                      traceback=["Traceback ...", "NotImplementedError"])


def failed(message):
    return new_output("error", ename="AssertionError", evalue=message,
                      traceback=["\x1b[0;31mTraceback (most recent call last)\x1b[0m", "assert torch.allclose(...)",
                                 f"AssertionError: {message}"])


def executed(aid, outputs):
    """The released notebook as the validator leaves it: every answer cell not in `outputs` still raises
    NotImplementedError, every test cell not in `outputs` passed."""
    nb = nbformat.read(next((ROOT / "release" / aid).glob("*.ipynb")), as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("solution") or meta.get("grade")):
            cell.outputs = outputs.get(grade_id(cell), [NOT_DONE] if meta.get("solution") else [])
    return nb


def test_one_question_passed_one_failed_the_rest_not_answered():
    long = "样本 0 的查询 0：注意力权重应为 [0.5308, 0.4692]\n第二行提示\n第三行不显示\n" + "很长" * 200
    nb = executed("a1_scoring", {"masked_softmax": [], "additive_attention": [],
                                 "test_additive_attention": [failed(long)]})
    text = summary(nb)
    lines = text.splitlines()
    assert lines[0] == "共 7 题：通过 1，未通过 1，未作答 5。", text
    assert "✔ 通过：1. 掩蔽 softmax（masked softmax）" in lines and "✘ 未通过：2. 加性注意力（additive attention）" in lines
    at = lines.index("✘ 未通过：2. 加性注意力（additive attention）")
    assert lines[at + 1] == "    test_additive_attention：样本 0 的查询 0：注意力权重应为 [0.5308, 0.4692]"
    assert lines[at + 2] == "    第二行提示" and lines[at + 3].startswith("○ 未作答：3.")
    assert "Traceback" not in text and "assert torch.allclose" not in text and "第三行" not in text
    assert "Traceback" in tracebacks(nb) and "\x1b[" not in tracebacks(nb)
    assert "test_additive_attention" in tracebacks(nb) and "NotImplementedError" not in tracebacks(nb)


def test_a_question_with_two_answer_cells_half_answered_is_failed_and_says_what_is_missing():
    nb = executed("a3_gqa", {"kv_cache": []})
    text = summary(nb)
    assert text.count("第 4 题：带缓存的自回归解码") == 1, text
    at = text.index("✘ 未通过：第 4 题：带缓存的自回归解码")
    assert text[at:].splitlines()[1] == "    decode_step：还没有作答", text


def test_everything_passed_says_so():
    nb = nbformat.read(ROOT / "release" / "a1_scoring" / "scoring.ipynb", as_version=4)
    answered = executed("a1_scoring", {grade_id(c): [] for c in nb.cells if c.cell_type == "code"})
    text = summary(answered)
    assert "通过 6，未通过 0，未作答 1" in text and "所有自动检查的题目都通过了可见测试" in text, text
    assert "○ 未作答：7. 简答题" in text  # the written answer is still the placeholder
