"""`attncourse.checks.differences`, the end of a failed comparison's message: expected and actual values over the
same positions, in rows whose columns line up (seconds, no kernel)."""
import torch

from attncourse.checks import cases, configs, differences
from attncourse.grading.publish.feedback import _message_line


def test_the_first_differing_positions_line_up_under_their_index():
    expected = torch.arange(12.0).reshape(2, 2, 3)
    got = expected.clone()
    got[0, 1, 2], got[1, 0, 0], got[1, 1, 1] = -1.5, float("nan"), 1e6
    first, *rows = differences(got, expected, limit=2).splitlines()
    assert first == "共 3 处不同，前 2 处："
    assert [row.split()[0] for row in rows] == ["位置", "期望", "实际"]
    assert [row.split()[1:] for row in rows[1:]] == [["5", "6"], ["-1.5", "nan"]]
    ends = {len(row) for row in rows}  # labels of equal width, values right-aligned in columns as wide as the index
    assert len(ends) == 1 and rows[0].endswith("(1, 0, 0)"), rows


def test_a_shape_or_a_tolerance_is_said_in_words():
    x = torch.ones(2, 3)
    assert differences(x[:1], x) == "形状不同：期望 (2, 3)，实际 (1, 3)"
    assert differences(x + 1e-3, x, atol=1e-2) == "在这个容差内没有不同的位置"
    assert differences((x + 1e-3).half(), x).startswith("共 6 处不同")


def test_feedback_shows_the_rows_in_a_fixed_width_font():
    assert _message_line("  期望   5  <6>") == '<span class="aligned">  期望   5  &lt;6&gt;</span>'
    assert _message_line("结果不一致") == "结果不一致"


def test_feedback_shows_a_hints_experiment_as_code():
    assert _message_line("试一试：`print(a < b)`，再 `x`") == "试一试：<code>print(a &lt; b)</code>，再 <code>x</code>"
    assert _message_line("一个 ` 不成对") == "一个 ` 不成对"


def test_half_precision_on_the_cpu_runs_the_first_row_of_a_table_and_everything_else_all_rows():
    table = ((4, 2), (6, 3), (8, 1))
    runs = {(device.type, dtype): configs(table, device, dtype) for device, dtype, _, _ in cases()}
    assert set(runs) >= {("cpu", torch.float32), ("cpu", torch.float16), ("cpu", torch.bfloat16)}
    for (device, dtype), rows in runs.items():
        assert rows == (table if dtype == torch.float32 or device == "cuda" else table[:1]), (device, dtype)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):  # a grader with a GPU: every row on CUDA
        assert configs(table, torch.device("cuda"), dtype) == table
