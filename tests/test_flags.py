"""Review flags, read from the student's code (seconds)."""
import pytest

from attncourse.grading.run import flags

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
