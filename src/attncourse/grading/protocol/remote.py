"""The grader's side of a test cell: the student's names as proxies to objects in the sandboxed kernel.

Calling a proxy runs the student's code in the kernel; what comes back is data built here (plain tensors,
numbers, strings) or another proxy. Nothing the kernel sends is executed or unpickled here, so the student's
code can only influence the values a test compares, never the comparison.
"""
import ast
import asyncio
import functools
import hmac
import json
import sys
import time
import zlib
from collections.abc import Callable, Iterable
from queue import Empty
from typing import Any

import torch
import zmq
import zmq.asyncio
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.session import Session as MessageSession
from jupyter_core.utils import run_sync
from traitlets import Type

from .. import syntax
from . import probe, wire, witness

# the other entry points of a forbidden operation: SDPA's aten variants are all of the dispatcher's (witness.py),
# flex_attention computes it in Python in eager mode (its operator and that operator's dense implementation)
FLEX = "torch._higher_order_ops.flex_attention."
OPERATIONS = {"torch.nn.MultiheadAttention": ["torch.nn.functional.multi_head_attention_forward"],
              "torch.nn.functional.scaled_dot_product_attention": [
                  FLEX + "FlexAttentionHOP", FLEX + "math_attention", FLEX + "_math_attention_inner"]}
WITNESS_LOST = "禁止函数的监视没有如实报告（被停止或被改动），本次提交需人工复核"

TRUSTED_MODULES = ("builtins", "types", "collections", "torch", "d2l")  # classes a proxy may claim to be
SEND_SECONDS = 10  # a request the kernel's connection does not take within this long: the kernel is lost
DRAIN_SECONDS, DRAIN_MESSAGES = 1.0, 2000  # at most this much of what the kernel published is dropped after `start`
MAX_RETURNED = 10_000  # tensors a cell's `returned` keeps; a cell that gets more is not diagnosed
MAX_RETURNED_BYTES = 16 << 20  # bytes of tensors a cell's `returned` keeps; a cell that gets more keeps none
LOOPBACK = "tcp://127.0.0.1:*"  # where a kernel without a sandbox binds the probe's socket: a free local port


class CheckedChannel(AsyncZMQSocketChannel):
    """The grader's shell or IOPub channel to a kernel. What the kernel sends itself is a well-formed message signed
    with its session's key; student code that writes to the kernel's sockets (a thread writing while the kernel
    does interleaves their frames) delivers messages that are malformed, unsigned, replayed or badly signed, on
    which jupyter_client's Session.deserialize raises and nbclient would stop the run. Such a message is dropped
    and counted in `dropped`, which the execute step counts against the running cell (run/execution.py); the
    wait for a good one keeps its deadline."""

    def __init__(self, socket: zmq.asyncio.Socket, session: MessageSession, loop: Any = None) -> None:
        super().__init__(socket, session, loop)
        self.dropped = 0

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:  # type: ignore[override]  # as its base
        """The next readable message; Empty after `timeout` seconds (None: wait for one)."""
        assert self.socket is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0, int(1000 * (deadline - time.monotonic())))
            if not await self.socket.poll(left):
                raise Empty
            msg = self._readable(await self.socket.recv_multipart())
            if msg is not None:
                return msg
            if deadline is not None and time.monotonic() >= deadline:
                raise Empty  # a flood of unreadable messages does not hold the wait past its deadline

    def _readable(self, frames: list[bytes]) -> dict[str, Any] | None:
        """The message in `frames` with the parts nbclient reads (a dict header, parent header and content, a
        string type), or None, counted in `dropped`."""
        try:
            _, parts = self.session.feed_identities(frames)
            msg = self.session.deserialize(parts)
        except Exception:  # noqa: BLE001 - anything deserialize raises on frames it cannot read or verify
            msg = None
        if msg is None or not isinstance(msg.get("msg_type"), str) or not all(
                isinstance(msg.get(part), dict) for part in ("header", "parent_header", "content")):
            self.dropped += 1
            return None
        return msg


class BoundedClient(AsyncKernelClient):
    """The grader's client of a student's kernel. The probe refuses to send a reply over `wire.MAX_REPLY`; a
    message larger than that anyway (a kernel whose probe was changed) is refused by zmq as it arrives, before it
    is read into memory, and the connection is dropped: a request that then cannot be sent means the kernel is
    lost. Shell and IOPub drop what is not a readable message of the kernel's (`CheckedChannel`); the stdin and
    control channels, which the grader never reads, are not connected, so nothing the kernel sends there reaches
    the grader."""

    shell_channel_class = Type(CheckedChannel)
    iopub_channel_class = Type(CheckedChannel)

    def start_channels(self, shell: bool = True, iopub: bool = True, stdin: bool = False, hb: bool = True,
                       control: bool = False) -> None:
        super().start_channels(shell, iopub, stdin, hb, control)

    def dropped(self) -> dict[str, int]:
        """{channel: messages dropped so far}."""
        return {"shell": self.shell_channel.dropped, "IOPub": self.iopub_channel.dropped}

    def _context_default(self) -> zmq.asyncio.Context:
        self._created_context = True
        context = zmq.asyncio.Context()
        context.setsockopt(zmq.MAXMSGSIZE, wire.MAX_REPLY + (1 << 20))  # the sockets the channels open later
        context.setsockopt(zmq.SNDTIMEO, SEND_SECONDS * 1000)
        return context

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        """jupyter_client's wait (kernel_info until it is answered and IOPub delivers), without its last step,
        which waits for IOPub to stay quiet for 0.2 s: a fixed 0.2 s per kernel. What IOPub still holds is
        dropped by the probe's `start`, before any cell runs, and nbclient reads only a cell's own output."""
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                msg = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                pass
            else:
                if msg["msg_type"] == "kernel_info_reply":
                    try:
                        await self.iopub_channel.get_msg(timeout=0.2)  # IOPub is connected
                    except Empty:
                        pass
                    else:
                        self._handle_kernel_info_reply(msg)
                        return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")


class StudentError(Exception):
    """The student's code raised an exception in the kernel."""

    def __init__(self, ename: str, evalue: str, where: object = None) -> None:
        super().__init__(f"{ename}: {evalue}")
        self.ename, self.evalue, self.where = ename, evalue, where


class KernelTimeout(Exception):
    """The kernel took longer than the cell's time limit and answered the interrupt."""


class KernelLost(Exception):
    """The kernel died or ignored the interrupt; the submission cannot be graded further."""


class Remote:
    """A proxy to an object in the student's kernel."""

    __slots__ = ("_session", "_id", "_info")
    _session: "Session"
    _id: int
    _info: dict[str, Any]

    def __init__(self, session: "Session", info: dict[str, Any]) -> None:
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_id", info["id"])
        object.__setattr__(self, "_info", info)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._session.request("getattr", ref=self._id, name=name)

    def __setattr__(self, name: str, value: object) -> None:
        raise TypeError("测试不能直接给学生代码中的对象设置属性：请改用 in_kernel 中的函数")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._session.request("call", ref=self._id, args=self._session.encode(args),
                                     kwargs=self._session.encode(kwargs))

    def __deepcopy__(self, memo: object) -> Any:
        return self._session.request("deepcopy", ref=self._id)

    @property  # type: ignore[misc]  # a proxy claims the class of the object it stands for (isinstance)
    def __class__(self) -> type:
        return self._session.local_class(self._info)

    def __repr__(self) -> str:
        return f"<学生代码中的 {self._info['type']}>"


@functools.lru_cache(maxsize=1024)
def forbidden_names(source: str) -> tuple[str, ...]:
    """The names test cell `source` forbids: the string literals its `forbid(…)` calls give after the first
    argument (a test cell is the same for every student: it is parsed once)."""
    tree = syntax.python_source(source)
    names: list[str] = []
    for node in ast.walk(tree) if tree is not None else ():
        function = node.func if isinstance(node, ast.Call) else None
        if (isinstance(function, ast.Name) and function.id == "forbid"
                or isinstance(function, ast.Attribute) and function.attr == "forbid"):
            assert isinstance(node, ast.Call)
            names.extend(arg.value for arg in node.args[1:] if isinstance(arg, ast.Constant)
                         and isinstance(arg.value, str) and not arg.value.endswith("="))
    return tuple(names)


class Session:
    """One notebook's connection to its kernel, used by the test cells while they run."""

    def __init__(self, send: Callable[[dict[str, Any]], Any], imports: Iterable[str] = ()) -> None:
        self._send = send  # dict request -> dict reply (see Channel.request)
        self.imports = list(imports)  # sources of the notebook's import cells: the grader's code runs with them
        self.aliases = syntax.module_aliases([t for t in map(syntax.python_source, self.imports) if t])
        self.cell_source = ""
        self.cell: str | None = None  # grade_id of the running test cell
        # (answer, names as the test wrote them, reason) while the running cell forbids some
        self.forbidden: tuple[str, list[str], str] | None = None
        # test grade_id -> the answer (solution grade_id) its forbid() is about
        self.answer_of: dict[str | None, str] = {}
        self.forbidden_answers: dict[str, str] = {}  # answer -> message, once a test found a forbidden call for it
        self.witness_key: bytes | None = None  # this kernel's key for its witness of forbidden calls (witness.py)
        self.witness_count = 0  # the number of the last command sent to the witness
        self.watched: set[str] = set()  # the paths the witness put a report in at start (`watched_paths`)
        self.watching = 0  # the number of the witness's `watch` command of the running cell (-1: not answered then)
        # what the kernel sent that the protocol does not allow (it does not, unless tampered)
        self.tampered: list[str] = []
        self._classes: dict[tuple[str, tuple[str, ...]], type] = {}
        # (ref, name) -> the kernel's reply to that getattr, until any other request is sent
        self._reads: dict[tuple[Any, Any], Any] = {}
        self.returned: list[Any] = []  # the tensors and numbers the student's code gave the running cell, in order
        self.returned_bytes = 0  # their size; over `MAX_RETURNED_BYTES`, `returned` is emptied for the cell
        # id(obj) -> (obj, the kernel's id for its copy): an object of the grader's sent by value is copied into the
        # kernel once per cell; passed again, the kernel's copy is passed, as the student's own code would pass the
        # same object (a module given to every decode step is not unpickled at every step)
        self._kept: dict[int, tuple[object, int]] = {}

    # --- requests -----------------------------------------------------------------------------------------
    def request(self, op: str, **args: Any) -> Any:
        try:
            return self._request(op, args)
        except wire.WireError as exc:
            self.tampered.append(f"{self.cell}：{exc}")
            raise

    def _request(self, op: str, args: dict[str, Any]) -> Any:
        if op != "getattr":
            self._reads.clear()
            reply = self._send({"op": op, "args": args})
        else:  # each read costs a round trip to the kernel; a read repeated before anything else ran is answered here
            key = (args["ref"], args["name"])
            if key not in self._reads:
                self._reads[key] = self._send({"op": op, "args": args})
            reply = self._reads[key]
        if type(reply) is not dict or set(reply) not in ({"ok"}, {"error"}):
            raise wire.WireError("内核的回复格式无法识别")
        if "error" in reply:
            error = reply["error"] if type(reply["error"]) is dict else {}
            ename, evalue = str(error.get("ename", "Error"))[:100], str(error.get("evalue", ""))[:2000]
            if ename == "AttributeError":
                raise AttributeError(evalue)
            raise StudentError(ename, evalue, error.get("where"))
        if op in ("names", "begin"):
            return reply["ok"]
        value = wire.decode_from_kernel(reply["ok"], self._proxy)
        if op in ("call", "getattr") and len(self.returned) < MAX_RETURNED \
                and self.returned_bytes <= MAX_RETURNED_BYTES:
            tensors = _tensors(value)
            self.returned_bytes += sum(t.nbytes for t in tensors)
            if self.returned_bytes <= MAX_RETURNED_BYTES:
                self.returned += tensors
            else:
                self.returned = []
        return value

    def encode(self, obj: object) -> object:
        kept = dict(self._kept)
        try:
            return wire.encode_for_kernel(obj, self._ref_of, self._keep)
        except BaseException:
            self._kept = kept  # nothing of it reaches the kernel
            raise

    def _ref_of(self, obj: object) -> int | None:
        if type(obj) is Remote:
            return obj._id
        kept = self._kept.get(id(obj))  # held there, so no other object can have its id
        return kept[1] if kept is not None else None

    def _keep(self, obj: object) -> int:
        number = -1 - len(self._kept)  # the kernel's own ids are positive
        self._kept[id(obj)] = (obj, number)
        return number

    def _proxy(self, info: dict[str, Any]) -> "Remote":
        if type(info.get("id")) is not int or not isinstance(info.get("type"), str) \
                or not isinstance(info.get("mro"), list):
            raise wire.WireError("内核返回的对象引用无法识别")
        return Remote(self, info)

    def local_class(self, info: dict[str, Any]) -> type:
        """The class a proxy claims: a torch/d2l class by name, else a stand-in subclass of the first one."""
        key = (info["type"], tuple(map(str, info["mro"])))
        if key not in self._classes:
            found = [c for c in map(_trusted_class, info["mro"]) if c is not None]
            base = found[0] if found else object
            exact = found and _trusted_class(info["type"]) is base
            self._classes[key] = base if exact else type(info["type"].rsplit(":", 1)[-1], (base,), {})
        return self._classes[key]

    # --- what test cells use --------------------------------------------------------------------------------
    def resolve(self, names: Iterable[str]) -> dict[str, object]:
        """{name: value or proxy} for the student's names that exist in the kernel."""
        names = set(names)
        return self._found(self.request("names", names=sorted(names)), names)

    def _found(self, found: object, names: set[str]) -> dict[str, object]:
        """{name: value or proxy} from the kernel's answer to a lookup of `names`."""
        try:
            if type(found) is not dict:
                raise wire.WireError("内核的回复格式无法识别")
            return {name: wire.decode_from_kernel(value, self._proxy) for name, value in found.items()
                    if name in names and value != {"$missing": True}}
        except wire.WireError as exc:
            self.tampered.append(f"{self.cell}：{exc}")
            raise

    def define(self, definition: Callable[..., Any] | type) -> Any:
        return self.request("define", source=self._source_of(definition), name=definition.__name__,
                            imports=self.imports)

    def swap_in(self, references: dict[str, Callable[..., Any] | type]) -> None:
        self.request("swap_in", references={name: [self._source_of(fn), fn.__name__]
                                            for name, fn in references.items()}, imports=self.imports)

    def swap_out(self, names: Iterable[str]) -> None:
        self.request("swap_out", names=list(names))

    def forbid(self, answer: str, names: Iterable[str], reason: str) -> None:
        """Have the kernel's witness watch, for the rest of the test cell, every call of `names`: dotted names as
        the test writes them with the notebook's imports (`F.scaled_dot_product_attention`, `nn.MultiheadAttention`),
        or keywords (`enable_gqa=`). Forbidding an operation forbids each of its entry points (`OPERATIONS`). A
        call found by any test about `answer` fails every test about it (`forbidden_answers`). Without a witness
        (no key: not a grading kernel) nothing is watched."""
        names = list(names)
        self.forbidden = (answer, names, reason)
        self.answer_of[self.cell] = answer
        if self.witness_key is None:
            return
        pairs, keywords = [], []
        for name in names:
            if name.endswith("="):
                keywords.append(name[:-1])
                continue
            for path in self._paths(name):
                if path != witness.SDPA and path not in self.watched:
                    raise ValueError(f"forbid({name!r}): the grader did not find this name in the test cells when "
                                     "the kernel started: write forbid's names as string literals")
                pairs.append(f"{name}{witness.PAIR}{path}")
        number, box = self._witness("watch", witness.ITEM.join(pairs), witness.ITEM.join(keywords))
        self.watching = number
        if self._seen(number, box) is None:  # the watch did not begin now: no report of this cell is believed
            self.watching = -1

    def _paths(self, name: str) -> list[str]:
        """The dotted paths the witness watches for a name a test forbids: the name with the notebook's imports
        (`nn.MultiheadAttention` → `torch.nn.MultiheadAttention`) and the operation's other entry points
        (`OPERATIONS`); `witness.SDPA` for scaled dot-product attention (all of the dispatcher's)."""
        root, _, rest = name.partition(".")
        path = ".".join([self.aliases.get(root, root), *([rest] if rest else [])])
        return [witness.SDPA if "scaled_dot_product" in entry else entry for entry in [path, *OPERATIONS.get(path, ())]]

    def watched_paths(self, sources: Iterable[str]) -> list[str]:
        """The paths of every function the test cells in `sources` may forbid (the names their `forbid(…)` calls
        give as string literals): the kernel's witness puts a report first in each when it starts (witness.py)."""
        found = {path for source in sources for name in forbidden_names(source)
                 for path in self._paths(name) if path != witness.SDPA}
        self.watched = found
        return sorted(found)

    def _witness(self, op: str, *fields: str) -> tuple[int, Any]:
        """Send a signed, numbered command to the kernel's witness; returns (its number, the kernel's answer)."""
        assert self.witness_key is not None
        self.witness_count += 1
        text = witness.SEP.join([str(self.witness_count), op, *fields, *[""] * (2 - len(fields))])
        mac = hmac.new(self.witness_key, text.encode(), "sha256").hexdigest()
        return self.witness_count, self.request("witness", text=text, mac=mac)

    def _report(self) -> dict[str, Any] | None:
        """{label: [function, line] or None} of the forbidden calls the witness saw in this cell, or None when the
        witness was stopped or tampered with (see `_seen`)."""
        return self._seen(*self._witness("report"))

    def _seen(self, number: int, box: Any) -> dict[str, Any] | None:
        """The calls seen, from the witness's answer to command `number`; None when the answer is missing,
        unsigned, replayed or about another watch than the running cell's."""
        if type(box) is not list or len(box) != 2 or not all(type(x) is str for x in box) or not hmac.compare_digest(
                hmac.new(self.witness_key or b"", box[0].encode(), "sha256").hexdigest(), box[1]):
            return None
        try:
            found, watching, used, _ = syntax.literal(box[0])
        except (ValueError, SyntaxError, TypeError):
            return None
        return dict(used) if (found, watching) == (number, self.watching) else None

    def forbidden_message(self) -> str:
        """The verdict's message when the student's code called a forbidden function in this cell, else ''. A
        witness that does not report truly holds the submission for review (`tampered`)."""
        if self.forbidden is None or self.witness_key is None:
            return ""
        answer, names, reason = self.forbidden
        used = self._report()
        if used is None:
            self.tampered.append(f"{self.cell}：{WITNESS_LOST}")
            return ""
        found = [name.rstrip("=") for name in names if name in used]
        if found and answer not in self.forbidden_answers:
            where = used.get(next(name for name in names if name in used))
            place = (f"（在 {str(where[0])[:80]} 中，第 {where[1]} 行）" if isinstance(where, list) and len(where) == 2
                     and type(where[1]) is int else "")
            self.forbidden_answers[answer] = f"本题不允许用 {'、'.join(found)} 作答{place}{('：' + reason) if reason else ''}"
        return self.forbidden_answers.get(answer, "")

    def start_cell(self, grade_id: str, names: Iterable[str] = ()) -> dict[str, object]:
        """Begin test cell `grade_id` with one request: the kernel drops its references of the last cell, seeds its
        random generators from the cell's id (so that the student's modules start from the same weights in every
        run) and looks up the student's `names`. Returns {name: value or proxy} of those that exist."""
        self.cell, self.returned, self.returned_bytes = grade_id, [], 0
        names = set(names)
        return self._found(self.request("begin", seed=zlib.crc32(grade_id.encode()), names=sorted(names)), names)

    def end_cell(self) -> None:
        """Forget the proxies and the forbidden names of this cell (the kernel drops its references as the next
        cell begins)."""
        if self.forbidden is not None and self.witness_key is not None:
            self._witness("end")
        self.forbidden = None
        self._kept.clear()

    def _source_of(self, definition: object) -> str:
        """The source of a function or class defined at the top level of the running test cell."""
        name = getattr(definition, "__name__", None)
        source = _definitions(self.cell_source).get(name) if isinstance(name, str) else None
        if source is None:
            raise TypeError(f"{name!r} 不是测试单元格顶层定义的函数或类")
        return source


@functools.lru_cache(maxsize=256)  # a test cell is the same for every student
def _definitions(cell_source: str) -> dict[str, str]:
    """{name: source} of the functions and classes defined at the top level of a cell (read-only)."""
    lines, found = cell_source.splitlines(), dict[str, str]()
    for node in syntax.parse(cell_source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            found.setdefault(node.name, "\n".join(lines[start - 1:node.end_lineno]))
    return found


def _tensors(value: object) -> list[Any]:
    """The tensors and numbers (as tensors) in a decoded reply, inside tuples, lists and dicts, in order."""
    if isinstance(value, torch.Tensor):
        return [value.detach()]
    if type(value) in (int, float):
        return [torch.tensor(value)]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _trusted_class(qualified: object) -> type | None:
    """A class named `module:qualname` from an already imported trusted module, or None."""
    module_name, _, qualname = str(qualified).partition(":")
    if module_name.split(".")[0] not in TRUSTED_MODULES or module_name not in sys.modules:
        return None
    obj: object = sys.modules[module_name]
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) else None


def probe_expression(request: dict[str, Any]) -> str:
    return f"__import__('{probe.__name__}', fromlist=['serve']).serve({wire.dumps(request)!r})"


def serve_here(request: dict[str, Any]) -> Any:
    """What `Channel.request` does, served by the probe in this process (see `probe.serving`): the request and
    the reply travel as the same JSON text, without Jupyter's messages."""
    return json.loads(probe.serve(wire.dumps(request))._repr_mimebundle_()[probe.MIME])


async def start(kc: AsyncKernelClient, km: AsyncKernelManager, request: dict[str, Any], timeout: float,
                grace: float) -> dict[str, Any]:
    """Send a kernel's first request (`start`), a user expression of an execute_request; it binds the probe's
    own socket, through which a `Channel` sends every later request. Returns the decoded reply dict.

    Raises KernelTimeout when the kernel answered the interrupt sent after `timeout` seconds, and KernelLost
    when it died or ignored the interrupt for `grace` more seconds.
    """
    try:
        msg_id = kc.execute("", silent=True, store_history=False, user_expressions={"r": probe_expression(request)})
    except zmq.Again:
        raise KernelLost("connection") from None
    reply = await _shell_reply(kc, km, msg_id, timeout)
    if reply is None:
        await km.interrupt_kernel()
        if await _shell_reply(kc, km, msg_id, grace) is None:
            raise KernelLost("ignored the interrupt")
        await _drain(kc)
        raise KernelTimeout()
    await _drain(kc)
    return _result(reply.get("content", {}).get("user_expressions", {}).get("r", {}))


class Channel:
    """The grader's connection to the probe's own socket in a kernel (`probe.op_start`), for every request after
    `start`: a request is [number, signature, JSON] and its reply [number, JSON], without Jupyter's messages,
    and the wait blocks, costing no turns of an event loop. A reply over `wire.MAX_REPLY` (from a kernel whose
    probe was changed) is refused by zmq as it arrives, and the connection dropped: the kernel is lost. Used by
    one thread."""

    def __init__(self, address: str, session: MessageSession, km: AsyncKernelManager, grace: float) -> None:
        self.session, self.km, self.grace = session, km, grace
        self.sent = 0
        self.socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        for option, value in ((zmq.LINGER, 0), (zmq.MAXMSGSIZE, wire.MAX_REPLY + (1 << 20)),
                              (zmq.SNDTIMEO, SEND_SECONDS * 1000), (zmq.RECONNECT_IVL, -1)):
            self.socket.setsockopt(option, value)
        self.dropped: zmq.Socket[bytes] = self.socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        self.socket.connect(address)
        self.poller = zmq.Poller()
        self.poller.register(self.socket, zmq.POLLIN)
        self.poller.register(self.dropped, zmq.POLLIN)

    def request(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request; return the decoded reply dict. Raises as `start` does."""
        self.sent += 1
        number, body = str(self.sent).encode(), wire.dumps(request).encode(errors="replace")
        try:
            self.socket.send_multipart([number, self.session.sign([body]), body])
        except zmq.Again:
            raise KernelLost("connection") from None
        reply = self._reply(number, timeout)
        if reply is None:
            run_sync(self.km.interrupt_kernel)()
            if self._reply(number, self.grace) is None:
                raise KernelLost("ignored the interrupt")
            raise KernelTimeout()
        try:
            text = reply.decode()
        except UnicodeDecodeError as exc:
            raise wire.WireError("内核的回复不是合法的 JSON") from exc
        del reply  # a reply may be tens of MB: its bytes are not kept while its JSON is parsed
        return _loads(text)

    def _reply(self, number: bytes, timeout: float) -> bytes | None:
        """The reply to request `number` (a late reply to an earlier one is dropped), or None after `timeout`."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            ready = dict(self.poller.poll(max(10, int(1000 * min(1.0, left)))))
            if self.dropped in ready:
                raise KernelLost("connection" if run_sync(self.km.is_alive)() else "died")
            if self.socket not in ready:
                if not run_sync(self.km.is_alive)():
                    raise KernelLost("died")
                continue
            frames = self.socket.recv_multipart()
            if len(frames) != 2:
                raise wire.WireError("内核的回复格式无法识别")
            if frames[0] == number:
                reply: bytes = frames[1]
                return reply
        return None

    def close(self) -> None:
        self.socket.disable_monitor()
        self.dropped.close()
        self.socket.close()


def _result(result: object) -> dict[str, Any]:
    """The reply dict in the answer to `start`, IPython's reply to a user expression."""
    if not isinstance(result, dict):
        raise wire.WireError("内核的回复缺失或过大")
    if result.get("status") != "ok":
        return {"error": {"ename": result.get("ename", "Error"), "evalue": result.get("evalue", "")}}
    data = result.get("data")
    text = data.get(probe.MIME) if isinstance(data, dict) else None
    if not isinstance(text, str):
        raise wire.WireError("内核的回复缺失或过大")
    return _loads(text)


def _loads(text: str) -> dict[str, Any]:
    if len(text) > wire.MAX_REPLY:
        raise wire.WireError("内核的回复缺失或过大")
    try:
        loaded: dict[str, Any] = json.loads(text)
        return loaded
    except (ValueError, RecursionError) as exc:
        raise wire.WireError("内核的回复不是合法的 JSON") from exc


async def _shell_reply(kc: AsyncKernelClient, km: AsyncKernelManager, msg_id: str,
                       timeout: float) -> dict[str, Any] | None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            msg = await kc.get_shell_msg(timeout=min(1.0, max(0.01, deadline - loop.time())))
        except Empty:
            if not await km.is_alive():
                raise KernelLost("died") from None
            continue
        if msg.get("parent_header", {}).get("msg_id") == msg_id:
            return msg
    return None


async def _drain(kc: AsyncKernelClient) -> None:
    """Drop what the kernel published while serving `start` (it is not part of any cell's output), within a
    deadline and a count: a kernel that never stops printing cannot hold the grader here; what is left is read
    with the next cell's output, whose size is capped."""
    loop = asyncio.get_running_loop()
    end = loop.time() + DRAIN_SECONDS
    for _ in range(DRAIN_MESSAGES):
        if loop.time() > end:
            return
        try:
            await kc.iopub_channel.get_msg(timeout=0)
        except Empty:
            return
