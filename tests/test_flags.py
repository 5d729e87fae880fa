"""Review flags, read from the student's code: holds only for what could reach the grader's machinery or its
verdicts (the trust boundary), so that harmless code, however unusual, holds no point (seconds)."""
import pytest

from attncourse.grading.run import flags

IMPORTS = ["import math\nimport torch\nfrom torch import nn\nfrom torch.nn import functional as F\n"
           "from d2l import torch as d2l"]

# What honest students put in their notebooks (the harmless idioms of real classes), and other ordinary code.
HONEST = [
    'import os\nos.environ["KMP_DUPLICATE_LIB_OK"] = "TRUE"',
    'import matplotlib.pyplot as plt\nplt.rcParams["font.sans-serif"] = ["SimHei"]\nplt.rcParams["axes.unicode_minus"] = False',
    "print(torch.__version__, d2l.__name__)",
    "%matplotlib inline\n%config InlineBackend.figure_format = 'svg'",
    "%%time\nx = torch.randn(100, 100) @ torch.randn(100, 100)",
    "%timeit torch.randn(10)",
    "%load_ext autoreload\n%autoreload 2",
    "%pip install d2l==1.0.3",
    "from tqdm import tqdm\nfor i in tqdm(range(3)):\n    pass",
    "import time, json, math, random, sys, pathlib\nprint(sys.version, sys.platform)\nsys.path.append('..')",
    "from __future__ import annotations\ndef f(x: torch.Tensor) -> torch.Tensor:\n    return x",
    "torch.manual_seed(0)\nrandom.seed(0)\nimport numpy as np\nnp.random.seed(0)",
    "torch.backends.cudnn.deterministic = True\ntorch.backends.cudnn.benchmark = False",
    "try:\n    import d2l\nexcept ImportError:\n    d2l = None",
    "import logging\nlogging.warning('x')\nimport warnings\nwarnings.filterwarnings('ignore')",
    "# nbgrader validate；os.system\ns = 'import os; exec(1)'",
    "w = getattr(m, 'W_q')\nfor name in ('q', 'k'):\n    layer = getattr(self, f'W_{name}')\n    setattr(self, name, 1)",
    "class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.__dict__['x'] = 1\n"
    "    def __repr__(self):\n        return self.__class__.__name__",
    "from IPython.display import display, HTML\ndisplay(HTML('<b>结果</b>'))",
    "input = 3\nprint(input)",
    "import inspect\nprint(inspect.signature(print))",
    "import traceback\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n    traceback.print_exc()",
    "with open('results.txt') as f:\n    text = f.read()",
    "print(eval('1 + 2'))",
    "torch.set_printoptions(precision=3)\ntorch.set_num_threads(2)",
    "import pandas as pd\npd.set_option('display.max_rows', 10)",
    "if __name__ == '__main__':\n    print('main')",
    # memory clean-up in an experiment
    "import gc\ndel model\ngc.collect()\ntorch.cuda.empty_cache()",
    "import gc\ngc.disable()\nx = 1\ngc.enable()",
    # reading where the notebook runs
    "import sys, os, platform\nIN_COLAB = 'google.colab' in sys.modules\nprint(os.getcwd(), platform.system())",
    "import sys\nif 'ipykernel' not in sys.modules:\n    print('不在 notebook 中')",
    "import os\nprint(os.environ.get('HOME'), os.cpu_count())",
    # installed IPython extensions
    "%load_ext storemagic",
    "get_ipython().run_line_magic('load_ext', 'autoreload')",
    # device selection
    "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\nprint(torch.cuda.device_count())",
    "from attncourse import get_device\ndevice = get_device()",
    # plotting setup
    "import seaborn as sns\nsns.set_theme()\nd2l.use_svg_display()",
    # timing
    "import time\nstart = time.perf_counter()\nx = torch.randn(10)\nprint(time.perf_counter() - start)",
    "%%timeit -n 3\ntorch.randn(10)",
    # the student's own self-checks
    "assert torch.allclose(torch.ones(2), torch.ones(2)), '自测失败'\nprint('自测通过')",
]


@pytest.mark.parametrize("code", HONEST)
def test_honest_code_is_never_flagged(code):
    assert flags.findings([(0, "单元格 x", code)], IMPORTS) == []


@pytest.mark.parametrize("code", ["!pip install d2l==1.0.3", "import shutil\nshutil.rmtree('x')",
                                  "with open('out.txt', 'w') as f:\n    f.write('1')", "import os\nos.system('ls')",
                                  "import sqlite3\nsqlite3.connect('gradebook.db')", "%%writefile x.txt\nhello"])
def test_files_and_processes_are_held_only_without_a_sandbox(code):
    found = flags.findings([(0, "单元格 x", code)], IMPORTS)
    assert found and {f.kind for f in found} == {"unsandboxed"}
    assert flags.review_flags([("x", code)], IMPORTS, sandboxed=True) == []
    assert flags.review_flags([("x", code)], IMPORTS, sandboxed=False)


@pytest.mark.parametrize("code, words", [
    ("exec(__import__('base64').b64decode('eA=='))", ["exec"]),
    ("get_ipython().ast_transformers.append(1)", ["get_ipython"]),
    ("get_ipython().set_custom_exc((Exception,), None)", ["set_custom_exc"]),
    ("from IPython.core.interactiveshell import ExecutionResult", ["IPython.core"]),
    ("%run helper.py", ["%run"]),
    ("%load_ext attncourse.grading.protocol.probe", ["%load_ext"]),
    ("import sys\nprobe = sys.modules.get('attncourse.grading.protocol.probe')", ["sys.modules"]),
    ("import sys\nif 'x' in sys.modules:\n    sys.modules['x'].f = 1", ["sys.modules"]),
    ("import gc\nrefs = gc.get_referrers(torch.Tensor)", ["gc.get_referrers"]),
    ("x.__globals__", ["__globals__"]),
    ("f.__code__ = g.__code__", ["__code__"]),
    ("object.__subclasses__()", ["__subclasses__"]),
    ("import sys\nframe = sys._getframe(1)", ["sys._getframe"]),
    ("import inspect\nfor f in inspect.stack():\n    print(f.frame.f_locals)", ["inspect.stack"]),
    ("def f():\n    try:\n        1 / 0\n    except Exception as e:\n        return e.__traceback__.tb_frame.f_back", ["__traceback__"]),
    ("import gc\nrefs = gc.get_objects()", ["gc.get_objects"]),
    ("from gc import get_objects", ["gc.get_objects"]),
    ("import sys\nsys.modules['attncourse.grading.protocol.probe']", ["sys.modules"]),
    ("d2l.sys.modules['x']", ["sys.modules"]),
    ("d2l.torch.sys.setprofile(None)", ["sys.setprofile"]),
    ("import threading\nthreading.setprofile(None)", ["threading.setprofile"]),
    ("torch._C._set_x()", ["torch._C"]),
    ("with torch._C.DisableTorchFunction():\n    pass", ["torch._C"]),
    ("from torch.overrides import TorchFunctionMode", ["torch.overrides"]),
    ("getattr(torch, 'all' + 'close')", ["getattr"]),
    ("getattr(torch, '_C')", ["torch._C"]),
    ("import attncourse.grading.protocol.probe", ["attncourse.grading"]),
    ("__import__('attncourse.grading')", ["attncourse.grading"]),
    ("import ctypes", ["ctypes"]),
    ("import builtins\nbuiltins.isinstance = lambda *a: True", ["builtins"]),
    ("breakpoint()", ["breakpoint"]),
    ("with open('helper.py', 'w') as f:\n    f.write('x = 1')\nimport helper", ["helper"]),
    ("from pathlib import Path\nPath('helper.py').write_text('x = 1')\nimport helper", ["helper"]),
    ("with open('hel' + 'per.py', 'w') as f:\n    f.write('x = 1')\nfrom helper import x", ["helper"]),
    ("with open(name, 'w') as f:\n    f.write('x = 1')\nimport helper", ["helper"]),
    ("with open('myext.py', 'w') as f:\n    f.write('def load_ipython_extension(ip): pass')\n%load_ext myext",
     ["%load_ext", "myext"]),
    ("exec('import gc\\ngc.get_objects()')", ["gc.get_objects"]),
])
def test_what_could_reach_the_grader_is_held(code, words):
    found = flags.review_flags([("单元格 x", code)], IMPORTS)
    assert found and all(any(w in f for f in found) for w in words), found


# Not on the grader (the test checks it): an import of one fails its cell as any import error does.
MISSING = ("tensorboard", "lab_black", "watermark", "wandb", "my_extension")


@pytest.mark.parametrize("code", [
    "%load_ext tensorboard",
    "%load_ext lab_black",
    "%load_ext my_extension",
    "get_ipython().run_line_magic('load_ext', 'watermark')",
    "import wandb\nwandb.init(project='attention')",
    "try:\n    import wandb\nexcept ImportError:\n    wandb = None\nwith open(f'{out}/log.txt', 'w') as f:\n    f.write('1')",
    "%load_ext tensorboard\nimport os\nwith open(os.path.join(out, 'config.json'), 'w') as f:\n    f.write('{}')",
    "from wandb import init\nfrom pathlib import Path\n(Path(out) / 'notes.md').write_text('实验记录')",
    "import os, wandb\nwith open(os.path.join(out, 'sweep.py'), 'w') as f:\n    f.write('lr = 0.1')",
])
def test_an_extension_or_module_the_grader_lacks_holds_nothing(code):
    """It fails the student's cell like any import error: no hold, also beside files the notebook writes whose
    names are no module."""
    assert not any(map(flags._installed, MISSING))
    assert flags.review_flags([("单元格 x", code)], IMPORTS, sandboxed=True) == []


def test_a_module_the_notebook_writes_is_held_in_the_cell_that_loads_it():
    cells = [(2, "单元格 #3", "%%writefile myext.py\ndef load_ipython_extension(ip):\n    pass"),
             (3, "单元格 #4", "%load_ext tensorboard\n%load_ext myext")]
    held = [(f.cell, f.line, f.what) for f in flags.findings(cells, IMPORTS) if f.holds(sandboxed=True)]
    assert held == [(3, 2, "用 %load_ext 加载了自己写到磁盘上的模块 myext（看不到它的代码）")]


@pytest.mark.parametrize("code, words", [
    ("torch.allclose = lambda *a, **k: True", ["torch.allclose"]),
    ("t = torch\nt.testing.assert_close = None", []),
    ("vars(torch)['allclose'] = lambda *a: True", ["vars"]),
    ("setattr(torch, 'equal', lambda *a: True)", ["torch.equal"]),
    ("class T(torch.Tensor):\n    pass", ["Tensor"]),
    ("import os\nif os.environ.get('NBGRADER_EXECUTION'):\n    pass", ["NBGRADER_EXECUTION"]),
])
def test_what_shows_intent_but_changes_no_verdict_is_a_note(code, words):
    found = flags.findings([(0, "单元格 x", code)], IMPORTS)
    assert {f.kind for f in found} <= {None} and all(any(w in str(f) for f in found) for w in words), found


def test_a_hold_names_the_cell_and_line():
    found = flags.findings([(3, "单元格 masked_softmax", "x = 1\nimport ctypes\n")], IMPORTS)
    assert [(f.cell, f.line, str(f)) for f in found] == [(3, 2, "单元格 masked_softmax 第 2 行：导入了 ctypes")]


# --- what the course itself writes holds nothing ---------------------------------------------------------------

def _course_code():
    """(where, source) of every code cell of the decks, every visible test of the student versions, and every
    correct answer of the catalogs: code a student may copy into a notebook."""
    import nbformat

    from attncourse.grading.authoring.variants import load_catalog
    from attncourse.grading.cells import HIDDEN_PART, is_test_cell

    from conftest import ROOT, UNITS
    found = [(f"{deck.name} #{i}", c.source) for deck in sorted((ROOT / "notebooks").glob("*.ipynb"))
             for i, c in enumerate(nbformat.read(deck, as_version=4).cells) if c.cell_type == "code"]
    for unit in UNITS:
        for path in (ROOT / "release" / unit).glob("*.ipynb"):
            found += [(f"{unit} {c.metadata['nbgrader']['grade_id']}", HIDDEN_PART.sub("", c.source))
                      for c in nbformat.read(path, as_version=4).cells if is_test_cell(c)]
        catalog = load_catalog(ROOT, unit)
        answers = {"LECTURER": catalog.LECTURER, **{f"ALSO_CORRECT[{k}]": v for k, v in catalog.ALSO_CORRECT.items()}}
        found += [(f"{unit} {name} {gid}", code) for name, cells in answers.items() for gid, code in cells.items()]
    return found


def test_decks_visible_tests_and_correct_answers_hold_nothing():
    code = _course_code()
    assert len(code) > 100
    held = [(where, str(f)) for where, source in code for f in flags.findings([(0, where, source)], IMPORTS)
            if f.holds(sandboxed=True) or f.kind is None]
    assert held == []


def test_a_cell_read_again_gives_the_same_findings_and_a_huge_cell_keeps_no_tree():
    from attncourse.grading import syntax
    cell = [(0, "cell", "import ctypes\nget_ipython().system('ls')\n%env X=1\n")]
    first = [str(f) for f in flags.findings(cell)]
    assert first and [str(f) for f in flags.findings(cell)] == first
    short = "x = 1\n"
    assert syntax.python_source(short) is syntax.python_source(short)  # kept: read once per run
    huge = "x = 1\n" * (syntax.KEPT_CHARS // 6 + 1)
    assert syntax.python_source(huge) is not syntax.python_source(huge)  # read afresh: no huge tree is kept
    assert len(syntax.python_source(huge).body) == syntax.KEPT_CHARS // 6 + 1
