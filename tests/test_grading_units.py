"""Fast checks of the grading helpers that decide what student code can and cannot do."""
import base64
import json
import os

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_notebook

from attncourse.grading.intake import staging
from attncourse.grading.protocol import trusted, wire
from attncourse.grading.protocol.remote import Remote, Session
from attncourse.grading.run import flags, shortcuts

IMPORTS = ["import math\nimport torch\nfrom torch import nn\nfrom torch.nn import functional as F\n"
           "from d2l import torch as d2l"]


# --- wire: what comes out of the kernel is data, checked -----------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool])
def test_tensors_cross_the_wire_exactly(dtype):
    t = (torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0)) * 3).to(dtype)
    payload = wire.tensor_payload(t)
    back = wire.tensor_from_payload(json.loads(json.dumps(payload)))
    assert type(back) is torch.Tensor and back.dtype == dtype and torch.equal(back, t)
    assert wire.tensor_from_payload(wire.tensor_payload(torch.empty(0, 3))).shape == (0, 3)


@pytest.mark.parametrize("bad", [
    {"$tensor": {"dtype": "object", "shape": [1], "data": ""}},
    {"$tensor": {"dtype": "float32", "shape": [2], "data": base64.b64encode(b"\0" * 4).decode()}},
    {"$tensor": {"dtype": "float32", "shape": [-1], "data": ""}},
    {"$tensor": {"dtype": "float32", "shape": [1 << 20, 1 << 20], "data": ""}},
    {"$pickle": "gASVAAAAAAAAAAAu"},
    {"$ref": "not a dict"},
    {"a": 1, "b": 2},
    [[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]],
])
def test_malformed_kernel_data_is_refused(bad):
    with pytest.raises(wire.WireError):
        wire.decode_from_kernel(bad, lambda info: None)


def test_a_proxy_cannot_claim_to_be_an_arbitrary_class():
    session = Session(send=None)
    fake = Remote(session, {"id": 1, "type": "os:_wrap_close", "mro": ["os:_wrap_close", "builtins:object"]})
    linear = Remote(session, {"id": 2, "type": "torch.nn.modules.linear:Linear",
                              "mro": ["torch.nn.modules.linear:Linear", "torch.nn.modules.module:Module"]})
    mine = Remote(session, {"id": 3, "type": "__main__:AdditiveAttention",
                            "mro": ["__main__:AdditiveAttention", "torch.nn.modules.module:Module"]})
    assert isinstance(linear, torch.nn.Linear) and isinstance(mine, torch.nn.Module)
    assert not isinstance(mine, torch.nn.Linear)
    assert fake.__class__.__bases__ == (object,) and fake.__class__.__module__ == "attncourse.grading.protocol.remote"
    with pytest.raises(TypeError):
        linear.weight = 1


def test_free_names_are_what_a_test_cell_reads_from_the_student():
    source = "import copy\ndef _ref(X):\n    return F.softmax(X, -1)\nout = masked_softmax(X0, None)\n" \
             "for i in range(3):\n    m = AdditiveAttention(i)\ntry:\n    var_scaled\nexcept NameError as e:\n    pass"
    assert trusted.free_names(source) == {"F", "masked_softmax", "X0", "AdditiveAttention", "var_scaled"}


# --- review flags and forbidden shortcuts ---------------------------------------------------------------------

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


# --- intake ----------------------------------------------------------------------------------------------------

@pytest.fixture
def released():
    nb = new_notebook(cells=[new_code_cell("x = 1", metadata={"nbgrader": {
        "grade": True, "grade_id": "test_x", "locked": True, "points": 1, "schema_version": 3, "solution": False}})])
    return {"work.ipynb": nb}


def _submit(tmp_path, student, files):
    folder = tmp_path / "class" / student / "a"
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name).write_text(content, encoding="utf-8")
    return folder


def test_intake_refuses_unsafe_ids_and_symlinks(tmp_path, released):
    nb = nbformat.writes(released["work.ipynb"])
    for student in ("学生*甲", "a b", "-rf"):
        assert "学生编号" in staging.stage(_submit(tmp_path, student, {"work.ipynb": nb}), tmp_path / "s", "a",
                                         released).reason
    folder = _submit(tmp_path, "linker", {"work.ipynb": nb})
    os.symlink("/etc/passwd", folder / "notes.txt")
    assert "符号链接" in staging.stage(folder, tmp_path / "s2", "a", released).reason


def test_intake_renames_a_single_notebook_and_sets_extra_ones_aside(tmp_path, released):
    nb = nbformat.writes(released["work.ipynb"])
    renamed = staging.stage(_submit(tmp_path, "s1", {"work (1).ipynb": nb}), tmp_path / "s1", "a", released)
    assert renamed.reason == "" and (renamed.folder / "work.ipynb").exists() and "work (1).ipynb" in renamed.notes[0]
    extra = staging.stage(_submit(tmp_path, "s2", {"work.ipynb": nb, "old.ipynb": "{broken"}), tmp_path / "s2",
                          "a", released)
    assert extra.reason == "" and "old.ipynb" in extra.notes[0] and not (extra.folder / "old.ipynb").exists()
    broken = staging.stage(_submit(tmp_path, "s3", {"work.ipynb": "{broken"}), tmp_path / "s3", "a", released)
    assert "损坏" in broken.reason
    none = staging.stage(_submit(tmp_path, "s4", {"a.ipynb": nb, "b.ipynb": nb}), tmp_path / "s4", "a", released)
    assert "找不到 work.ipynb" in none.reason


def test_intake_restores_grading_metadata(tmp_path, released):
    nb = released["work.ipynb"]
    tampered = nbformat.from_dict(json.loads(nbformat.writes(nb)))
    tampered.cells[0].metadata["nbgrader"].update(solution=True, locked=False, points=100)
    tampered.cells.append(new_code_cell("y = 2", metadata={"nbgrader": {"grade": True, "grade_id": "invented"}}))
    tampered.cells.insert(0, nbformat.from_dict(json.loads(json.dumps(tampered.cells[0]))))
    intake = staging.stage(_submit(tmp_path, "s", {"work.ipynb": nbformat.writes(tampered)}), tmp_path / "st",
                           "a", released)
    staged = nbformat.read(intake.folder / "work.ipynb", as_version=4)
    assert [c.metadata.get("nbgrader") for c in staged.cells] == [None, nb.cells[0].metadata["nbgrader"], None]
    assert intake.notes


# --- the sandbox's surroundings ----------------------------------------------------------------------------------

def test_without_a_sandbox_grading_says_so_loudly(monkeypatch):
    from attncourse.grading.course import nbgrader_config
    from attncourse.grading.isolation import sandbox
    from conftest import ROOT
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    said = []
    assert sandbox.for_grading(nbgrader_config(ROOT), said.append) is None
    assert "警告" in said[0] and "bubblewrap" in said[0] and "权限" in said[0]
    cfg = nbgrader_config(ROOT)
    cfg.Sandbox.mode = "required"
    with pytest.raises(sandbox.SandboxUnavailable, match="bubblewrap"):
        sandbox.for_grading(cfg, said.append)


@pytest.mark.slow
def test_a_lost_preloading_process_is_started_again(tmp_path):
    from nbclient import NotebookClient

    from attncourse.grading.isolation import preload, sandbox
    settings = sandbox.Sandbox()
    nb = new_notebook(cells=[new_code_cell("import os\nprint(os.getuid())")])
    nbformat.write(nb, tmp_path / "x.ipynb")
    with preload.preloaded_kernels(print, None if settings.problem() else settings):
        zygote = preload.PreloadedProvisioner.zygote
        zygote.proc.kill()
        zygote.proc.wait()
        NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
        assert zygote.proc.poll() is None, "a new preloading process should be running"
    assert nb.cells[0].outputs[0].text.strip().isdigit()
