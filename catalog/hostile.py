"""The hostile class: whole submissions that cheat, crash, flood or attack the grader, and honest controls.

Each case is a student folder built from the student version of an assignment: an answer to start from
(`base`: the reference answer, the lecturer's code, or the untouched student version), code put in front of
solution cells (`before`), solution cells replaced (`replace`), new cells at the end (`after`, they run after every test),
and changes to the folder (`folder`).
`expect` is what grading must produce:
- `status`: "graded" or "failed" (no score, only a reason);
- `score`: the autograded points the tests award, "full" or a number (absent: not checked). A flagged
  submission earns them but they are held back until a person has reviewed it;
- `lost`: the exact test cells that lose points (when given);
- `flags`: words that must appear in the review column (`[]`: no flag at all). Inside the sandbox, only what
  could reach the grader's machinery or verdicts is held (see grading/run/flags.py); files, processes and
  bombs are contained by the sandbox and hold nothing, but a process still running during a test that forbids
  something could make the forbidden call unwatched and holds the submission (witness.py); what shows intent
  but cannot change a verdict is a note;
- `reason` / `notes`: words that must appear there;
- `may_crash`: the student's code may also kill its own kernel (two threads writing one zmq socket at once can
  crash the process, as libzmq's sockets are not thread-safe): "failed" with 内核崩溃 is then right too;
- `feedback`: "published";
- `secret`: "absent": the grader's secret (an environment variable of the grading run) and the keyring secret
  appear nowhere in the autograded notebook or the feedback.
`tests/test_hostile.py` grades the class with `course grade --class` in a sandbox and checks every case,
the controls in between, the gradebook, the feedback and what is left running afterwards.
Bombs are bounded: each is stopped by a limit of the sandbox well before it could harm the machine.
"""
import json
import os
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell

from attncourse.grading.authoring.variants import answered, load_catalog, source_notebook
from attncourse.grading.cells import is_test_cell

A1, A2 = "a1_scoring", "a2_multihead"
HONEST = {"status": "graded", "score": "full", "flags": []}
BLANK = {"status": "graded", "score": 0}

TRANSFORMER = '''import ast
class _Wrap(ast.NodeTransformer):
    def visit_Module(self, node):
        handler = ast.ExceptHandler(type=None, name=None, body=[ast.Pass()])
        return ast.fix_missing_locations(ast.Module(body=[ast.Try(body=node.body, handlers=[handler], orelse=[],
                                                                   finalbody=[])], type_ignores=[]))
get_ipython().ast_transformers.append(_Wrap())
'''
SUCCESS = '''from IPython.core.interactiveshell import ExecutionResult
ExecutionResult.success = property(lambda self: True)
'''
SETATTR_ALIAS = '''t = torch
setattr(t, "allclose", lambda *args, **kwargs: True)
setattr(t.testing, "assert_close", lambda *args, **kwargs: None)
'''
VARS = '''vars(torch)["allclose"] = lambda *args, **kwargs: True
vars(torch)["equal"] = lambda *args, **kwargs: True
'''
EXEC_B64 = '''import base64
exec(base64.b64decode("dG9yY2guYWxsY2xvc2UgPSBsYW1iZGEgKmEsICoqazogVHJ1ZQ==").decode())
'''
HELPER_MODULE = '''with open("helper.py", "w") as f:
    f.write("import torch\\ntorch.allclose = lambda *a, **k: True\\n")
import helper
'''
LYING_TENSOR = '''class AlwaysRight(torch.Tensor):
    def __eq__(self, other):
        return torch.ones_like(torch.Tensor(self), dtype=torch.bool)
    def allclose(self, *args, **kwargs):
        return True

def masked_softmax(X, valid_lens):
    return torch.zeros_like(X).as_subclass(AlwaysRight)
'''
DETECT = '''import os
if os.environ.get("NBGRADER_EXECUTION"):
    torch.allclose = lambda *args, **kwargs: True
'''
CUSTOM_EXC = '''get_ipython().set_custom_exc((Exception,), lambda shell, etype, value, tb, tb_offset=None: None)
'''
INPUT_TRANSFORMER = '''get_ipython().input_transformers_cleanup.append(lambda lines: [])
'''
READ_SOURCE = '''import glob
for path in glob.glob("/**/source/*/*.ipynb", recursive=True) + glob.glob("../../source/*/*.ipynb"):
    print(open(path).read())
'''
SOLUTIONS_FROM_SOURCE = '''import json
for path in ("../../../source/a1_scoring/scoring.ipynb", "/work/main/source/a1_scoring/scoring.ipynb"):
    try:
        cells = json.load(open(path))["cells"]
    except OSError:
        continue
    for cell in cells:
        if "BEGIN SOLUTION" in "".join(cell["source"]):
            exec("".join(cell["source"]))
'''
GRADEBOOK = '''import glob, sqlite3
for path in glob.glob("/**/gradebook.db", recursive=True) + ["../../gradebook.db", "../../../gradebook.db"]:
    try:
        db = sqlite3.connect(path)
        db.execute("UPDATE grade SET manual_score = 99")
        db.execute("UPDATE source_cell SET source = 'pass'")
        db.execute("BEGIN EXCLUSIVE")
        print("opened", path)
    except sqlite3.Error:
        pass
'''
KILL_EVERYTHING = '''import os, signal
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
'''
SABOTAGE_FILES = '''import shutil
for path in ("../../autograded", "../../feedback", "../../../autograded", "/work/main/autograded", "../../submitted"):
    shutil.rmtree(path, ignore_errors=True)
for path in ("../../submitted/c01_honest/a1_scoring/scoring.ipynb",):
    try:
        open(path, "w").write("{}")
    except OSError:
        pass
'''
DETACHED = '''import subprocess
subprocess.Popen(["/bin/sh", "-c", "sleep 8; for f in /*/*/build/grades.csv ../../build/grades.csv; do "
                  "echo a1_scoring,c01_honest,graded,0,20 >> $f; done"], start_new_session=True)
'''
MEMORY_BOMB = '''try:
    hog = torch.empty(12 << 30, dtype=torch.uint8)
    hog.fill_(1)
except RuntimeError as exc:
    print("内存不足：", str(exc)[:60])
'''
FORK_BOMB = '''import os, time
children = 0
try:
    for _ in range(400):
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
        children += 1
except OSError as exc:
    print("fork 失败：", exc)
print(children, "个子进程")
'''
DISK_BOMB = '''try:
    with open("/tmp/filler", "wb") as f:
        for _ in range(1024):
            f.write(b"x" * (1 << 20))
except OSError as exc:
    print("写入失败：", exc)
'''
FLOOD = '''print("x" * 100_000_000)
'''
SCRIPT_OUTPUT = '''from IPython.display import HTML, Javascript, display
display(HTML("<b>hi</b><script>alert(1)</script><img src=x onerror=alert(2)>"))
display(Javascript("alert(3)"))
'''
SPY_ON_GRADER = '''import attncourse.grading.protocol.probe as _probe
_seen = []
_original = _probe._define
def _spy(source, *args):
    _seen.append(source)
    return _original(source, *args)
_probe._define = _spy
'''
PRINT_SPIED = '''print("\\n\\n".join(_seen))
'''
CRASH = '''import os
os._exit(1)
'''
HANG = '''import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
'''
LOGGING = '''import logging
import warnings
logging.warning("调试：开始实现 masked_softmax")
warnings.warn("这只是一条提醒")
print("进度：第 1 题")
'''
MENTIONS = '''# 完成后运行 nbgrader validate scoring.ipynb 自查；注释里提到 gradebook、os.system 都不算
note = "import os; exec('...')"
'''
GETATTR_HONEST = '''def first_weight(module):
    return getattr(module, "W_q").weight
'''
SET_DEVICE = '''import os
os.environ["ATTN_COURSE_DEVICE"] = "cuda:7"  # 测试用哪个设备由评分机器决定，不由学生的内核决定
'''

# --- a second round (issue: sandbox): each attack class with several payloads ------------------------------------
SOCKET_LINKS = '''import glob, os
for path in glob.glob("/home/student/.kernel-*"):  # the kernel's own sockets: point them elsewhere
    os.unlink(path)
    os.symlink({target!r}, path)
'''
SOCKET_FILES = '''import glob, os
for path in glob.glob("/home/student/.kernel-*"):
    os.rename(path, path + ".old")
    open(path, "w").write("not a socket")
os.chmod("/home/student", 0)
'''
PRINT_FOREVER = '''import threading, time
def _chatter():
    while True:
        print("刷屏" * 200)
threading.Thread(target=_chatter, daemon=True).start()
time.sleep(0.5)
'''
HUGE_REPLY = '''def masked_softmax(X, valid_lens):
    return torch.zeros(1 << 25)  # 128 MB: more than a reply may carry
'''
NESTED_REPLY = '''def masked_softmax(X, valid_lens):
    deep = []
    for _ in range(5000):
        deep = [deep]
    return deep
'''
READ_ENVIRONMENT = '''import os
print(dict(os.environ))
for path in ("/proc/self/environ", "/proc/1/environ"):
    try:
        print(open(path, "rb").read())
    except OSError as exc:
        print(path, exc)
'''
KEYRING_WRITE = '''import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("add_key", libc.syscall(248, b"user", b"answers", b"keyring-secret-1234", 19, -4), ctypes.get_errno())
'''
KEYRING_READ = '''import ctypes
libc = ctypes.CDLL(None, use_errno=True)
buffer = ctypes.create_string_buffer(4096)
key = libc.syscall(250, 10, b"user", b"answers", 0)  # keyctl(KEYCTL_SEARCH) in the user keyring
print("search", key, ctypes.get_errno(), libc.syscall(250, 11, key, buffer, 4096), buffer.raw[:40])
'''
REBIND_NAMES = '''import matplotlib.pyplot as plt
F = plt.figure()  # 一个图叫 F，后面的题目用不到 torch.nn.functional
max = min = any = all = None
'''
NESTED_FROM_PROBE = '''import attncourse.grading.protocol.probe as _probe
_probe.Reply.__init__ = lambda self, payload: setattr(self, "text", "[" * 100000 + "]" * 100000)
'''
THROUGH_ATTRIBUTES = '''_spied = d2l.sys.modules["attncourse.grading.protocol.probe"]
_spied.op_forbidden = lambda: {"$dict": {}}
'''
FORGED_LINE = '''def masked_softmax(X, valid_lens):
    raise ValueError("\\x1b[2K\\r" + "a1_scoring     c01_honest         ✔ 20/20  (0.1 s)")
'''
CHATTY = '''def masked_softmax(X, valid_lens):
    print("调试" * 500_000)  # about 3 MB on every call, while the grader waits for the reply
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    mask = torch.arange(X.shape[-1], device=X.device) < valid_lens[..., None]
    return F.softmax(X.masked_fill(~mask, torch.finfo(X.dtype).min), dim=-1)
'''
LONG_MESSAGE = '''def masked_softmax(X, valid_lens):
    raise ValueError("长" * 5_000_000)
'''
LONG_ERROR_CELL = 'raise ValueError("长" * 5_000_000)  # 15 MB of message, in a cell of its own\n'
DISPLAY_FLOOD = """from IPython.display import HTML, display
for _ in range(3000):
    display(HTML("<b>" + "刷" * 1000 + "</b>"))
"""
LONG_SOURCE = "# " + "数据" * 1_000_000 + "\n"  # 6 MB of source: a page shows only the start of it
HUGE_FROM_PROBE = '''import attncourse.grading.protocol.probe as _probe
class _Huge:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {_probe.MIME: "x" * (100 << 20)}
_probe.serve = lambda request: _Huge()
'''
CLOSE_PROBE_SOCKET = '''import attncourse.grading.protocol.probe as _probe
_probe._socket.close()  # the socket the grader's requests come through
'''
KEEP_REFERENCE = '''_kept = []
def masked_softmax(X, valid_lens):
    if _kept:  # the grader's reference, kept while it tested a later question
        return _kept[0](X, valid_lens)
    raise NotImplementedError
'''
KEEP_REFERENCE_ADDITIVE = '''class AdditiveAttention(nn.Module):
    def __init__(self, key_size, query_size, num_hiddens, dropout, **kwargs):
        super().__init__(**kwargs)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
        if not _kept:
            _kept.append(masked_softmax)  # during this test the name is the grader's reference
        features = torch.tanh(self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1))
        self.attention_weights = masked_softmax(self.w_v(features).squeeze(-1), valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)
'''

# Forbidden shortcuts on paths a watch inside the kernel used to miss, and the watch switched off (witness.py):
# each question loses its points, or the submission is held for review.
POOL = """from concurrent.futures import ThreadPoolExecutor
_pool = ThreadPoolExecutor(2)
_pool.submit(print, "线程池已启动").result()  # started long before the hidden tests run
"""
SDPA_ANSWER = """class DotProductAttention(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.p = dropout
    def forward(self, queries, keys, values, valid_lens=None):
        self.attention_weights = masked_softmax(queries @ keys.transpose(1, 2) / queries.shape[-1] ** 0.5, valid_lens)
        return {output}
"""
TRACED = """_x = torch.randn(2, 3, 4)
_traced = torch.jit.trace(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), (_x, _x, _x))
"""
FUNCTIONAL_CORE = """_forward = d2l.DotProductAttention.forward
def _through_the_core(self, *args, **kwargs):
    _x = torch.ones(1, 1, 4)  # the functional core behind nn.MultiheadAttention
    F.multi_head_attention_forward(_x, _x, _x, 4, 2, torch.eye(4).repeat(3, 1), None, None, None, False, 0.0,
                                   torch.eye(4), None, need_weights=True)
    return _forward(self, *args, **kwargs)
d2l.DotProductAttention.forward = _through_the_core
"""
SHORTCUT = "    return d2l.masked_softmax(X, valid_lens)\n"
PROFILE_OFF = """def masked_softmax(X, valid_lens):
    getattr(__import__("s" + "ys"), "set" + "profile")(None)  # the old watch's profile function, switched off
""" + SHORTCUT
GC_RECORDS = """def masked_softmax(X, valid_lens):
    for _obj in getattr(__import__("g" + "c"), "get_" + "objects")():  # looking for the watch's records
        if type(_obj) is dict and "USED" in _obj:
            _obj["USED"] = {}
""" + SHORTCUT
FRAME_RECORDS = """def masked_softmax(X, valid_lens):
    try:
        raise ValueError
    except ValueError as _e:
        _frame = _e.__traceback__.tb_frame
    while _frame is not None and "OP" + "S" not in _frame.f_globals:  # up to the probe's frames
        _frame = _frame.f_back
    if _frame is not None:
        _frame.f_globals["OP" + "S"]["wit" + "ness"] = lambda text, mac: []  # no more reports
""" + SHORTCUT
PROBE_REPLACED = """_probe = __import__("importlib").import_module("attncourse.grading." + "protocol.probe")
getattr(_probe, "OP" + "S")["wit" + "ness"] = lambda text, mac: ["(1, 1, [], [])", "0" * 64]  # a forged report
"""
THREAD_PROFILE_OFF = """getattr(__import__("thr" + "eading"), "set" + "profile")(None)  # later threads unprofiled
""" + POOL + """def masked_softmax(X, valid_lens):
    return _pool.submit(d2l.masked_softmax, X, valid_lens).result()
"""
RAW_THREAD = """import _thread
def masked_softmax(X, valid_lens):
    out, done = [], _thread.allocate_lock()
    done.acquire()
    _thread.start_new_thread(lambda: (out.append(d2l.masked_softmax(X, valid_lens)), done.release()), ())
    done.acquire()
    return out[0]
"""
CODE_SWAPPED = """def _own(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(X.shape[0], X.shape[1])
    keep = torch.arange(X.shape[-1], device=X.device) < valid_lens[..., None]
    return torch.softmax(X.float().masked_fill(~keep, float("-inf")), dim=-1).to(X.dtype)
d2l.masked_softmax.__code__ = _own.__code__  # d2l's function, the watch's report gone with its code
masked_softmax = d2l.masked_softmax
"""
FORK_SERVER = """import os, pickle
_ask_r, _ask_w = os.pipe()
_answer_r, _answer_w = os.pipe()
if os.fork() == 0:  # a forked server (multiprocessing's pools need semaphores the sandbox lacks): it inherits
    try:            # the watch, whose reports stay in it
        torch.set_num_threads(1)
        _ask, _answer = os.fdopen(_ask_r, "rb"), os.fdopen(_answer_w, "wb")
        while True:
            pickle.dump(F.scaled_dot_product_attention(*pickle.load(_ask)), _answer)
            _answer.flush()
    finally:
        os._exit(0)
_ask, _answer = os.fdopen(_ask_w, "wb"), os.fdopen(_answer_r, "rb")
def _far(*args):
    pickle.dump(args, _ask)
    _ask.flush()
    return pickle.load(_answer)
"""
MODE_OFF = "[torch._C._pop_torch_function_stack() for _ in range(torch._C._len_torch_function_stack())]" \
           " and None or F.scaled_dot_product_attention(queries, keys, values)"
# Writing to the kernel's own sockets (grading/run/execution.py, protocol/remote.py CheckedChannel): what the grader
# cannot read is dropped and counted against the running cell, the submission is held, grading goes on.
IOPUB_WRITER = """import threading
from ipykernel.kernelapp import IPKernelApp
_kernel = IPKernelApp.instance().kernel
_raw, _parent = _kernel.iopub_thread.socket, _kernel.get_parent()  # the socket the kernel's IOPub thread writes to
def _write():
    for _ in range(3000):  # while the cell prints: the frames of both writers interleave
        _kernel.session.send(_raw, "stream", {"name": "stdout", "text": "抢写\\n"}, parent=_parent)
        _raw.send_multipart([b"stream", b"<IDS|MSG>", b"0" * 64, b"{}", b"{}", b"{}", b"{}"])
_writer = threading.Thread(target=_write)
_writer.start()
for _ in range(3000):
    print("同时打印", flush=True)
_writer.join()
"""
EVERY_CHANNEL = """from ipykernel.kernelapp import IPKernelApp
_kernel = IPKernelApp.instance().kernel
_session, _parent = _kernel.session, _kernel.get_parent()
_grader = _parent["header"]["session"].encode()  # the identity of the grader's sockets
def _signed(msg_type, content, parent_part=None):  # signed with the kernel's key, but not what nbclient reads
    msg = _session.msg(msg_type, content, parent=_parent)
    parts = [_session.pack(msg["header"]), parent_part or _session.pack(msg["parent_header"]), b"{}",
             _session.pack(content)]
    return [b"<IDS|MSG>", _session.sign(parts), *parts]
_junk = [[b"garbage"], [b"<IDS|MSG>", b"", b"{}", b"{}", b"{}", b"{}"], [b"<IDS|MSG>", b"0" * 64, b"{}", b"{}", b"{}", b"{}"],
         [b"<IDS|MSG>", b"1" * 64, b"{not json"]]
_replayed = _signed("stream", {"name": "stdout", "text": "重放\\n"})
_iopub = _junk + [_signed("stream", {"text": 1}), _signed("status", {}), _signed("stream", {}, parent_part=b"[]"),
                  _replayed, _replayed]
_shell = _junk + [_signed("execute_reply", {"no": "status"})]
_pub = _kernel.iopub_thread
for _frames in _iopub:  # sent by the IOPub thread itself
    _pub.schedule(lambda frames=_frames: _pub.socket.send_multipart([b"stream", *frames]))
for _stream in (_kernel.shell_stream, _kernel.control_stream):  # by each socket's own thread
    for _frames in _shell:
        _stream.io_loop.add_callback(_stream.send_multipart, [_grader, *_frames])
for _frames in _shell:
    _kernel.stdin_socket.send_multipart([_grader, *_frames])
"""
PROBE_JUNK = """import attncourse.grading.protocol.probe as _probe
_answer = _probe._answer
def _junk_first(kernel, socket, frames):  # the grader's socket gets frames that are no reply before each reply
    socket.send_multipart([frames[0], b"junk"])
    socket.send_multipart([frames[0], frames[1], b"\\xff{not json"])
    return _answer(kernel, socket, frames)
_probe._answer = _junk_first
"""
UNREADABLE = "无法读取或缺失"
LOST_DOT = {"status": "graded", "lost": {"test_dot_product_attention", "test_dot_product_sdpa"}}
LOST_MASKED = {"status": "graded", "lost": {"test_masked_softmax_basic", "test_masked_softmax_2d"}}
HELD_WATCH = {"status": "graded", "flags": ["禁止函数的监视"]}


def _case(id, what, expect, assignment=A1, base="reference", before=None, replace=None, after=(), folder=None):
    return {"id": id, "what": what, "assignment": assignment, "base": base, "before": before or {},
            "replace": replace or {}, "after": list(after), "folder": folder, "expect": expect}


CASES = [
    _case("c01_honest", "对照：参考答案", HONEST),
    _case("h02_ast_transformer", "空白作业 + 把之后的单元格包进 try/except 的 AST 变换器",
          {**BLANK, "flags": ["get_ipython"]}, base="untouched", before={"masked_softmax": TRANSFORMER}),
    _case("h03_execution_result", "空白作业 + 把 ExecutionResult.success 改成永远为真",
          {**BLANK, "flags": ["IPython"]}, base="untouched", before={"masked_softmax": SUCCESS}),
    _case("h04_setattr_alias", "空白作业 + 通过别名 setattr 篡改 torch.allclose",
          {**BLANK, "flags": [], "notes": ["改写了 torch.allclose"]}, base="untouched",
          before={"masked_softmax": SETATTR_ALIAS}),
    _case("c05_honest_lecturer", "对照：讲师的代码", HONEST, base="lecturer"),
    _case("h06_vars_torch", "空白作业 + vars(torch)[...] 篡改比较函数",
          {**BLANK, "flags": [], "notes": ["vars"]}, base="untouched", before={"masked_softmax": VARS}),
    _case("h07_exec_base64", "空白作业 + exec 执行 base64 编码的篡改代码",
          {**BLANK, "flags": ["exec"]}, base="untouched", before={"masked_softmax": EXEC_B64}),
    _case("h08_helper_module", "空白作业 + 写到磁盘上的辅助模块篡改 torch",
          {**BLANK, "flags": ["helper"]}, base="untouched", before={"masked_softmax": HELPER_MODULE}),
    _case("c09_honest_logging", "对照：参考答案，带 logging.warning、warnings.warn 与 print",
          HONEST, before={"masked_softmax": LOGGING}),
    _case("h10_lying_tensor", "比较时永远相等的 Tensor 子类冒充 masked_softmax 的结果",
          {"status": "graded", "lost": {"test_masked_softmax_basic", "test_masked_softmax_2d"}, "flags": [],
           "notes": ["Tensor"]}, replace={"masked_softmax": LYING_TENSOR}),
    _case("h11_detect_grading", "检测 NBGRADER_EXECUTION，评分时才篡改",
          {**BLANK, "flags": [], "notes": ["NBGRADER_EXECUTION"]}, base="untouched",
          before={"masked_softmax": DETECT}),
    _case("h12_custom_exc", "空白作业 + set_custom_exc 吞掉所有异常",
          {**BLANK, "flags": ["get_ipython"]}, base="untouched", before={"masked_softmax": CUSTOM_EXC}),
    _case("c13_honest_mentions", "对照：注释和字符串里提到 nbgrader validate、os.system，用 getattr 读 W_q",
          HONEST, before={"masked_softmax": MENTIONS, "additive_attention": GETATTR_HONEST}),
    _case("h14_input_transformer", "空白作业 + 清空之后所有单元格的输入变换器",
          {**BLANK, "flags": ["get_ipython"]}, base="untouched", before={"masked_softmax": INPUT_TRANSFORMER}),
    _case("h15_solutions_from_source", "从 source/ 读取并执行讲师的参考答案",
          {**BLANK, "flags": ["exec"]}, base="untouched", before={"masked_softmax": SOLUTIONS_FROM_SOURCE}),
    _case("h16_gradebook", "改写 gradebook.db：自己的人工分改成满分、测试改成 pass、锁住数据库",
          {**BLANK, "flags": []}, base="untouched", before={"masked_softmax": GRADEBOOK}),
    _case("c17_honest", "对照：参考答案", HONEST),
    _case("h18_kill_everything", "杀死能看到的所有进程（预加载进程、其他学生的内核）",
          {"status": "graded", "score": "full", "flags": []}, before={"masked_softmax": KILL_EVERYTHING}),
    _case("h19_sabotage_files", "删除 autograded/、feedback/，改写同学的提交",
          {"status": "graded", "score": "full", "flags": []}, before={"masked_softmax": SABOTAGE_FILES}),
    _case("h20_detached_process", "启动脱离的进程，在评分结束后往 grades.csv 写伪造的成绩（测试时它还在运行：需复核）",
          {"status": "graded", "score": "full", "flags": ["禁止函数的监视"]}, before={"masked_softmax": DETACHED}),
    _case("c21_honest_a2", "对照：作业 2 的参考答案", HONEST, assignment=A2),
    _case("h22_memory_bomb", "申请 12 GiB 内存", {"status": "graded", "score": "full", "flags": []},
          after=[MEMORY_BOMB]),
    _case("h23_fork_bomb", "有上限的 fork 炸弹（最多 400 个子进程）",
          {"status": "graded", "score": "full", "flags": []}, after=[FORK_BOMB]),
    _case("h24_disk_bomb", "往 /tmp 写 1 GiB", {"status": "graded", "score": "full", "flags": []},
          after=[DISK_BOMB]),
    _case("h25_flood", "打印 100 MB 的输出", {"status": "graded", "score": "full", "flags": [], "feedback": "published"},
          after=[FLOOD]),
    _case("c26_honest", "对照：参考答案", HONEST),
    _case("h27_script_output", "输出中带 <script>、onerror 与 JavaScript",
          {"status": "graded", "score": "full", "flags": [], "feedback": "published"}, after=[SCRIPT_OUTPUT]),
    _case("h28_spy_on_grader", "偷看评分程序送进内核的参考实现，最后打印出来：反馈只显示学生自己运行的输出，看不到",
          {"status": "graded", "flags": ["attncourse.grading"], "feedback": "published"},
          before={"masked_softmax": SPY_ON_GRADER}, after=[PRINT_SPIED]),
    _case("h29_read_source", "打印 source/ 中的隐藏测试", {**BLANK, "flags": [], "feedback": "published"},
          base="untouched", before={"masked_softmax": READ_SOURCE}),
    _case("h30_symlink", "提交目录里放指向 source/ 的符号链接",
          {"status": "failed", "reason": "符号链接"}, folder="symlink"),
    _case("c31_honest", "对照：参考答案", HONEST),
    _case("h32_crash", "调用 os._exit 使内核退出", {"status": "failed", "reason": "内核崩溃"},
          before={"additive_attention": CRASH}),
    _case("h33_hang", "忽略 Ctrl-C 的死循环", {"status": "failed", "reason": "无限循环"},
          before={"additive_attention": HANG}),
    _case("e34_backup_notebook", "旁边多了一个损坏的备份 notebook",
          {**HONEST, "notes": ["忽略了多余的 notebook"]}, folder="broken_backup"),
    _case("e35_renamed", "notebook 被改名为 scoring (1).ipynb", {**HONEST, "notes": ["scoring (1).ipynb"]},
          folder="renamed"),
    _case("c36_honest_a2", "对照：作业 2 的讲师代码", HONEST, assignment=A2, base="lecturer"),
    _case("e37_pasted_test", "复制粘贴了一个测试单元格", HONEST, folder="pasted_test"),
    _case("e38_tests_as_answers", "测试单元格被改成了答案单元格", {**HONEST, "notes": ["恢复了"]}, folder="tests_as_answers"),
    _case("e39_edited_tests", "空白作业，把测试单元格改成了 pass", BLANK, base="untouched", folder="edited_tests"),
    _case("e40_unsafe_id", "学生编号含 '*' 和中文", {"status": "failed", "reason": "学生编号"}, folder="unsafe_id"),
    _case("f41_forbidden_alias", "masked_softmax = d2l.masked_softmax",
          {"status": "graded", "lost": {"test_masked_softmax_basic", "test_masked_softmax_2d"}, "flags": []},
          replace={"masked_softmax": "masked_softmax = d2l.masked_softmax\n"}),
    _case("f42_forbidden_sdpa", "DotProductAttention 调用 F.scaled_dot_product_attention",
          {"status": "graded", "lost": {"test_dot_product_attention", "test_dot_product_sdpa"}, "flags": []},
          replace={"dot_product_attention": "class DotProductAttention(nn.Module):\n"
                 "    def __init__(self, dropout):\n        super().__init__()\n        self.p = dropout\n"
                 "    def forward(self, queries, keys, values, valid_lens=None):\n"
                 "        self.attention_weights = masked_softmax(queries @ keys.transpose(1, 2)"
                 " / queries.shape[-1] ** 0.5, valid_lens)\n"
                 "        return F.scaled_dot_product_attention(queries, keys, values)\n"}),
    _case("h43_device", "在内核里把 ATTN_COURSE_DEVICE 设成不存在的 GPU", {"status": "graded", "score": "full",
          "flags": []}, before={"masked_softmax": SET_DEVICE}),
    _case("c44_honest", "对照：参考答案", HONEST),
    _case("s45_socket_links", "把内核自己的套接字换成指向评分机上别的套接字的符号链接", {"status": "graded", "score": "full"},
          before={"masked_softmax": SOCKET_LINKS.format(target="/tmp/attncourse-zygote/socket")}),
    _case("c46_honest", "对照：参考答案（与破坏者同时评分）", HONEST),
    _case("s47_socket_links_proc", "套接字换成指向 /proc/1/root 与 /etc/passwd 的链接", {"status": "graded",
          "score": "full"}, before={"masked_softmax": SOCKET_LINKS.format(target="/proc/1/root/etc/passwd")}),
    _case("s48_socket_files", "套接字改名、换成普通文件，家目录权限改成 0", {"status": "graded", "score": "full"},
          before={"masked_softmax": SOCKET_FILES}),
    _case("c49_honest_rebinds", "对照：最后把图命名为 F，覆盖 max、any 等内置名", HONEST, after=[REBIND_NAMES]),
    _case("s50_print_forever", "后台线程不停打印（评分程序读取输出不能被拖住）", {"status": "graded", "flags": []},
          before={"masked_softmax": PRINT_FOREVER}),
    _case("s51_huge_reply", "返回 128 MB 的张量", {"status": "graded", "flags": [],
          "lost": {"test_masked_softmax_basic", "test_masked_softmax_2d"}}, replace={"masked_softmax": HUGE_REPLY}),
    _case("s52_nested_reply", "返回嵌套 5000 层的列表", {"status": "graded", "flags": [],
          "lost": {"test_masked_softmax_basic", "test_masked_softmax_2d"}}, replace={"masked_softmax": NESTED_REPLY}),
    _case("s53_read_environment", "打印环境变量与 /proc/*/environ（找评分机的秘密）", {**HONEST, "secret": "absent"},
          after=[READ_ENVIRONMENT]),
    _case("s54_keyring_write", "往内核密钥环里写答案", {"status": "graded", "score": "full", "flags": ["ctypes"]},
          after=[KEYRING_WRITE]),
    _case("s55_keyring_read", "从内核密钥环里读别人写的答案", {"status": "graded", "score": "full", "flags": ["ctypes"],
          "secret": "absent"}, after=[KEYRING_READ]),
    _case("s56_nested_from_probe", "篡改探针，让评分程序解析嵌套十万层的 JSON", {"status": "graded",
          "flags": ["attncourse.grading", "协议不允许"]}, before={"masked_softmax": NESTED_FROM_PROBE}),
    _case("s57_through_attributes", "通过 d2l.sys.modules 找到探针并关掉禁止函数的检查", {"status": "graded",
          "flags": ["sys.modules"]}, before={"masked_softmax": THROUGH_ATTRIBUTES}),
    _case("s58_forged_line", "异常信息里用终端转义伪造一行“✔ 20/20”", {"status": "graded", "flags": [],
          "lost": {"test_masked_softmax_basic", "test_masked_softmax_2d"}}, replace={"masked_softmax": FORGED_LINE}),
    _case("s59_keep_reference", "把测试移到后面，保存评分程序换进来的参考实现来作答", {"status": "graded", "flags": [],
          "lost": {"test_masked_softmax_basic", "test_masked_softmax_2d"}, "notes": ["发布时的顺序"]},
          replace={"masked_softmax": KEEP_REFERENCE, "additive_attention": KEEP_REFERENCE_ADDITIVE},
          folder="tests_moved"),
    _case("c60_honest", "对照：参考答案", HONEST),
    _case("s61_huge_from_probe", "篡改探针，发来 100 MB 的回复", {"status": "failed", "reason": "内核"},
          before={"masked_softmax": HUGE_FROM_PROBE}),
    _case("c62_honest", "对照：参考答案（与上面的同时评分）", HONEST),
    _case("s63_keep_reference_deleted", "删掉 masked_softmax 的测试（被放回原处），保存参考实现来作答",
          {"status": "graded", "flags": [], "lost": {"test_masked_softmax_basic", "test_masked_softmax_2d"}},
          replace={"masked_softmax": KEEP_REFERENCE, "additive_attention": KEEP_REFERENCE_ADDITIVE},
          folder="tests_deleted"),
    _case("s64_chatty", "每次被调用都打印 3 MB", {"status": "graded", "score": "full", "flags": []},
          replace={"masked_softmax": CHATTY}),
    _case("s65_long_message", "异常信息长达 500 万字", {"status": "graded", "flags": [], "feedback": "published",
          "lost": {"test_masked_softmax_basic", "test_masked_softmax_2d"}}, replace={"masked_softmax": LONG_MESSAGE}),
    _case("s66_close_probe_socket", "关掉评分程序发请求用的 socket", {"status": "failed", "reason": "连接中断"},
          before={"masked_softmax": CLOSE_PROBE_SOCKET}),
    _case("w67_pool_sdpa", "在早先启动的线程池里调用 F.scaled_dot_product_attention", LOST_DOT,
          replace={"dot_product_attention": POOL + SDPA_ANSWER.format(
              output="_pool.submit(F.scaled_dot_product_attention, queries, keys, values).result()")}),
    _case("w68_pool_d2l", "在早先启动的线程池里调用 d2l.masked_softmax", LOST_MASKED,
          replace={"masked_softmax": POOL + "def masked_softmax(X, valid_lens):\n"
                                            "    return _pool.submit(d2l.masked_softmax, X, valid_lens).result()\n"}),
    _case("w69_torchscript", "通过 TorchScript（torch.jit.trace）调用 F.scaled_dot_product_attention", LOST_DOT,
          replace={"dot_product_attention": TRACED + SDPA_ANSWER.format(output="_traced(queries, keys, values)")}),
    _case("w70_functional_core", "多头注意力里经过 F.multi_head_attention_forward（nn.MultiheadAttention 的函数核心）",
          {"status": "graded", "lost": {"test_mha_shapes", "test_mha_vs_torch", "test_mha_valid_lens", "test_mha_kv_sizes",
                                        "test_mha_param_count"}},
          assignment=A2, before={"multihead_attention": FUNCTIONAL_CORE}),
    _case("w71_mode_off", "弹出 torch 的函数模式栈后调用 F.scaled_dot_product_attention", LOST_DOT,
          replace={"dot_product_attention": SDPA_ANSWER.format(output=MODE_OFF)}),
    _case("c72_honest", "对照：参考答案（与下面关掉监视的提交同时评分）", HONEST),
    _case("w73_profile_off", "运行时拼出 sys.setprofile 的名字，关掉 profile 函数后调用 d2l.masked_softmax", LOST_MASKED,
          replace={"masked_softmax": PROFILE_OFF}),
    _case("w74_gc_records", "经 gc 找到监视的记录并清空", HELD_WATCH, replace={"masked_softmax": GC_RECORDS}),
    _case("w75_frame_records", "从异常的帧一路找到探针，让它不再报告", HELD_WATCH, replace={"masked_softmax": FRAME_RECORDS}),
    _case("w76_forged_report", "换掉探针的监视请求，送回伪造的报告", HELD_WATCH,
          before={"masked_softmax": PROBE_REPLACED}, replace={"masked_softmax": "masked_softmax = d2l.masked_softmax\n"}),
    _case("w77_thread_profile_off", "关掉之后线程的 profile 函数，在线程池里调用 d2l.masked_softmax", LOST_MASKED,
          replace={"masked_softmax": THREAD_PROFILE_OFF}),
    _case("s78_huge_pages", "6 MB 的源码、15 MB 的异常信息、刷屏的 display()：每个发布的页面都有上限",
          {"status": "graded", "score": "full", "flags": [], "feedback": "published"},
          after=[LONG_SOURCE, LONG_ERROR_CELL, DISPLAY_FLOOD]),
    _case("w80_raw_thread", "用 _thread 直接起一个短命线程调用 d2l.masked_softmax（threading 不知道它）", LOST_MASKED,
          replace={"masked_softmax": RAW_THREAD}),
    _case("w81_code_swapped", "把自己的实现换进 d2l.masked_softmax 的 __code__，再用它作答", HELD_WATCH,
          replace={"masked_softmax": CODE_SWAPPED}),
    _case("w79_fork_server", "在答案单元格里 fork 出的子进程中调用 F.scaled_dot_product_attention", HELD_WATCH,
          replace={"dot_product_attention": FORK_SERVER + SDPA_ANSWER.format(output="_far(queries, keys, values)")}),
    _case("k82_iopub_writer", "线程与内核同时往 IOPub 套接字写消息（帧交错、签名无效）",
          {"status": "graded", "score": "full", "flags": ["ipykernel", UNREADABLE], "may_crash": True},
          before={"masked_softmax": IOPUB_WRITER}),
    _case("c83_honest", "对照：参考答案（与往内核套接字写消息的提交同时评分）", HONEST),
    _case("k84_every_channel", "往 IOPub、shell、control、stdin 发格式错误、未签名、签名无效、重放的消息，和伪造的单元格回复",
          {"status": "graded", "score": "full", "flags": ["ipykernel", UNREADABLE]}, before={"masked_softmax": EVERY_CHANNEL}),
    _case("k85_probe_junk", "在探针的套接字上先发不是回复的帧",
          {"status": "graded", "score": 0, "flags": ["attncourse.grading", "协议不允许"]}, before={"masked_softmax": PROBE_JUNK}),
]


# Identity attacks: uploads whose names claim a classmate's work or invent a student. Whose work a file is is
# decided by `course collect` from the LMS download, before any grading (grading would add nothing), so these
# cases are a download: every attacker's entry (`{me}`: the attacker's own LMS folder `<id>_<name>`,
# `{victim}`: the classmate's `<id>_<name>`), uploaded after the classmate's honest work was collected.
# `expect`: "own" (collected as the attacker's own, with a note naming the claim) or "listed" (not collected,
# listed with why; no student is made from it).
VICTIM = "2026000001_韩梅梅"
IDENTITY = [
    {"id": "2026000070", "what": "在自己的文件夹里上传以同学学号姓名命名的文件", "entry": "{me}/{victim}_scoring.ipynb",
     "expect": "own"},
    {"id": "2026000071", "what": "在自己的文件夹里建一个以同学命名的文件夹", "entry": "{me}/{victim}/scoring.ipynb",
     "expect": "own"},
    {"id": "2026000072", "what": "平铺下载中，LMS 前缀之后写上同学的学号姓名", "entry": "{me}_{victim}_scoring.ipynb",
     "expect": "own"},
    {"id": "2026000073", "what": "用 ../ 从自己的文件夹跳到同学的名下", "entry": "{me}/../{victim}_scoring (1).ipynb",
     "expect": "listed"},
    {"id": "2026000074", "what": "以 ../ 开头的名字造出一名学生", "entry": "../2026000074_幽灵_scoring.ipynb",
     "expect": "listed"},
    {"id": "2026000075", "what": "绝对路径", "entry": "/tmp/{victim}_scoring.ipynb", "expect": "listed"},
    {"id": "2026000076", "what": "Windows 盘符路径", "entry": "C:\\{victim}_scoring.ipynb", "expect": "listed"},
    {"id": "2026000077", "what": "名字里带终端控制字符（伪造一行输出）", "entry": "2026000077_攻\x1b[1A\r✔ 击者_scoring.ipynb",
     "expect": "listed"},
    {"id": "2026000078", "what": "名字里带反转显示方向的字符", "entry": "2026000078_攻击者\u202e_bkpyni.ipynb",
     "expect": "listed"},
    {"id": "2026000079", "what": "超过 255 字节的名字", "entry": "2026000079_" + "长" * 100 + "_scoring.ipynb",
     "expect": "listed"},
]


def identity_entry(case) -> str:
    return case["entry"].format(me=f"{case['id']}_攻击者", victim=VICTIM)


def write_identity_download(path, honest: str) -> Path:
    """The download with the classmate's honest upload and every identity attack (each a notebook whose source
    names its case), as an LMS zip with the names written exactly as given."""
    import zipfile
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo(f"{VICTIM}/scoring.ipynb", (2026, 10, 9, 20, 0, 0)), honest)
        for case in IDENTITY:
            z.writestr(zipfile.ZipInfo(identity_entry(case), (2026, 10, 9, 23, 0, 0)),
                       honest.replace("\"cells\"", f"\"attack\": \"{case['id']}\", \"cells\"", 1))
    return Path(path)

def _notebook(root, case):
    catalog = load_catalog(root, case["assignment"])
    src = source_notebook(root, case["assignment"], catalog)
    rel = nbformat.read(Path(root) / "release" / case["assignment"] / f"{catalog.NOTEBOOK}.ipynb", as_version=4)
    nb = {"reference": lambda: answered(rel, src), "lecturer": lambda: answered(rel, src, catalog.LECTURER),
          "untouched": lambda: rel}[case["base"]]()
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in case["replace"]:
            cell.source = case["replace"][grade_id]
        if grade_id in case["before"]:
            cell.source = case["before"][grade_id] + "\n" + cell.source
    nb.cells += [new_code_cell(code) for code in case["after"]]
    return catalog.NOTEBOOK, nb


def _tests(nb):
    return [c for c in nb.cells if is_test_cell(c)]


def write_class(root, out_dir):
    """Write every case as `<out_dir>/<student>/<assignment>/`; returns {student: case}."""
    out_dir = Path(out_dir)
    students = {}
    for case in CASES:
        name, nb = _notebook(root, case)
        student = {"unsafe_id": "学生*甲"}.get(case["folder"], case["id"])
        folder = out_dir / student / case["assignment"]
        folder.mkdir(parents=True)
        target = folder / f"{name}.ipynb"
        if case["folder"] == "renamed":
            target = folder / f"{name} (1).ipynb"
        elif case["folder"] == "broken_backup":
            (folder / f"{name}-backup.ipynb").write_text('{"cells": [', encoding="utf-8")
        elif case["folder"] == "symlink":
            os.symlink(Path(root).resolve() / "source", folder / "notes")
        elif case["folder"] == "pasted_test":
            first = _tests(nb)[0]
            nb.cells.insert(nb.cells.index(first) + 1, nbformat.from_dict(json.loads(json.dumps(first))))
        elif case["folder"] == "tests_as_answers":
            for cell in _tests(nb):
                cell.metadata["nbgrader"].update(solution=True, locked=False)
        elif case["folder"] == "edited_tests":
            for cell in _tests(nb):
                cell.source = "pass\n"
        elif case["folder"] == "tests_deleted":
            nb.cells = [c for c in nb.cells if c not in _tests(nb)
                        or not c.metadata["nbgrader"]["grade_id"].startswith("test_masked")]
        elif case["folder"] == "tests_moved":  # the masked_softmax tests after every other question
            moved = [c for c in _tests(nb) if c.metadata["nbgrader"]["grade_id"].startswith("test_masked")]
            nb.cells = [c for c in nb.cells if c not in moved] + moved
        nbformat.write(nb, target)
        students[student] = case
    return students
