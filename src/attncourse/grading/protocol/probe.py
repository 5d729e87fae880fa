"""The grader's hands inside a student's kernel: look up names, call, read attributes, send results back.

The grader's first request to a kernel (`start`) is a user expression, `serve('<request>')`, of an
execute_request; it binds a socket of the probe's own, and every later request travels through it as three
frames (a number, a signature, JSON), served by the kernel's main thread (see `op_start` and `remote.py`).
Everything here runs in the student's process and can be tampered with; that is fine, because the grader
only reads plain data from the reply and decides every verdict itself.
"""
import builtins
import copy
import hmac
import importlib
import itertools
import json
import os
import random
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterable
from typing import Any, Literal, cast

import torch

from . import wire, witness

MIME = "application/vnd.attncourse.probe+json"
_MISSING = object()
_objects: dict[int, Any] = {}  # reference id -> object the grader holds a proxy to
_ids: dict[int, int] = {}  # id(object) -> reference id, so that one object keeps one reference
_counter = itertools.count(1)
_socket: Any = None  # the probe's own socket, once `start` made it
_swapped: dict[str, Any] = {}  # name -> what the student's namespace held before `swap_in`


class Reply:
    """What `serve` returns: its `_repr_mimebundle_` is the reply (IPython's formatting of the first request's
    user expression; `_answer` sends its text for every later request)."""

    def __init__(self, payload: object) -> None:
        self.text = wire.dumps(payload)

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        return {MIME: self.text}


# a namespace this process serves requests for itself (see `serving`), else the kernel's
_served: dict[str, Any] | None = None


def _user_ns() -> dict[str, Any]:
    if _served is not None:
        return _served
    from IPython import get_ipython
    ns: dict[str, Any] = get_ipython().user_ns
    return ns


class serving:
    """`with serving(namespace): ...`: requests are served in this process against `namespace`, not a kernel's:
    how the grader runs the catalogued answers (its own code) through the same protocol (run/diagnosis.py)."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace

    def __enter__(self) -> "serving":
        global _served
        _served = self.namespace
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        global _served
        _served = None
        return False


def _ref(obj: object) -> dict[str, Any]:
    key = id(obj)
    if key not in _ids or _objects.get(_ids[key]) is not obj:
        _ids[key] = next(_counter)
        _objects[_ids[key]] = obj
    kind = type(obj)
    return {"$ref": {"id": _ids[key], "type": f"{kind.__module__}:{kind.__qualname__}",
                     "mro": [f"{c.__module__}:{c.__qualname__}" for c in kind.__mro__],
                     "class": isinstance(obj, type), "callable": callable(obj)}}


def encode(obj: Any, depth: int = 0) -> Any:
    """Data for the grader: tensors and plain values as data, anything else as a reference."""
    if depth > wire.MAX_DEPTH:
        raise ValueError("nested too deeply")
    if obj is None or type(obj) in (bool, int, float, str):
        return obj
    if isinstance(obj, torch.Tensor):
        return wire.encode_tensor(obj)
    if isinstance(obj, torch.Size):
        return {"$tuple": [int(n) for n in obj]}
    if isinstance(obj, torch.device):
        return {"$device": str(obj)}
    if isinstance(obj, torch.dtype):
        return {"$dtype": wire.dtype_name(obj)}
    if isinstance(obj, (types.GeneratorType, map, filter, zip)):
        obj = list(itertools.islice(obj, wire.MAX_ITEMS + 1))
    if isinstance(obj, (list, tuple)):
        if len(obj) > wire.MAX_ITEMS:
            raise ValueError("too many items")
        items = [encode(x, depth + 1) for x in obj]
        return items if isinstance(obj, list) else {"$tuple": items}
    if isinstance(obj, dict) and all(type(k) is str for k in obj):
        return {"$dict": {k: encode(v, depth + 1) for k, v in obj.items()}}
    if type(obj).__module__ == "numpy" and hasattr(obj, "item") and getattr(obj, "shape", None) == ():
        return encode(obj.item(), depth)
    return _ref(obj)


def _where(exc: BaseException) -> list[Any] | None:
    """The innermost frame of the student's own code in a traceback: [function, line number, line]."""
    libraries = tuple({sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(__file__))})
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(libraries)]
    return [frames[-1].name, frames[-1].lineno, (frames[-1].line or "")[:200]] if frames else None


def _args(data: Any) -> Any:
    return wire.decode_in_kernel(data, _objects)


def op_names(names: Iterable[str]) -> dict[str, Any]:
    ns = _user_ns()
    return {name: encode(ns[name]) if name in ns else {"$missing": True} for name in names}


def op_getattr(ref: int, name: str) -> Any:
    return encode(getattr(_objects[ref], name))


def op_call(ref: int, args: Any, kwargs: Any) -> Any:
    return encode(_objects[ref](*_args(args), **_args(kwargs)))


def op_deepcopy(ref: int) -> Any:
    return encode(copy.deepcopy(_objects[ref]))


_BUILTIN_NAMES = frozenset(dir(builtins))


def _define(source: str, name: str, imports: Iterable[str]) -> Any:
    """Define the grader's function or class `name` in a namespace of its own: the notebook's imports, run
    afresh, over the student's names, and the real builtins. A student's `F = plt.figure()` or `any = ...` at
    the top level cannot change what the grader's code computes."""
    namespace = {k: v for k, v in _user_ns().items() if k not in _BUILTIN_NAMES and not k.startswith("__")}
    for text in imports:
        exec(compile(text, f"{GRADER_FILE}imports>", "exec"), namespace)  # noqa: S102 - the instructor's imports
    namespace["__builtins__"] = builtins
    exec(compile(source, f"{GRADER_FILE}{name}>", "exec"), namespace)  # noqa: S102 - the grader's own code
    return namespace[name]


def op_define(source: str, name: str, imports: Iterable[str] = ()) -> Any:
    return encode(_define(source, name, imports))


def op_swap_in(references: dict[str, tuple[str, str]], imports: Iterable[str] = ()) -> None:
    ns = _user_ns()
    for name, (source, defined) in references.items():
        _swapped.setdefault(name, ns.get(name, _MISSING))
        ns[name] = _define(source, defined, imports)


def op_swap_out(names: Iterable[str]) -> None:
    ns = _user_ns()
    for name in names:
        saved = _swapped.pop(name, _MISSING)
        if saved is _MISSING:
            ns.pop(name, None)
        else:
            ns[name] = saved


def _release() -> None:
    _objects.clear()
    _ids.clear()


def op_begin(seed: int, names: Iterable[str]) -> dict[str, Any]:
    """A test cell begins: drop the last cell's references, seed, look up `names`."""
    _release()
    _seed(seed)
    return op_names(names)


def _seed(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy
        numpy.random.seed(seed)
    except ImportError:
        pass


def _limit_output(chars: int) -> None:
    """From now on at most `chars` characters of stdout, of stderr and of displayed data per cell leave the kernel,
    then one note: a thread that prints forever, or a loop of display() calls, costs the grader no messages to
    read (the grader keeps less than this), and the cell little time."""
    from ipykernel.iostream import OutStream
    from IPython import get_ipython
    streams = [s for s in (sys.stdout, sys.stderr) if isinstance(s, OutStream)]
    sent = dict.fromkeys(map(id, streams), 0)

    def limited(stream: OutStream) -> Callable[[str], int | None]:
        write = stream.write

        def write_limited(text: str) -> int | None:
            before = sent[id(stream)]
            sent[id(stream)] = before + len(text)
            if before + len(text) <= chars:
                return write(text)
            if before <= chars:
                write("\n……（输出过多，其余部分未发送）\n")
            elif threading.current_thread() is not threading.main_thread():
                time.sleep(0.01)  # a background thread printing forever leaves the interpreter to the cell
            return len(text)
        return write_limited

    for stream in streams:
        stream.write = limited(stream)  # type: ignore[method-assign,assignment]  # this stream only
    shell = get_ipython()
    publish = shell.display_pub.publish
    sent[id(publish)] = 0

    def publish_limited(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        before = sent[id(publish)]
        sent[id(publish)] = before + len(str(data))
        if before + len(str(data)) <= chars:
            publish(data, *args, **kwargs)
        elif before <= chars:
            print("\n……（显示的内容过多，其余部分未发送）")

    shell.display_pub.publish = publish_limited
    shell.events.register("pre_run_cell", lambda *_: sent.update(dict.fromkeys(sent, 0)))
    _limit_errors(shell, chars)


def _limit_errors(shell: Any, chars: int) -> None:
    """A cell's error (its message, and its traceback, which repeats it) leaves the kernel cut to `chars`
    characters, in the error's output and in the cell's reply: an exception whose message is megabytes long
    costs the grader no more than other output."""
    def cut(text: str) -> str:
        return text if len(text) <= chars else text[:chars] + f"……（其余 {len(text) - chars} 个字符未发送）"

    show = shell._showtraceback

    def show_limited(etype: type, evalue: object, stb: list[str]) -> None:
        lines = [cut(str(line)) for line in stb[:50]]
        show(etype, cut(str(evalue)), lines if sum(map(len, lines)) <= chars else [cut("\n".join(lines))])

    def cut_result(result: Any) -> None:
        for name in ("error_before_exec", "error_in_exec"):
            error = getattr(result, name)
            if error is not None and len(str(error)) > chars:
                setattr(result, name, type(type(error).__name__, (Exception,), {})(cut(str(error))))

    shell._showtraceback = show_limited
    shell.events.register("post_run_cell", cut_result)


def op_start(chars: int, address: str, witness_key: str, watched: list[str]) -> str:
    """The grader's first request, before any of the student's code: install the forbidden-call witness with the
    grader's key for this kernel and the functions its tests may forbid (witness.py), limit output (`_limit_output`), then bind a socket of the probe's own at
    `address` (in the sandbox an ipc path beside the kernel's own sockets, `isolation/preload.py` PROBE_ADDRESS;
    without one `tcp://127.0.0.1:*`, a free local port), served by the kernel's main thread while no cell runs.
    Every later request comes through it, skipping Jupyter's messages (headers, dates), ipykernel's dispatch
    (a hand-off between two threads, busy and idle statuses, flushes) and IPython's execute machinery. Output
    printed while serving goes out with the last cell's, which nothing reads any more. Returns the address."""
    import zmq
    from IPython import get_ipython
    from zmq.eventloop.zmqstream import ZMQStream
    global _socket
    for module in witness.IMPORTED_FIRST:  # a preloaded kernel has them; an ordinary one loads their libraries
        importlib.import_module(module)   # here, not under the notebook's cells (ctypes.dlopen, as the watch sees it)
    witness.install(bytes.fromhex(witness_key), watched)
    _limit_output(chars)
    shell = get_ipython()
    # a student's error is shown as Python shows it, not with IPython's highlighted context lines, which cost
    # 30 ms an error (pygments, and inspect.getmodule over every loaded module); only formgrader shows them
    shell.InteractiveTB.set_mode("Plain")
    kernel = shell.kernel
    socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    socket.linger = 0
    socket.bind(address)
    _socket = ZMQStream(socket, io_loop=kernel.io_loop)

    def on_request(frames: list[bytes]) -> None:
        try:
            _answer(kernel, socket, frames)
        except KeyboardInterrupt:  # an interrupt meant for a request that has been answered since
            kernel.post_handler_hook()

    _socket.on_recv(on_request)
    return cast(bytes, socket.last_endpoint).decode()


def _answer(kernel: Any, socket: Any, frames: list[bytes]) -> None:
    """Serve one request, [identity, number, signature, JSON], and send [identity, number, reply JSON]. The
    interrupt that follows a timeout raises KeyboardInterrupt while serving only, as in ipykernel's handlers,
    and may land between serving and sending: the reply is still sent, so that the grader reads the timeout,
    not a lost kernel."""
    if len(frames) != 4 or not hmac.compare_digest(kernel.session.sign(frames[3:]), frames[2]):
        return  # not the grader's: dropped, as ipykernel drops a message with a wrong signature
    text = None
    kernel.pre_handler_hook()
    try:
        for _ in range(3):
            try:
                if text is None:
                    try:
                        text = serve(frames[3].decode(errors="replace"))._repr_mimebundle_()[MIME]
                        if type(text) is not str:
                            raise TypeError("reply")
                    except Exception as exc:  # noqa: BLE001 - a probe changed by the student's code: the grader judges
                        text = wire.dumps({"error": {"ename": type(exc).__name__, "evalue": ""}})
                socket.send_multipart([frames[0], frames[1], text.encode(errors="replace")])  # lone surrogates
                return
            except KeyboardInterrupt:
                text = text or wire.dumps({"error": {"ename": "KeyboardInterrupt", "evalue": ""}})
    finally:
        kernel.post_handler_hook()


# --- forbidden shortcuts: see witness.py -----------------------------------------------------------------------

GRADER_FILE = "<grader: "  # the file name of everything the grader defines in the kernel (see `_define`)


def op_witness(text: str, mac: str) -> Any:
    """Hand the grader's signed command to the witness (installed by `start`); returns its signed answer."""
    return encode(witness.command(text, mac))


OPS = {name[3:]: fn for name, fn in globals().items() if name.startswith("op_")}


def serve(request: str) -> Reply:
    """Run one request (JSON: {"op": ..., "args": {...}}); the reply is {"ok": ...} or {"error": ...}."""
    try:
        message = json.loads(request)
        op = OPS[message["op"]]
        reply = Reply({"ok": op(**message["args"])})
        if len(reply.text) > wire.MAX_REPLY:
            raise ValueError(f"返回的结果过大（超过 {wire.MAX_REPLY >> 20} MB）")
        return reply
    except BaseException as exc:  # noqa: BLE001 - the student's code may raise anything, KeyboardInterrupt included
        try:
            evalue = str(exc)[:2000]
        except Exception:  # noqa: BLE001 - an exception whose str() fails
            evalue = ""
        return Reply({"error": {"ename": type(exc).__name__, "evalue": evalue, "where": _where(exc)}})
