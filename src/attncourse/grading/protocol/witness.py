"""The witness of forbidden calls: what the grader learns about them from a kernel, kept out of the student's reach.

`install(key, paths)` runs in a grading kernel before any of the student's code (the grader's first request, `start`,
carries a key of its own for this kernel). From then on:

- **torch's dispatcher** runs the course's kernels for every aten operation of scaled dot-product attention:
  `aten::scaled_dot_product_attention` and its math variant compute it from ordinary operations (so self-checks
  and later questions that may use it still work) and report the call; every fused or backend variant (flash,
  memory-efficient, cuDNN, the CPU flash kernel, `_native_multi_head_attention`, the fused transformer layer…)
  reports and fails. Every path to these operations (another thread, TorchScript, compiled code, `torch.ops`,
  inference mode, CPU or CUDA) goes through the dispatcher, and no original kernel is left to call.
- **The forbidden Python functions report themselves.** At `start` the grader names every function or class its
  tests may forbid (`d2l.masked_softmax`, `nn.MultiheadAttention` and its functional core…); each of their
  functions gets a call to `sys.audit` as its first instruction (`bytecode.py`), in place, so that every call
  reports, from any thread (however it was started) and any Python path, and no unwatched copy of the code is
  left. TorchScript calls them back in Python (`torch.jit.ignore`) and cannot read their source to copy it; a
  call made while something records the computation to replay it later (`torch.jit.trace`, torch.fx, `make_fx`)
  marks the function as captured, and every later test that forbids it finds it used.
- **A Python audit hook** (`sys.addaudithook`: it cannot be removed) receives those reports and keeps, while a
  test that forbids something runs, the forbidden calls and where the student's code made them.
- Its state, the dispatcher registrations and the key live in functions whose globals are a private dictionary,
  reachable only through `gc` (which the hook sees first). Nothing it does looks a name up in a module the
  student's code could change, and it never touches the student's objects beyond their type.
- The grader's commands (`watch`, `report`, `end`) are signed with the key and numbered; the answers to `watch`
  and `report` are signed too, so a watch held back by the student's code until the report is asked for shows.
  Code that could reach the witness's state or undo the reporting (`gc`, `ctypes`, opening the process's memory,
  giving a watched function other code or building a function or code object from a watched function's code)
  makes the hook forget the key at once: every later report then fails the grader's check, and the grader holds
  the submission for review (see `remote.Session.forbidden_message`).
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
import types
from collections.abc import Iterable
from typing import Any

import torch
import torch.fx._symbolic_trace as fx_trace
from torch._jit_internal import FunctionModifiers

from . import bytecode

# the operations whose every entry point is watched: aten operator names containing one of these (backward
# operators are only reached through their forward one)
FAMILY = ("scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention", "multi_head_attention",
          "transformer_encoder_layer", "fused_sdp")
COMPUTED = ("scaled_dot_product_attention", "_scaled_dot_product_attention_math")  # the rest fail
KEYS = ("CPU", "CUDA", "CompositeExplicitAutograd", "CompositeImplicitAutograd")
SDPA = "sdpa"  # the path the grader sends for every entry point of scaled dot-product attention
TAMPER = {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "ctypes.dlopen", "ctypes.dlsym",
          "ctypes.dlsym/handle", "ctypes.cdata", "ctypes.addressof", "ctypes.string_at", "ctypes.wstring_at"}
CODE = {"object.__setattr__", "function.__new__", "code.__new__"}  # a function given other code, or code built
CALL = "attncourse.call"  # the event a watched function raises first: (its token,)
# What a kernel imports before the watch is installed (as the preloading process does, isolation/preload.py's
# PRELOAD): importing them loads shared libraries through ctypes (torchvision's operators, NVML for d2l's GPU
# count), which the watch would take for the student's code if the notebook's import cell did it afterwards.
IMPORTED_FIRST = ("torch", "d2l.torch", "torch.nn.attention.flex_attention")
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


def _under(name: Any, prefixes: Any) -> bool:
    """Whether a code object's file name starts with one of `prefixes`. Code can be built with a `str` subclass
    for its names, whose methods would run the student's code here: such a name is no library's."""
    return type(name) is str and _G["startswith"](name, prefixes)


def _where(frame: Any) -> list[Any] | None:
    """[function, line] of the nearest frame, from `frame` outwards, that is not a library's."""
    while frame is not None:
        if not _under(frame.f_code.co_filename, _G["LIBS"]):
            name = frame.f_code.co_name
            return [name if type(name) is str else "?", frame.f_lineno]
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
        watch["n"], watch["tokens"], watch["sdpa"], watch["gqa"] = number, {}, None, None
        _G["USED"].clear()
        for item in fields[2].split(ITEM) if fields[2] else []:
            label, path = item.split(PAIR)
            if path == SDPA:
                watch["sdpa"] = label
            for token in _G["TABLE"].get(path, ()):
                watch["tokens"][token] = label
                if token in _G["CAPTURED"]:  # recorded earlier to be replayed without calling it
                    _G["USED"].setdefault(label, _G["CAPTURED"][token])
        for keyword in fields[3].split(ITEM) if fields[3] else []:
            if keyword == "enable_gqa":
                watch["gqa"] = keyword + "="
        _check_children(True)
        _answer(number, box)  # the grader checks that the watch began now, not when a later command came
    elif fields[1] == "report":
        _check_children(False)
        _answer(number, box)
    elif fields[1] == "end":
        watch["n"] = None


def _answer(number: int, box: list[str]) -> None:
    """Answer command `number` with the signed state: (that number, the watch's, the calls seen, tampering)."""
    report = _G["repr"]((number, _G["WATCH"]["n"], _G["sorted"](_G["USED"].items()), _G["list"](_G["TAMPERED"])))
    _G["list_append"](box, report)
    _G["list_append"](box, _sign(report))


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


def _capturing(frame: Any) -> bool:
    """Whether the computation is being recorded to be replayed without Python: `torch.jit.trace` (torch's
    tracing state), torch.fx's `symbolic_trace` or `make_fx` (a frame of `Tracer.trace`, or fx's flag), a CUDA
    graph."""
    if _G["tracing_state"]() is not None or _G["getattr"](_G["FX_FLAG"], "flag", False) is True:
        return True
    if _G["cuda_initialized"]() and _G["cuda_capturing"]():
        return True
    while frame is not None:
        if frame.f_code is _G["FX_TRACE"]:
            return True
        frame = frame.f_back
    return False


def _copied(code: Any) -> bool:
    """Whether `code` is a watched function's code, before or after its report was put in, or code built to look
    like it (its name and file)."""
    return type(code) is _G["CodeType"] and _like_watched(code.co_code, code.co_filename, code.co_name)


def _like_watched(co_code: Any, filename: Any, name: Any) -> bool:
    """Whether code with these bytes, file and name is a watched function's, before or after its report was put
    in, or looks like it (exact `bytes` and `str`s only, see `_under`)."""
    return ((type(co_code) is bytes and co_code in _G["BYTES"])
            or (type(filename) is str and type(name) is str and (filename, name) in _G["NAMES"]))


def _by_dynamo(frame: Any) -> bool:
    """torch.compile's bytecode rewriting (which keeps the report: the call it cannot compile runs as Python)."""
    while frame is not None:
        if _under(frame.f_code.co_filename, _G["DYNAMO"]):
            return True
        frame = frame.f_back
    return False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    watch = _G["WATCH"]
    if event == CALL:  # a watched function's first instruction: (its token,)
        if len(args) == 1 and type(args[0]) is int:
            frame = _G["getframe"](1)
            label = watch["tokens"].get(args[0]) if watch["n"] is not None else None
            if label is not None:
                _record(label, frame)
            if args[0] not in _G["CAPTURED"] and _capturing(frame):
                _G["CAPTURED"][args[0]] = _where(frame)
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
    if event == "exec":  # (code,): a module of the watched functions run again makes fresh, unwatched copies
        if args and type(args[0]) is _G["CodeType"] and type(args[0].co_filename) is str and \
                args[0].co_filename in _G["FILES"]:
            _forget("重新运行了被监视函数所在的模块")
        return
    if event in CODE:
        if event == "object.__setattr__":  # (object, name, value)
            if len(args) != 3 or type(args[1]) is not str or args[1] != "__code__":
                return
            if type(args[0]) is _G["FunctionType"] and args[0].__code__ in _G["INJECTED"]:
                _forget("改动了被监视函数的代码")
                return
            code = args[2]
        elif event == "function.__new__":  # (code,)
            code = args[0] if args else None
        else:  # code.__new__: (co_code, co_filename, co_name, …)
            code = None
            if len(args) > 2 and _like_watched(args[0], args[1], args[2]) and not _by_dynamo(_G["getframe"](1)):
                _forget("复制了被监视函数的代码")
        if code is not None and _copied(code) and not _by_dynamo(_G["getframe"](1)):
            _forget("复制了被监视函数的代码")
        return
    if event in TAMPER and _student_caused(_G["getframe"](1)):
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


def _functions(obj: object) -> list[types.FunctionType]:
    """A Python function and those it wraps, or those of every function a class defines itself."""
    found = []
    for value in (list(vars(obj).values()) if isinstance(obj, type) else [obj]):
        value = getattr(value, "__func__", value)
        while isinstance(value, types.FunctionType):
            found.append(value)
            value = getattr(value, "__wrapped__", None)
    return found


def _watch_functions(paths: Iterable[str], g: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Put a report first in the functions of every dotted path in `paths` (`bytecode.report_first`) and keep in
    `g` what the hook needs to see their code copied; returns {path: their tokens}."""
    import importlib
    functions: list[types.FunctionType] = []
    table: dict[str, tuple[int, ...]] = {}
    for path in paths:
        module_name, _, name = path.rpartition(".")
        try:
            value = vars(importlib.import_module(module_name)).get(name)
        except ImportError:
            continue
        tokens = []
        for function in _functions(value):
            if function not in functions:
                functions.append(function)
            tokens.append(functions.index(function))
        if tokens:
            table[path] = tuple(tokens)
    for token, function in enumerate(functions):
        code = function.__code__
        function.__code__ = bytecode.report_first(code, sys.audit, CALL, token, first_line=1)
        function._torchscript_modifier = FunctionModifiers.IGNORE  # type: ignore[attr-defined]
        g["INJECTED"].add(function.__code__)
        g["BYTES"].update((code.co_code, function.__code__.co_code))
        g["NAMES"].add((code.co_filename, code.co_name))
        g["FILES"].add(code.co_filename)
    return table


def _operators() -> list[tuple[str, tuple[str, ...]]]:
    """[(name, the `KEYS` it has a kernel at)] of the aten operators of `FAMILY`, backward ones aside."""
    found = []
    for qualified in torch._C._dispatch_get_all_op_names():
        name = qualified.partition("::")[2]
        if qualified.startswith("aten::") and "backward" not in name and any(f in name for f in FAMILY):
            found.append((name, tuple(key for key in KEYS
                                      if torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key))))
    return found


# read as this module is imported (torch registers its aten operators as it is imported): by the preloading process
# once for every kernel it forks, where each kernel took 5 ms and 1,200 page faults to read the dispatcher's names
OPERATORS = _operators()


def install(key: bytes, paths: Iterable[str] = ()) -> None:
    """Install the witness in this process (once): the dispatcher's kernels, the reports of the functions at
    `paths` (dotted, as `remote.Session.watched_paths` gives them), the audit hook. Call before any of the
    student's code runs."""
    if _installed:
        return
    _installed.append(True)
    g: dict[str, Any] = {"__builtins__": dict(vars(builtins))}
    g.update({"KEY": bytearray(key), "LAST": [0], "USED": {}, "TAMPERED": [], "LIBS": _libraries(),
              "WATCH": {"n": None, "tokens": {}, "sdpa": None, "gqa": None, "ended": set(), "usage": ()},
              "CAPTURED": {}, "INJECTED": set(), "BYTES": set(), "NAMES": set(), "FILES": set(),
              "audit": sys.audit, "getframe": sys._getframe,
              "digest": __import__("_hashlib").hmac_digest, "compare": hmac.compare_digest, "bytes": bytes,
              "int": int, "repr": repr, "sorted": sorted, "list": list, "list_append": list.append,
              "getattr": getattr, "startswith": str.startswith, "RuntimeError": RuntimeError, "FunctionType": types.FunctionType,
              "CodeType": types.CodeType, "tracing_state": torch._C._get_tracing_state,
              "FX_FLAG": fx_trace._is_fx_tracing_tls, "FX_TRACE": fx_trace.Tracer.trace.__code__,
              "cuda_initialized": torch.cuda.is_initialized,
              "cuda_capturing": torch._C._cuda_isCurrentStreamCapturing if torch.cuda.is_available() else bool,
              "DYNAMO": os.path.join(os.path.dirname(torch.__file__), "_dynamo", ""),
              "urandom": os.urandom, "str": str, "tuple": tuple,
              "getpid": os.getpid, "listdir": os.listdir, "os_open": os.open, "os_read": os.read,
              "os_close": os.close, "O_RDONLY": os.O_RDONLY, "rusage": resource.getrusage,
              "RUSAGE_CHILDREN": resource.RUSAGE_CHILDREN, "getsignal": _signal.getsignal,
              "SIGCHLD": _signal.SIGCHLD, "SIG_IGN": _signal.SIG_IGN})
    g.update({"_G": g, "SEP": SEP, "ITEM": ITEM, "PAIR": PAIR, "SDPA": SDPA, "TAMPER": TAMPER, "PROCESS": PROCESS,
              "CODE": CODE, "CALL": CALL})
    g["TABLE"] = _watch_functions(paths, g)
    for function in (_under, _like_watched, _where, _student_caused, _forget, _record, _sign, _command, _answer, _read, _children,
                     _check_children, _capturing, _copied, _by_dynamo, _hook):
        g[function.__name__] = types.FunctionType(function.__code__, g, function.__name__, function.__defaults__)
    torch.backends.mha.set_fastpath_enabled(False)  # nn.MultiheadAttention through its Python code, not a fused kernel
    library = torch._C._dispatch_library("IMPL", "aten", "")
    for name, dispatch_keys in OPERATORS:
        base = name.partition(".")[0]
        kernel = (_kernel(_sdpa) if base == COMPUTED[0] else _kernel(_sdpa_math) if base == COMPUTED[1]
                  else _kernel(_fused, _name=name))
        for dispatch_key in dispatch_keys:
            library.impl(name, dispatch_key, kernel)
    g["LIBRARY"] = library  # the registrations last as long as the process
    sys.addaudithook(g["_hook"])


def command(text: str, mac: str) -> list[str]:
    """Hand the grader's signed command to the witness; returns what it answered (a report and its signature)."""
    box: list[str] = []
    sys.audit("attncourse.command", text, mac, box)
    return box
