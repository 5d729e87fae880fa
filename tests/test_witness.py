"""The witness of forbidden calls (grading/protocol/witness.py), in seconds: the kernel's side is served in a
fresh process of its own with the witness installed and a key, as a grading kernel has it, and the grader's
side (`remote.Session`, the test cells) runs in that process too. The witness cannot be removed from a process,
so each case that switches it off gets a process of its own.

Run as a script (`python tests/test_witness.py CASE...`) it grades the cases and prints their verdicts as JSON.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # processes that import torch and d2l: about 20 s before the first verdict

ROOT = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("hostile", ROOT / "catalog" / "hostile.py")
HOSTILE = importlib.util.module_from_spec(_SPEC)  # the hostile class's sources, for the cases it shares
_SPEC.loader.exec_module(HOSTILE)

DPA = """class DotProductAttention(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
        self.attention_weights = masked_softmax(scores, valid_lens)
        return {output}
"""
HONEST_OUTPUT = "torch.bmm(self.dropout(self.attention_weights), values)"
CHILD_SDPA = "from attncourse.checks import forbid\nforbid('attend', 'F.scaled_dot_product_attention')\nattend(torch.ones(1, 2, 3))\n"
FORBID_MHA = ("from attncourse.checks import forbid\nforbid('attend', 'nn.MultiheadAttention')\n"
              "assert attend(torch.ones(2, 1, 3)).shape == (2, 1, 3)\n")
# a function whose code's names are a str subclass with methods of the student's
ODD_NAMES = """class _Name(str):
    def startswith(self, *args):
        raise RuntimeError("the hook ran the student's method")
    __hash__ = __eq__ = startswith
def _answer(X, valid_lens):
    return d2l.masked_softmax(X, valid_lens)
masked_softmax = type(_answer)(_answer.__code__.replace(co_filename=_Name("lib"), co_name=_Name("f")), globals())
"""
# a thread started while threading's profile function is taken away through a computed name, put back before the
# report
PROFILE_RESTORED = """import threading
_t = vars(threading)
def masked_softmax(X, valid_lens):
    hook, _t['_profile' + '_hook'] = _t['_profile' + '_hook'], None
    out = []
    worker = threading.Thread(target=lambda: out.append(d2l.masked_softmax(X, valid_lens)))
    worker.start()
    worker.join()
    _t['_profile' + '_hook'] = hook
    return out[0]
"""
POOL = "from concurrent.futures import ThreadPoolExecutor\n_pool = ThreadPoolExecutor(2)\n_pool.submit(print, '池已启动').result()"
TRACED = ("_x = torch.randn(2, 3, 4)\n_traced = torch.jit.trace(lambda q, k, v: F.scaled_dot_product_attention(q, k, v),"
          " (_x, _x, _x))")
MASKED = "def masked_softmax(X, valid_lens):\n{body}    return d2l.masked_softmax(X, valid_lens)\n"
PROBE = "import importlib\n_probe = importlib.import_module('attncourse.grading.' + 'protocol.probe')\n"
MHA_CORE = """def attend(x):
    import torch.nn.functional as G
    w = torch.eye(3).repeat(3, 1)
    return G.multi_head_attention_forward(x, x, x, 3, 1, w, None, None, None, False, 0.0, torch.eye(3), None,
                                          need_weights=False)[0]
"""
STUDENT_KEYWORD = ("def attend(q):\n    options = {'enable_' + 'gqa': True}\n"
                   "    return F.scaled_dot_product_attention(q, q, q, **options)")
# id: (what the student's code is: {answer: source} of a1, or a source of its own; tests; extra cells)
CASES = {
    "alias": ({"masked_softmax": "masked_softmax = d2l.masked_softmax\n"}, "test_masked_softmax", ()),
    "sdpa": ({"dot_product_attention": DPA.format(output="F.scaled_dot_product_attention(queries, keys, values)")},
             "test_dot_product_attention", ()),
    "rebound": ({"dot_product_attention": DPA.format(output="sdpa(queries, keys, values)")},
                "test_dot_product_attention", ["sdpa = F.scaled_dot_product_attention"]),
    "by_string": ({"dot_product_attention": DPA.format(
        output='getattr(F, "scaled_" + "dot_product_attention")(queries, keys, values)')}, "test_dot_product_attention", ()),
    "ops": ({"dot_product_attention": DPA.format(
        output="torch.ops.aten.scaled_dot_product_attention(queries, keys, values)")}, "test_dot_product_attention", ()),
    "fused_op": ({"dot_product_attention": DPA.format(
        output="torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(queries, keys, values)[0]")},
        "test_dot_product_attention", ()),
    "partial": ({"dot_product_attention": DPA.format(
        output="functools.partial(F.scaled_dot_product_attention, dropout_p=0.0)(queries, keys, values)")},
        "test_dot_product_attention", ["import functools"]),
    "exec": ({"dot_product_attention": DPA.format(output="helper(queries, keys, values)")}, "test_dot_product_attention",
             ["exec('def helper(q, k, v):\\n    return F.scaled_dot_product_attention(q, k, v)')"]),
    "d2l_class": ({"dot_product_attention": DPA.format(
        output="d2l.DotProductAttention(0.0)(queries, keys, values, valid_lens)")}, "test_dot_product_attention", ()),
    "pool_sdpa": ({"dot_product_attention": DPA.format(
        output="_pool.submit(F.scaled_dot_product_attention, queries, keys, values).result()")},
        "test_dot_product_attention", [POOL]),
    "pool_python": ({"masked_softmax": "def masked_softmax(X, valid_lens):\n"
                                       "    return _pool.submit(d2l.masked_softmax, X, valid_lens).result()\n"},
                    "test_masked_softmax", [POOL]),
    "torchscript": ({"dot_product_attention": DPA.format(output="_traced(queries, keys, values)")},
                    "test_dot_product_attention", [TRACED]),
    "mode_stack": ({"dot_product_attention": DPA.format(
        output="[torch._C._pop_torch_function_stack() for _ in range(torch._C._len_torch_function_stack())]"
               " and None or F.scaled_dot_product_attention(queries, keys, values)")}, "test_dot_product_attention", ()),
    "module_state": ({"masked_softmax": PROBE.replace("protocol.probe", "protocol.witness") + "vars(_probe)['_G'].clear()\n"
                      + MASKED.format(body="")}, "test_masked_softmax", ()),
    "honest_self_check": ({"dot_product_attention": DPA.format(output=HONEST_OUTPUT)
                           + "\n_q = torch.randn(2, 3, 4)\nassert torch.allclose(DotProductAttention(0.0)(_q, _q, _q), "
                           "F.scaled_dot_product_attention(_q, _q, _q), atol=1e-5)  # a self-check, as the deck does"},
                          "test_dot_product_attention", ()),
    "honest_name": ({"dot_product_attention": DPA.format(output=HONEST_OUTPUT).replace(
        "scores = ", "sdpa = 1\n        scores = ")}, "test_dot_product_attention",
        ["sdpa = F.scaled_dot_product_attention  # another cell binds the forbidden name"]),
    "honest_processes": ({"dot_product_attention": DPA.format(output=HONEST_OUTPUT)}, "test_dot_product_attention",
                         ["import os, subprocess\nos.system('echo 自检 > /dev/null')\nsubprocess.run(['true'], check=True)"
                          "  # finished before the tests, as `!pip list` is"]),
    "honest_tracing": ({"dot_product_attention": DPA.format(output=HONEST_OUTPUT)}, "test_dot_product_attention",
                       ["import sys\nsys.settrace(lambda *a: None)\nsys.setprofile(lambda *a: None)\n"
                        "d2l.masked_softmax(torch.rand(2, 2, 4), torch.tensor([2, 3]))\nsys.settrace(None)\n"
                        "sys.setprofile(None)\n"]),
    "honest_experiment": ({"dot_product_attention": DPA.format(output=HONEST_OUTPUT)}, "test_dot_product_attention",
                          ["print(F.scaled_dot_product_attention(torch.ones(1, 2, 3), torch.ones(1, 2, 3), "
                           "torch.ones(1, 2, 3)))  # an experiment", POOL]),
    "keyword": (STUDENT_KEYWORD, ["from attncourse.checks import forbid\nforbid('attend', 'enable_gqa=')\n"
                                  "attend(torch.ones(1, 2, 3))\n"], ()),
    "functional_core": (MHA_CORE, ["from attncourse.checks import forbid\nforbid('mha', 'nn.MultiheadAttention')\n"
                                   "attend(torch.ones(2, 1, 3))\n"], ()),
    # threads the watch never gave anything to: started by _thread itself, after threading's profile function was
    # removed (and put back), or a pool started without it; the forbidden Python function reports from any thread
    "raw_thread": ({"masked_softmax": HOSTILE.RAW_THREAD}, "test_masked_softmax", ()),
    "profile_restored": ({"masked_softmax": PROFILE_RESTORED}, "test_masked_softmax", ()),
    "unprofiled_pool": ({"masked_softmax": "import threading\nthreading.setprofile(None)\n" + POOL + "\n"
                         "def masked_softmax(X, valid_lens):\n    return _pool.submit(d2l.masked_softmax, X, valid_lens).result()\n"},
                        "test_masked_softmax", ()),
    "setprofile": ({"masked_softmax": "import sys\n" + MASKED.format(body="    sys.setprofile(None)\n")},
                   "test_masked_softmax", ()),
    # code whose names are a str subclass: the hook never runs their methods (they could reach its frames)
    "odd_names": ({"masked_softmax": ODD_NAMES}, "test_masked_softmax", ()),
    # TorchScript calls the forbidden module back in Python
    "scripted_module": ("_m = torch.jit.script(nn.MultiheadAttention(3, 1))\n"
                        "def attend(x):\n    return _m(x, x, x)[0]", [FORBID_MHA], ()),
    "later_tests": ("class A:\n    size = 3\n    def __call__(self, q):\n        return F.scaled_dot_product_attention(q, q, q)",
                    ["from attncourse.checks import forbid\nforbid('a', 'F.scaled_dot_product_attention')\nassert A.size == 3\n",
                     "from attncourse.checks import forbid\nforbid('a', 'F.scaled_dot_product_attention')\nA()(torch.ones(1, 2, 3))\n",
                     "from attncourse.checks import forbid\nforbid('a', 'F.scaled_dot_product_attention')\nassert A.size == 3\n",
                     "from attncourse.checks import forbid\nforbid('b', 'F.scaled_dot_product_attention')\nassert A.size == 3\n"],
                    ()),
}
# the probe's witness requests wrapped: `watch` held back and handed on just before the next command (the report),
# so that the forbidden call runs unwatched and the report is genuine
DELAYED = """_ops, _held = getattr(_probe, "OP" + "S"), []
_real = _ops["wit" + "ness"]
def _delayed(text, mac):
    if text.split(chr(30))[1] == "watch":
        _held.append((text, mac))
        return []
    while _held:
        _real(*_held.pop())
    return _real(text, mac)
_ops["wit" + "ness"] = _delayed
"""
# switching the witness off, one case per way it notices (a gc event, a watched function given other code, a copy
# of its code without the report, its module run again for fresh copies), each in a process of its own: the witness forgets its key for good. Replacing
# the probe's requests or reaching it through frames (hostile cases w75, w76) are caught by the signature, as these
# are.
SWITCHED_OFF = {
    "gc": ({"masked_softmax": "import gc\n_all = gc.get_objects()\n" + MASKED.format(body="")}, "test_masked_softmax", ()),
    "code_swapped": ({"masked_softmax": HOSTILE.CODE_SWAPPED}, "test_masked_softmax", ()),
    "code_copied": ({"masked_softmax": "_c = d2l.masked_softmax.__code__\n"
                     "_f = type(d2l.masked_softmax)(_c.replace(co_consts=_c.co_consts[:-3] + (print, '', 0)), vars(d2l))\n"
                     "masked_softmax = _f\n"}, "test_masked_softmax", ()),
    "reloaded": ({"masked_softmax": "import importlib\nmasked_softmax = importlib.reload(d2l).masked_softmax\n"},
                 "test_masked_softmax", ()),
    "delayed_watch": ({"masked_softmax": PROBE + DELAYED + "masked_softmax = d2l.masked_softmax\n"}, "test_masked_softmax",
                      ()),
}

# a trace or an fx graph recorded before the test (while no watch ran), which replays the forbidden function's
# operations without calling it: captured (each in a process of its own, as the capture lasts)
CAPTURES = {
    "traced_before": ("_x = torch.ones(2, 1, 3)\n_m = torch.jit.trace(nn.MultiheadAttention(3, 1), (_x, _x, _x))\n"
                      "def attend(x):\n    return _m(x, x, x)[0]", [FORBID_MHA], ()),
    "make_fx": ("from torch.fx.experimental.proxy_tensor import make_fx\n_m = nn.MultiheadAttention(3, 1)\n"
                "_g = make_fx(lambda x: _m(x, x, x)[0])(torch.ones(2, 1, 3))\n"
                "def attend(x):\n    return _g(x)", [FORBID_MHA], ()),
}

# flex_attention computes scaled dot-product attention in Python, without an SDPA operator, and in eager mode
# through torch.compile, which loads libraries with ctypes: its call is found, or the submission is held (a
# process of its own)
FLEX = {"flex": ("from torch.nn.attention.flex_attention import flex_attention\n"
                 "def attend(q):\n    return flex_attention(q[:, None], q[:, None], q[:, None])[:, 0]",
                 [CHILD_SDPA.replace("ones(1, 2, 3)", "ones(1, 2, 4)")], ())}

# the forbidden call made in another process, which the witness does not watch, one case per way it notices (each in
# a process of its own, as the witness forgets its key): a pool forked in an answer cell (a child alive as the watch
# begins; it inherits the witness, whose reports stay in the child), a fresh interpreter started by subprocess
# during the test (an audit event), a spawn pool (its resource tracker lives on), a process started without an
# audit event and waited for (its resource use), and the same with SIGCHLD ignored (reaped unseen)
# a process started as spawn pools start theirs (no audit event), ended and waited for before the report
UNAUDITED = """def attend(q):
    import multiprocessing.util, os
    pid = multiprocessing.util.spawnv_passfds(b"/bin/true", ["true"], [])
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:  # SIGCHLD ignored: reaped as it ended
        pass
    return q"""
CHILD_PROCESSES = {
    "fork_pool": ({"dot_product_attention": DPA.format(
        output="_procs.apply(F.scaled_dot_product_attention, (queries, keys, values))")}, "test_dot_product_attention",
        ["import multiprocessing\n_procs = multiprocessing.get_context('fork').Pool(1, torch.set_num_threads, (1,))"]),
    "subprocess": ("""def attend(q):
    import pickle, subprocess, sys
    code = ("import pickle, sys, torch; q = pickle.load(sys.stdin.buffer); "
            "pickle.dump(torch.nn.functional.scaled_dot_product_attention(q, q, q), sys.stdout.buffer)")
    return pickle.loads(subprocess.run([sys.executable, "-c", code], input=pickle.dumps(q), capture_output=True,
                                       check=True).stdout)""", [CHILD_SDPA], ()),
    "spawn_pool": ("""def attend(q):
    import multiprocessing
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(F.scaled_dot_product_attention, (q, q, q))""", [CHILD_SDPA], ()),
    "unaudited": (UNAUDITED, [CHILD_SDPA], ()),
    "sigchld_ignored": ("import signal\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\n" + UNAUDITED, [CHILD_SDPA], ()),
}


def _run(ids):
    """{case: {test: [passed, message]}, "tampered": [...]} for `ids`, graded in one fresh process."""
    done = subprocess.run([sys.executable, __file__, *ids], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def verdicts():
    switched = [subprocess.Popen([sys.executable, __file__, case], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, cwd=ROOT)
                for case in [*SWITCHED_OFF, *CAPTURES, *FLEX, *CHILD_PROCESSES]]
    found = _run(list(CASES))
    for process in switched:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-3000:]
        found.update(json.loads(out.strip().splitlines()[-1]))
    return found


@pytest.mark.parametrize("case", ["alias", "sdpa", "rebound", "by_string", "ops", "fused_op", "partial", "exec",
                                  "d2l_class", "pool_sdpa", "pool_python", "torchscript", "mode_stack", "module_state",
                                  "keyword", "functional_core", "raw_thread", "profile_restored", "unprofiled_pool",
                                  "setprofile", "odd_names", "scripted_module", *CAPTURES])
def test_a_forbidden_call_fails_its_question_on_every_path(verdicts, case):
    got = verdicts[case]
    assert got["tests"] and not got["tampered"], got
    assert all(not passed and "本题不允许用" in message for passed, message in got["tests"].values()), got


@pytest.mark.parametrize("case", ["honest_self_check", "honest_name", "honest_experiment", "honest_processes",
                                  "honest_tracing"])
def test_honest_self_checks_and_names_cost_nothing(verdicts, case):
    got = verdicts[case]
    assert got["tests"] and all(passed for passed, _ in got["tests"].values()) and not got["tampered"], got


def test_a_forbidden_call_fails_every_later_test_of_its_question(verdicts):
    got = verdicts["later_tests"]["tests"]
    assert [passed for passed, _ in got.values()] == [True, False, False, True], got
    assert "F.scaled_dot_product_attention" in got["t2"][1]


@pytest.mark.parametrize("case", list(SWITCHED_OFF))
def test_a_witness_switched_off_holds_the_submission(verdicts, case):
    """However the student's code stops, blinds or replaces the witness, the grader gets no signed report for the
    watch it asked for: the submission is held for review (never full marks unseen)."""
    got = verdicts[case]
    assert got["tests"] and got["tampered"] and all("禁止函数的监视" in t for t in got["tampered"]), got


def test_flex_attention_is_found_or_held(verdicts):
    got = verdicts["flex"]
    assert got["tests"] and (got["tampered"] or all(not passed and "本题不允许用" in message
                                                    for passed, message in got["tests"].values())), got


@pytest.mark.parametrize("case", list(CHILD_PROCESSES))
def test_a_forbidden_call_in_another_process_holds_the_submission(verdicts, case):
    """A process the kernel starts is not watched: one that runs (or ended) while a test that forbids something
    runs, or that was running as it began, holds the submission for review."""
    got = verdicts[case]
    assert got["tests"] and got["tampered"] and all("禁止函数的监视" in t for t in got["tampered"]), got


# --- the cases' process --------------------------------------------------------------------------------------
KEY, COUNT = os.urandom(32), [0]


def _parts(case):
    """(the notebook's imports, the student's cells and the extra ones, the test cells) of a case."""
    import nbformat

    from attncourse.grading.cells import grade_id, is_answer_cell, is_test_cell
    from attncourse.grading.syntax import only_imports
    student, tests, extra = {**CASES, **SWITCHED_OFF, **CAPTURES, **FLEX, **CHILD_PROCESSES}[case]
    if isinstance(student, dict):
        nb = nbformat.read(next((ROOT / "source" / "a1_scoring").glob("*.ipynb")), as_version=4)
        imports = [c.source for c in nb.cells if c.cell_type == "code" and not is_answer_cell(c)
                   and not is_test_cell(c) and only_imports(c.source)]
        cells = [(student.get(grade_id(c), c.source), grade_id(c)) for c in nb.cells  # only what the tests use
                 if is_answer_cell(c) and c.cell_type == "code" and grade_id(c) in {"masked_softmax", *student}]
        sources = [(c.source, grade_id(c)) for c in nb.cells if is_test_cell(c) and grade_id(c).startswith(tests)]
    else:
        imports = ["import torch\nfrom torch import nn\nfrom torch.nn import functional as F"]
        cells, sources = [(student, "answer")], [(source, f"t{i}") for i, source in enumerate(tests)]
    return imports, [*cells, *[(s, f"extra{i}") for i, s in enumerate(extra)]], sources


def _install(ids):
    """What the grader's `start` does first in a kernel (once per process), for the tests of every case in `ids`."""
    from attncourse.grading.protocol import remote, witness
    paths = set()
    for case in ids:
        imports, _, sources = _parts(case)
        paths.update(remote.Session(remote.serve_here, imports).watched_paths(s for s, _ in sources))
    witness.install(KEY, sorted(paths))


def _grade(case):
    from attncourse.grading.protocol import probe, remote, trusted
    imports, cells, sources = _parts(case)
    namespace = {"__builtins__": __builtins__, "__name__": "__main__"}
    probe._user_ns = lambda: namespace
    for source in imports:
        exec(source, namespace)
    for source, name in cells:
        exec(compile(source, name, "exec"), namespace)
    session = remote.Session(remote.serve_here, imports)
    session.watched_paths(s for s, _ in sources)
    session.witness_key, session.witness_count = KEY, COUNT[0]  # one witness for the cases of this process
    grader = trusted.base_namespace(imports)
    found = {}
    for source, name in sources:
        verdict = trusted.run_test_cell(source, name, grader, session)
        found[name] = [verdict.passed, verdict.message]
    COUNT[0] = session.witness_count
    return {"tests": found, "tampered": session.tampered}


if __name__ == "__main__":
    _install(sys.argv[1:])
    print(json.dumps({case: _grade(case) for case in sys.argv[1:]}, ensure_ascii=False))
