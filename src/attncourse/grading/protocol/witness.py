"""The witness of forbidden calls: what the grader learns about them from a kernel, kept out of the student's reach.

`install(key)` runs in a grading kernel before any of the student's code (the grader's first request, `start`,
carries a key of its own for this kernel). From then on:

- **torch's dispatcher** runs the course's kernels for every aten operation of scaled dot-product attention:
  `aten::scaled_dot_product_attention` and its math variant compute it from ordinary operations (so self-checks
  and later questions that may use it still work) and report the call; every fused or backend variant (flash,
  memory-efficient, cuDNN, the CPU flash kernel, `_native_multi_head_attention`, the fused transformer layer…)
  reports and fails. Every path to these operations (another thread, TorchScript, compiled code, `torch.ops`,
  inference mode, CPU or CUDA) goes through the dispatcher, and no original kernel is left to call.
- **A Python audit hook** (`sys.addaudithook`: it cannot be removed) receives those reports and, while a test
  that forbids something runs, the calls of forbidden Python functions (by their code objects, found when the
  witness was installed) through a profile function set in that thread and in every thread started later.
- Its state, the dispatcher registrations and the key live in functions whose globals are a private dictionary,
  reachable only through `gc` (which the hook sees first). Nothing it does looks a name up in a module the
  student's code could change, and it never touches the student's objects beyond their type.
- The grader's commands (`watch`, `report`, `end`) are signed with the key and numbered; the answers to `watch`
  and `report` are signed too, so a watch held back by the student's code until the report is asked for shows.
  Code that could reach the witness's state or switch its profile function off (`gc`, `ctypes`,
  `sys.setprofile`/`settrace` from the student's code or during a watched test, a thread started or running
  without the profile function, opening the process's memory) makes the hook forget the key at once: every
  later report then fails the grader's check, and the grader holds the submission for review (see
  `remote.Session.forbidden_message`).
- **Other processes** are not watched (a forked child inherits the hook, but its reports never reach the grader;
  a new interpreter has none), so a test that forbids something forgets the key too when the kernel has a child
  process as the watch begins or is reported on, when a child ended during the watch (a child waited for adds to
  the kernel's `RUSAGE_CHILDREN`; one reaped unseen because SIGCHLD is ignored is refused as well), or when a
  process is started during the watch (the audit events of `os.fork`, `subprocess.Popen`…).

The kernel's copy of a report is plain data the grader verifies; a student who stops the reports, forges them or
replays an old one gets a submission held for review, never the points.
"""
import _signal  # type: ignore[import-not-found]  # signal.getsignal looks _signal up in a module
import builtins
import hmac
import math
import os
import resource
import sys
import threading
import types
from typing import Any

import torch

# the operations whose every entry point is watched: aten operator names containing one of these (backward
# operators are only reached through their forward one)
FAMILY = ("scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention", "multi_head_attention",
          "transformer_encoder_layer", "fused_sdp")
COMPUTED = ("scaled_dot_product_attention", "_scaled_dot_product_attention_math")  # the rest fail
KEYS = ("CPU", "CUDA", "CompositeExplicitAutograd", "CompositeImplicitAutograd")
SDPA = "sdpa"  # the path the grader sends for every entry point of scaled dot-product attention
WATCHED_MODULES = ("torch", "torch.nn", "torch.nn.functional", "d2l.torch")
TAMPER = {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "ctypes.dlopen", "ctypes.dlsym",
          "ctypes.dlsym/handle", "ctypes.cdata", "ctypes.addressof", "ctypes.string_at", "ctypes.wstring_at",
          "sys.setprofile", "sys.settrace"}
PROCESS = {"os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.system", "os.spawn", "subprocess.Popen"}
SEP, ITEM, PAIR = "\x1e", "\x1f", "\x1d"  # fields, items and label/path of a command (split by str methods only)
_installed: list[bool] = []

# Names the functions below read from their globals: at run time a private dictionary made by `install`
# (these module-level values are never used).
_G: dict[str, Any] = {}


def _libraries() -> tuple[str, ...]:
    import sysconfig
    return tuple(sorted({sys.prefix, sys.base_prefix, sysconfig.get_paths()["stdlib"],
                         os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "<frozen"}))


def _where(frame: Any) -> list[Any] | None:
    """[function, line] of the nearest frame, from `frame` outwards, that is not a library's."""
    while frame is not None:
        if not frame.f_code.co_filename.startswith(_G["LIBS"]):
            return [frame.f_code.co_name, frame.f_lineno]
        frame = frame.f_back
    return None


def _student_caused(frame: Any) -> bool:
    return _where(frame) is not None


def _forget(reason: str) -> None:
    """Tampering: the key is forgotten (overwritten in place with random bytes) before the student's code gets
    anything back, so that no report is accepted from now on."""
    key = _G["KEY"]
    key[:] = _G["urandom"](len(key))
    if len(_G["TAMPERED"]) < 20:
        _G["TAMPERED"].append(reason)


def _record(label: str, frame: Any) -> None:
    if label not in _G["USED"]:
        _G["USED"][label] = _where(frame)


def _sign(text: str) -> str:
    digest: bytes = _G["digest"](_G["bytes"](_G["KEY"]), text.encode(), "sha256")
    return digest.hex()


def _command(text: Any, mac: Any, box: Any) -> None:
    if type(text) is not str or type(mac) is not str or type(box) is not list:
        return
    if not _G["compare"](_sign(text), mac):
        _G["list_append"](box, "unsigned")
        return
    fields = text.split(SEP)
    number = _G["int"](fields[0])
    if number <= _G["LAST"][0]:
        return
    _G["LAST"][0] = number
    watch = _G["WATCH"]
    if fields[1] == "watch":
        watch["n"], watch["codes"], watch["sdpa"], watch["gqa"] = number, {}, None, None
        _G["USED"].clear()
        for item in fields[2].split(ITEM) if fields[2] else []:
            label, path = item.split(PAIR)
            if path == SDPA:
                watch["sdpa"] = label
            for code in _G["TABLE"].get(path, ()):
                watch["codes"][code] = label
        for keyword in fields[3].split(ITEM) if fields[3] else []:
            if keyword == "enable_gqa":
                watch["gqa"] = keyword + "="
        _set_profile(_G["PROFILE"])
        _check_threads()
        _check_children(True)
        _answer(number, box)  # the grader checks that the watch began now, not when a later command came
    elif fields[1] == "report":
        _check_threads()
        _check_children(False)
        _answer(number, box)
    elif fields[1] == "end":
        watch["n"] = None
        _set_profile(None)


def _answer(number: int, box: list[str]) -> None:
    """Answer command `number` with the signed state: (that number, the watch's, the calls seen, tampering)."""
    report = _G["repr"]((number, _G["WATCH"]["n"], _G["sorted"](_G["USED"].items()), _G["list"](_G["TAMPERED"])))
    _G["list_append"](box, report)
    _G["list_append"](box, _sign(report))


def _check_threads() -> None:
    """Every thread started since `install` runs with the profile function: threading still gives it to new
    threads (a thread started without it may have ended by now), and one that got past starting (a frame outside
    threading.py) without it was started after `threading.setprofile` was changed."""
    if _G["THREADING"].get("_profile_hook") is not _G["PROFILE"]:
        _forget("线程没有 profile 函数")
        return
    for ident, frame in _G["current_frames"]().items():
        if ident in _G["SEEN"] or ident in _G["BEFORE"]:
            continue
        while frame is not None:
            if frame.f_code.co_filename != _G["THREADING_FILE"]:
                _forget("线程没有 profile 函数")
                return
            frame = frame.f_back


def _read(path: str) -> str | None:
    """The text of a file under /proc, or None when it is gone."""
    try:
        fd = _G["os_open"](path, _G["O_RDONLY"])
    except OSError:
        return None
    try:
        chunks = []
        while chunk := _G["os_read"](fd, 65536):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        _G["os_close"](fd)
    return b"".join(chunks).decode("latin-1")


def _children() -> list[tuple[str, str]]:
    """(pid, state) of this process's children: from each thread's `children` file, or, where the kernel has
    none, from the parent of every process in /proc (in the sandbox's PID namespace only the kernel's own). A
    system without /proc has none found."""
    me = _G["str"](_G["getpid"]())
    tasks = f"/proc/{me}/task/"
    try:
        if _read(tasks + me + "/children") is not None:
            pids = [pid for task in _G["listdir"](tasks) for pid in (_read(tasks + task + "/children") or "").split()]
        else:
            pids = [pid for pid in _G["listdir"]("/proc") if pid.isdigit()]
    except OSError:
        return []
    found = []
    for pid in pids:
        fields = (_read(f"/proc/{pid}/stat") or ")").rpartition(")")[2].split()  # pid (name) state ppid …
        if len(fields) > 1 and fields[1] == me:
            found.append((pid, fields[0]))
    return found


def _check_children(begin: bool) -> None:
    """No other process may run a watched test's code: the key is forgotten when a child is alive as the watch
    begins or is reported on (children that had ended, unreaped, before it began aside), or when one ended during
    the watch (its resource use then adds to the kernel's children's; ignoring SIGCHLD would reap it unseen)."""
    watch = _G["WATCH"]
    children = _children()
    if begin:
        watch["ended"] = {pid for pid, state in children if state in ("Z", "X")}
        watch["usage"] = _G["tuple"](_G["rusage"](_G["RUSAGE_CHILDREN"]))
    handler = _G["getsignal"](_G["SIGCHLD"])
    if type(handler) is int and handler == _G["SIG_IGN"]:
        _forget("忽略了 SIGCHLD（子进程结束不被看到）")
    elif any(pid not in watch["ended"] for pid, _ in children):
        _forget("评分内核有子进程")
    elif _G["tuple"](_G["rusage"](_G["RUSAGE_CHILDREN"])) != watch["usage"]:
        _forget("测试中有子进程结束")


def _set_profile(function: Any) -> None:
    _G["SELF"][0] = True
    try:
        _G["setprofile"](function)
    finally:
        _G["SELF"][0] = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    watch = _G["WATCH"]
    if event == "attncourse.call":  # the profile function: (frame, what, arg)
        if (watch["n"] is not None and len(args) == 3 and type(args[0]) is _G["FrameType"]
                and type(args[1]) is str and args[1] == "call"):
            label = watch["codes"].get(args[0].f_code)
            if label is not None:
                _record(label, args[0].f_back)
        return
    if event == "attncourse.sdpa":  # (enable_gqa,) from the dispatcher's kernel
        if watch["n"] is not None and watch["sdpa"] is not None:
            _record(watch["sdpa"], _G["getframe"](2))
        if watch["n"] is not None and watch["gqa"] is not None and args and args[0] is True:
            _record(watch["gqa"], _G["getframe"](2))
        return
    if event == "attncourse.fused":
        if watch["n"] is not None and watch["sdpa"] is not None:
            _record(watch["sdpa"], _G["getframe"](2))
        raise _G["RuntimeError"](f"评分内核不提供 aten::{args[0] if args and type(args[0]) is str else ''}"
                                 "（融合注意力算子）/ fused attention kernels are not available while grading")
    if event == "attncourse.command":
        if len(args) == 3:
            _command(*args)
        return
    if event in PROCESS:
        if watch["n"] is not None:
            _forget(f"测试中启动了进程（{event}）")
        return
    if event == "open":  # the process's own memory holds what the key was
        path = args[0] if args else None
        if (type(path) is str and path.endswith("/mem")) or (type(path) is bytes and path.endswith(b"/mem")):
            _forget("读取了进程内存")
        return
    if event not in TAMPER:
        return
    caller = _G["getframe"](1)
    if event in ("sys.setprofile", "sys.settrace"):
        if _G["SELF"][0]:
            return
        if caller is not None and caller.f_code is _G["BOOTSTRAP_INNER"]:  # a thread starting
            if event == "sys.setprofile" and _G["THREADING"].get("_profile_hook") is _G["PROFILE"]:
                _G["SEEN"].add(_G["get_ident"]())
            else:
                _forget("换掉了线程的 profile 函数")
        elif watch["n"] is not None or _student_caused(caller):
            _forget(f"调用了 {event}")
    elif _student_caused(caller):
        _forget(f"调用了 {event}")


# The dispatcher's kernels. Student code may run inside them (a Tensor subclass) and reach their frames: their
# globals are this module's, which hold nothing the verdict depends on, and each reports first, through `_audit`,
# a default bound in the copy `install` registers (reachable only through `gc`).
def _sdpa(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0, is_causal: bool = False,
          scale: Any = None, enable_gqa: bool = False, *, _audit: Any = None) -> Any:
    _audit("attncourse.sdpa", enable_gqa is True)
    return _attend(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)[0]


def _sdpa_math(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
               is_causal: bool = False, dropout_mask: Any = None, scale: Any = None, enable_gqa: bool = False, *,
               _audit: Any = None) -> Any:
    _audit("attncourse.sdpa", enable_gqa is True)
    return _attend(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def _fused(*args: Any, _audit: Any = None, _name: str = "", **kwargs: Any) -> Any:
    _audit("attncourse.fused", _name)  # the hook raises
    raise RuntimeError(_name)


def _attend(query: Any, key: Any, value: Any, attn_mask: Any, dropout_p: float, is_causal: bool, scale: Any,
            enable_gqa: bool) -> tuple[Any, Any]:
    """softmax(QKᵀ·scale + mask)V and the weights, as aten's math variant computes them (in float32 for half
    precision, as the fused kernels accumulate)."""
    dtype = query.dtype
    if dtype in (torch.float16, torch.bfloat16):
        query, key, value = query.float(), key.float(), value.float()
    if enable_gqa:
        key = key.repeat_interleave(query.size(-3) // key.size(-3), -3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), -3)
    scores = query @ key.transpose(-2, -1) * (1 / math.sqrt(query.size(-1)) if scale is None else scale)
    if is_causal:
        keep = torch.ones(query.size(-2), key.size(-2), dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        scores = (scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool
                  else scores + attn_mask)
    weights = torch.softmax(scores, dim=-1)
    if dropout_p > 0:
        weights = torch.dropout(weights, dropout_p, True)
    return (weights @ value).to(dtype), weights.to(dtype)


def _kernel(function: Any, **bound: Any) -> Any:
    """A copy of `function` with `_audit` (and `bound`) as its keyword defaults, for the dispatcher only."""
    copy = types.FunctionType(function.__code__, function.__globals__, function.__name__, function.__defaults__)
    copy.__kwdefaults__ = {"_audit": sys.audit, **bound}
    return copy


def _codes(obj: object) -> list[types.CodeType]:
    """The code objects of a Python function, or of every function a class defines itself."""
    found = []
    for value in (vars(obj).values() if isinstance(obj, type) else [obj]):
        value = getattr(value, "__func__", value)
        while hasattr(value, "__wrapped__"):
            found.append(getattr(value, "__code__", None))
            value = value.__wrapped__
        found.append(getattr(value, "__code__", None))
    return [c for c in found if isinstance(c, types.CodeType)]


def _table() -> dict[str, tuple[types.CodeType, ...]]:
    """{dotted path: code objects} of what a test may forbid, taken before any of the student's code ran."""
    import importlib
    table: dict[str, tuple[types.CodeType, ...]] = {}
    for module_name in WATCHED_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name, value in list(vars(module).items()):
            if isinstance(value, (type, types.FunctionType)):
                codes = tuple(_codes(value))
                if codes:
                    table[f"{module_name}.{name}"] = codes
    return table


def install(key: bytes) -> None:
    """Install the witness in this process (once): the dispatcher's kernels, the audit hook, the profile function
    of later threads. Call before any of the student's code runs."""
    if _installed:
        return
    _installed.append(True)
    g: dict[str, Any] = {"__builtins__": dict(vars(builtins))}
    g.update({"KEY": bytearray(key), "LAST": [0], "USED": {}, "TAMPERED": [], "SELF": [False], "LIBS": _libraries(),
              "WATCH": {"n": None, "codes": {}, "sdpa": None, "gqa": None, "ended": set(), "usage": ()},
              "TABLE": _table(),
              "audit": sys.audit, "getframe": sys._getframe, "setprofile": sys.setprofile,
              "digest": __import__("_hashlib").hmac_digest, "compare": hmac.compare_digest, "bytes": bytes,
              "int": int, "repr": repr, "sorted": sorted, "list": list, "list_append": list.append,
              "RuntimeError": RuntimeError, "FrameType": types.FrameType,
              "THREADING": vars(threading), "THREADING_FILE": threading.__file__,
              "BOOTSTRAP_INNER": vars(threading.Thread)["_bootstrap_inner"].__code__, "SEEN": set(),
              "BEFORE": set(sys._current_frames()), "current_frames": sys._current_frames,
              "get_ident": threading.get_ident, "urandom": os.urandom, "str": str, "tuple": tuple,
              "getpid": os.getpid, "listdir": os.listdir, "os_open": os.open, "os_read": os.read,
              "os_close": os.close, "O_RDONLY": os.O_RDONLY, "rusage": resource.getrusage,
              "RUSAGE_CHILDREN": resource.RUSAGE_CHILDREN, "getsignal": _signal.getsignal,
              "SIGCHLD": _signal.SIGCHLD, "SIG_IGN": _signal.SIG_IGN,
              "PROFILE": types.MethodType(sys.audit, "attncourse.call")})
    g.update({"_G": g, "SEP": SEP, "ITEM": ITEM, "PAIR": PAIR, "SDPA": SDPA, "TAMPER": TAMPER, "PROCESS": PROCESS})
    for function in (_where, _student_caused, _forget, _record, _sign, _command, _answer, _check_threads, _read,
                     _children, _check_children, _set_profile, _hook):
        g[function.__name__] = types.FunctionType(function.__code__, g, function.__name__, function.__defaults__)
    torch.backends.mha.set_fastpath_enabled(False)  # nn.MultiheadAttention through its Python code, not a fused kernel
    library = torch._C._dispatch_library("IMPL", "aten", "")
    for qualified in torch._C._dispatch_get_all_op_names():
        name = qualified.partition("::")[2]
        if not qualified.startswith("aten::") or "backward" in name or not any(f in name for f in FAMILY):
            continue
        base = name.partition(".")[0]
        kernel = (_kernel(_sdpa) if base == COMPUTED[0] else _kernel(_sdpa_math) if base == COMPUTED[1]
                  else _kernel(_fused, _name=name))
        for dispatch_key in KEYS:
            if torch._C._dispatch_has_kernel_for_dispatch_key(qualified, dispatch_key):
                library.impl(name, dispatch_key, kernel)
    g["LIBRARY"] = library  # the registrations last as long as the process
    sys.addaudithook(g["_hook"])
    threading.setprofile(g["PROFILE"])


def command(text: str, mac: str) -> list[str]:
    """Hand the grader's signed command to the witness; returns what it answered (a report and its signature)."""
    box: list[str] = []
    sys.audit("attncourse.command", text, mac, box)
    return box
