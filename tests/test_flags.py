"""Review flags and forbidden shortcuts, read from the student's code (seconds)."""
import pytest

from attncourse.grading.run import flags, shortcuts

IMPORTS = ["import math\nimport torch\nfrom torch import nn\nfrom torch.nn import functional as F\n"
           "from d2l import torch as d2l"]



HONEST = ("import logging\nlogging.warning('x')\n# nbgrader validate；os.system\ns = 'import os; exec(1)'\n"
          "w = getattr(m, 'W_q')\n%matplotlib inline\nfrom IPython.display import display\n"
          "class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        setattr(self, 'x', 1)\n"
          "input = 3\nprint(input)")


@pytest.mark.parametrize("code, words", [
    (HONEST, []),
    ("import os\nos.environ", ["os"]),
    ("torch.allclose = lambda *a, **k: True", ["改写了 torch"]),
    ("t = torch\nt.testing.assert_close = None", ["改写了 torch"]),
    ("vars(torch)['allclose'] = 1", ["vars"]),
    ("exec(__import__('base64').b64decode('eA=='))", ["exec", "__import__"]),
    ("class T(torch.Tensor):\n    pass", ["Tensor"]),
    ("get_ipython().ast_transformers.append(1)", ["get_ipython"]),
    ("%load x.py", ["%load"]),
    ("!ls", ["shell"]),
    ("x.__globals__", ["__globals__"]),
    ("torch._C._set_x()", ["torch._C"]),
    ("getattr(torch, 'all' + 'close')", ["getattr"]),
    ("import attncourse.grading.protocol.probe", ["attncourse.grading"]),
])
def test_review_flags(code, words):
    found = flags.review_flags([("单元格 x", code)], IMPORTS)
    assert (found == []) if not words else all(any(w in f for f in found) for w in words), found


def test_forbidden_shortcuts_are_found_in_the_answer_and_what_it_calls():
    uses = shortcuts.forbidden_uses
    cells = [("ms", "masked_softmax = d2l.masked_softmax"),
             ("add", "class A:\n    def f(self):\n        return masked_softmax(1, 2)"),
             (None, "def helper(q, k, v):\n    return getattr(G, 'scaled_dot_product_attention')(q, k, v)\n"
                    "import torch.nn.functional as G"),
             ("dot", "def dot(q, k, v):\n    return helper(q, k, v)"),
             ("other", "def sdpa(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)"),
             ("dot2", "def dot2(q, k, v):\n    return sdpa(q, k, v)"),
             ("gqa", "F.scaled_dot_product_attention(q, k, v, enable_gqa=True)")]
    assert uses(cells, "ms", ["d2l.masked_softmax"], IMPORTS) == ["d2l.masked_softmax"]
    assert uses(cells, "add", ["d2l.masked_softmax"], IMPORTS) == ["d2l.masked_softmax"]
    swapped = {"masked_softmax"}  # the test swaps in a reference: that question is judged alone (no cascade)
    assert uses(cells, "add", ["d2l.masked_softmax"], IMPORTS, judged_alone=swapped) == []
    assert uses(cells, "dot", ["F.scaled_dot_product_attention"], IMPORTS) == ["F.scaled_dot_product_attention"]
    assert uses(cells, "dot2", ["F.scaled_dot_product_attention"], IMPORTS) == ["F.scaled_dot_product_attention"]
    assert uses(cells, "gqa", ["enable_gqa="], IMPORTS) == ["enable_gqa"]


