"""The Validate report (attncourse/validate.py) of executed student versions, without a kernel: the counts in one
line first, then one line per question, a failed test's message in at most two lines, never a test's source or a
traceback; a question whose answer is still a stub is 未作答, counted apart, with no NotImplementedError line."""
import nbformat
from nbformat.v4 import new_output

from attncourse.grading.cells import grade_id
from attncourse.validate import questions, summary, tracebacks

from conftest import ROOT


def frame(where):
    """A traceback entry as IPython 8 colours it: `where` is "Cell In[12], line 3" or "File /x/y.py:4"."""
    return f"\x1b[0;32m{where}\x1b[0m, in \x1b[0;36mf\x1b[0;34m()\x1b[0m\n\x1b[0;32m----> 3\x1b[0m code"


def error(ename, evalue, *frames):
    return new_output("error", ename=ename, evalue=evalue,
                      traceback=["\x1b[0;31m----\x1b[0m", f"\x1b[0;31m{ename}\x1b[0m  Traceback (most recent call last)",
                                 *map(frame, frames), f"\x1b[0;31m{ename}\x1b[0m: {evalue}"])


def stub(count):
    """The NotImplementedError of the stub in the cell run as In[count], met by a test cell run after it."""
    return error("NotImplementedError", "", f"Cell In[{count + 1}], line 9", f"Cell In[{count}], line 4")


def failed(message):
    return error("AssertionError", message, "Cell In[40], line 7")


def executed(aid, answered=(), outputs=None):
    """The released notebook as the validator leaves it, its cells run in order: the answer cells in `answered`
    changed by the student (their tests pass unless `outputs` says otherwise), every other answer cell as released:
    a stub that raises NotImplementedError, in the cell itself (a1: `raise` at the top) or in each test that calls
    it (a function's body), a test cell then failing on the first stub of its question."""
    nb = nbformat.read(next((ROOT / "release" / aid).glob("*.ipynb")), as_version=4)
    for count, cell in enumerate(nb.cells, 1):
        cell.execution_count = count if cell.cell_type == "code" else None
        if cell.cell_type == "code":
            cell.outputs = []
    for question in questions(nb):
        stubs = [c for c in question["answers"] if c.cell_type == "code" and grade_id(c) not in answered]
        for cell in question["answers"]:
            if grade_id(cell) in answered:
                cell.source += "\n# 学生的答案"
            elif cell.cell_type == "code" and cell.source.splitlines()[-1].startswith("raise"):
                cell.outputs = [stub(cell.execution_count)]
        for test in question["tests"]:
            if stubs and test.cell_type == "code":
                top = stubs[0].source.splitlines()[-1].startswith("raise")
                test.outputs = [error("NameError", f"name '{grade_id(stubs[0])}' is not defined",
                                      f"Cell In[{test.execution_count}], line 5") if top
                                else stub(stubs[0].execution_count)]
    for cell in nb.cells:
        if grade_id(cell) in (outputs or {}):
            cell.outputs = outputs[grade_id(cell)]
    return nb


def test_one_question_passed_one_failed_the_rest_not_answered():
    long = "样本 0 的查询 0：注意力权重应为 [0.5308, 0.4692]\n第二行提示\n第三行不显示\n" + "很长" * 200
    nb = executed("a1_scoring", {"masked_softmax", "additive_attention"},
                  {"test_additive_attention": [failed(long)]})
    headline, text = summary(nb)
    assert headline == "共 7 题：通过 1，未通过 1，未作答 5。", headline
    lines = text.splitlines()
    assert "✔ 通过：1. 掩蔽 softmax（masked softmax）" in lines and "✘ 未通过：2. 加性注意力（additive attention）" in lines
    at = lines.index("✘ 未通过：2. 加性注意力（additive attention）")
    assert lines[at + 1] == "    test_additive_attention：样本 0 的查询 0：注意力权重应为 [0.5308, 0.4692]"
    assert lines[at + 2] == "    第二行提示" and lines[at + 3].startswith("○ 未作答：3.")
    assert "Traceback" not in text and "assert torch.allclose" not in text and "第三行" not in text
    assert "NotImplementedError" not in text and "NameError" not in text, text
    assert "Traceback" in tracebacks(nb) and "\x1b[" not in tracebacks(nb)
    assert "test_additive_attention" in tracebacks(nb) and "NotImplementedError" not in tracebacks(nb)


def test_two_answered_the_stubs_inside_functions_are_not_answered():
    """a4's stubs raise in a function's body, so its tests meet the NotImplementedError: 未作答 all the same."""
    nb = executed("a4_rope_mla", {"apply_rope", "mla_cache_bytes", "gqa_equivalent_groups"})
    headline, text = summary(nb)
    n = len(questions(nb))
    assert n > 2 and headline == f"共 {n} 题：通过 2，未通过 0，未作答 {n - 2}。", headline
    assert text.count("○ 未作答：") == n - 2 and text.count("✔ 通过：") == 2, text
    assert "NotImplementedError" not in text and "还没有" not in text and not tracebacks(nb), text


def test_a_stub_is_named_once_and_a_real_not_implemented_error_is_a_failure():
    # a3 question 4: KVCache written, decode_step still the stub, which both of its tests meet
    nb = executed("a3_gqa", {"kv_cache"})
    headline, text = summary(nb)
    assert text.count("第 4 题：带缓存的自回归解码") == 1, text
    at = text.index("✘ 未通过：第 4 题：带缓存的自回归解码")
    assert text[at:].splitlines()[1:3] == ["    decode_step：还没有作答", "○ 未作答：第 5 题：把多头注意力转换成 GQA"], text
    assert "NotImplementedError" not in text and headline == "共 9 题：通过 0，未通过 1，未作答 8。", (headline, text)
    # written, but forward's stub left (raised in the answer's own cell): still 未作答
    count = next(c.execution_count for c in nb.cells if grade_id(c) == "grouped_query_attention")
    nb = executed("a3_gqa", {"grouped_query_attention"}, {t: [stub(count)] for t in ("test_gqa_forward",)})
    assert "○ 未作答：第 2 题：`GroupedQueryAttention`" in summary(nb)[1], summary(nb)[1]
    # torch's own NotImplementedError (a module without forward) is the student's mistake, shown as one
    torch_says = 'Module [GroupedQueryAttention] is missing the required "forward" function'
    nb = executed("a3_gqa", {"grouped_query_attention"}, {"test_gqa_shapes": [error(
        "NotImplementedError", torch_says, "Cell In[20], line 3", "File /venv/torch/nn/modules/module.py:397")]})
    headline, text = summary(nb)
    assert "✘ 未通过：第 2 题：`GroupedQueryAttention`" in text and f"NotImplementedError: {torch_says}" in text
    assert "未通过 1" in headline and torch_says in tracebacks(nb), text
    # a test that meets another question's stub says so
    count = next(c.execution_count for c in nb.cells if grade_id(c) == "repeat_kv")
    nb = executed("a3_gqa", {"grouped_query_attention"}, {"test_gqa_forward": [stub(count)]})
    assert "    test_gqa_forward：它用到的 repeat_kv 还没有作答" in summary(nb)[1].splitlines(), summary(nb)[1]


def test_everything_passed_says_so():
    nb = nbformat.read(ROOT / "release" / "a1_scoring" / "scoring.ipynb", as_version=4)
    answered = executed("a1_scoring", {grade_id(c) for c in nb.cells if c.cell_type == "code"})
    headline, text = summary(answered)
    assert headline == "共 7 题：通过 6，未通过 0，未作答 1。" and "所有自动检查的题目都通过了可见测试" in text, text
    assert "○ 未作答：7. 简答题" in text  # the written answer is still the placeholder
