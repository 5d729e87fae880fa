"""The grader's side of a test cell and the data on the wire, in seconds: a fake `send` serves the kernel's side
(`probe`) in this process, over the same JSON the real kernel sends."""
import asyncio
import base64
import json

import nbformat
import pytest
import torch
from jupyter_client.manager import start_new_async_kernel

from attncourse.grading.cells import grade_id, is_answer_cell, is_test_cell
from attncourse.grading.protocol import probe, remote, trusted, wire
from attncourse.grading.protocol.remote import Remote, Session
from attncourse.grading.syntax import only_imports

from conftest import ROOT, UNITS


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


# --- a whole test cell, against a kernel served in this process ------------------------------------------------

class FakeKernel:
    """The kernel's side of the protocol, in this process, over a namespace of the test's (`remote.serve_here`)."""

    def __init__(self, monkeypatch, namespace):
        self.namespace = namespace
        monkeypatch.setattr(probe, "_user_ns", lambda: self.namespace)

    def send(self, request):
        return remote.serve_here(request)


def _unit(name):
    nb = nbformat.read(next((ROOT / "source" / name).glob("*.ipynb")), as_version=4)
    imports = [c.source for c in nb.cells if c.cell_type == "code" and not is_answer_cell(c) and not is_test_cell(c)
               and only_imports(c.source)]
    return nb, imports


def _grade(monkeypatch, nb, imports, replace=None, tests="test_masked_softmax", extra=()):
    """{test grade_id: Verdict} of the tests whose ids start with `tests`, for the source's answers (with
    `replace`d cells, then the `extra` cells) run as the student's code."""
    student = {"__builtins__": __builtins__}
    for source in imports:
        exec(source, student)
    for cell in nb.cells:
        if is_answer_cell(cell) and cell.cell_type == "code":
            source = (replace or {}).get(grade_id(cell), cell.source)
            exec(compile(source, grade_id(cell), "exec"), student)
    for index, source in enumerate(extra):
        exec(compile(source, f"extra{index}", "exec"), student)
    kernel = FakeKernel(monkeypatch, student)
    session = Session(kernel.send, imports)
    namespace = trusted.base_namespace(imports)
    return {grade_id(c): trusted.run_test_cell(c.source, grade_id(c), namespace, session)
            for c in nb.cells if is_test_cell(c) and grade_id(c).startswith(tests)}


def test_the_reference_passes_and_a_mistake_fails_through_the_protocol(monkeypatch):
    nb, imports = _unit("a1_scoring")
    verdicts = _grade(monkeypatch, nb, imports)
    assert verdicts and all(v.passed for v in verdicts.values()), {k: v.message for k, v in verdicts.items()}
    wrong = _grade(monkeypatch, nb, imports, {"masked_softmax": "def masked_softmax(X, valid_lens):\n"
                                                                "    return torch.softmax(X, dim=-1)\n"})
    assert verdicts.keys() == wrong.keys() and not any(v.passed for v in wrong.values())


def test_what_the_kernel_sends_is_data_or_a_proxy(monkeypatch):
    kernel = FakeKernel(monkeypatch, {"x": torch.arange(3), "f": lambda a: a * 2, "n": 3})
    session = Session(kernel.send)
    found = session.resolve({"x", "f", "n", "missing"})
    assert set(found) == {"x", "f", "n"} and type(found["x"]) is torch.Tensor and found["n"] == 3
    assert type(found["f"]) is Remote and torch.equal(found["f"](torch.ones(2)), torch.full((2,), 2.0))


def test_what_a_cell_keeps_for_its_diagnosis_is_bounded_in_bytes(monkeypatch):
    """A student's function that returns megabytes at every call leaves the cell nothing to diagnose with, rather
    than the grader holding every reply until the end of the notebook."""
    kernel = FakeKernel(monkeypatch, {"small": lambda: torch.ones(4), "big": lambda: torch.zeros(1 << 16)})
    monkeypatch.setattr(remote, "MAX_RETURNED_BYTES", 600_000)
    session = Session(kernel.send)
    found = session.resolve({"small", "big"})
    found["small"](), found["big"](), found["big"]()
    assert len(session.returned) == 3 and session.returned_bytes == 16 + (2 << 18)
    found["big"]()
    assert session.returned == [] and session.returned_bytes > remote.MAX_RETURNED_BYTES
    found["small"]()
    assert session.returned == [], "nothing more is kept in this cell"


def test_a_repeated_read_costs_one_round_trip_until_anything_else_runs(monkeypatch):
    """Reads between two calls into the student's code are answered once; each answer is decoded afresh (a test
    may change what it got), and a call, which may change the student's objects, makes the next read go out."""
    kernel = FakeKernel(monkeypatch, {"net": torch.nn.Linear(2, 2)})
    sent = []
    session = Session(lambda request: sent.append(request["op"]) or kernel.send(request))
    net = session.resolve({"net"})["net"]
    first, again = net.weight, net.weight
    assert sent == ["names", "getattr"] and torch.equal(first, again) and first is not again
    with torch.no_grad():
        first.zero_()
    assert not torch.equal(net.weight, first), "a read answered here must not share what an earlier one returned"
    net.weight.shape, net.bias  # noqa: B018 - each read is a request
    assert sent == ["names", "getattr", "getattr"]
    net.zero_grad()  # a call: the student's objects may have changed
    net.weight  # noqa: B018 - the read is a request
    assert sent == ["names", "getattr", "getattr", "getattr", "call", "getattr"]


def test_an_object_passed_again_in_a_cell_is_the_kernels_copy_made_the_first_time(monkeypatch):
    """A module the test builds and passes to every decode step is copied into the kernel once per cell, and each
    later step gets that copy, as the student's own loop would pass one module: what the student's code changed in
    it stays; the next cell starts with a fresh copy."""
    kernel = FakeKernel(monkeypatch, {"mark": lambda m: setattr(m, "seen", getattr(m, "seen", 0) + 1) or m.seen})
    sent = []
    session = Session(lambda request: sent.append(json.dumps(request)) or kernel.send(request))
    mark, module = session.resolve({"mark"})["mark"], torch.nn.Linear(2, 2)
    assert [mark(module), mark(module), mark(torch.nn.Linear(2, 2))] == [1, 2, 1]
    assert [text.count('"$kept"') for text in sent[1:]] == [1, 0, 1] and not hasattr(module, "seen")
    session.end_cell()
    assert session.resolve({"mark"})["mark"](module) == 1


def test_the_graders_references_do_not_see_the_students_rebound_names(monkeypatch):
    """An honest student who later names a figure `F` or shadows `max` keeps the points of the questions whose
    tests swap in the grader's references (they run with the notebook's imports and the real builtins)."""
    nb, imports = _unit("a1_scoring")
    extra = ["import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nF = plt.figure()\n"
             "max = min = any = all = abs = None\ntorch_version = torch.__version__"]
    verdicts = _grade(monkeypatch, nb, imports, tests="test_dot_product", extra=extra)
    assert len(verdicts) == 2 and all(v.passed for v in verdicts.values()), {k: v.message for k, v in verdicts.items()}


def test_the_witness_is_told_every_python_function_the_tests_may_forbid():
    """At kernel start the grader names, with the notebook's imports, the Python functions the test cells' forbid()
    calls name (SDPA is the dispatcher's, keywords are not functions); a name it did not find then is refused."""
    session = Session(lambda request: {}, ["from d2l import torch as d2l\nfrom torch import nn\n"
                                           "import torch.nn.functional as F"])
    tests = ["from attncourse.checks import forbid\nforbid('a', 'd2l.masked_softmax', 'F.scaled_dot_product_attention')",
             "import attncourse.checks as c\nc.forbid('b', 'nn.MultiheadAttention', 'enable_gqa=', reason='x')",
             "x = 1", "not python ("]
    assert session.watched_paths(tests) == sorted([
        "d2l.torch.masked_softmax", *remote.OPERATIONS["torch.nn.functional.scaled_dot_product_attention"],
        "torch.nn.MultiheadAttention", "torch.nn.functional.multi_head_attention_forward"])
    session.witness_key = b"k" * 32
    with pytest.raises(ValueError, match="d2l.DotProductAttention"):
        session.forbid("a", ["d2l.DotProductAttention"], "")
    sources = [c.source for unit in UNITS for c in _unit(unit)[0].cells if is_test_cell(c)]
    assert {"d2l.torch.masked_softmax", "d2l.torch.MultiHeadAttention", "torch.nn.MultiheadAttention"} <= set(
        Session(lambda request: {}, _unit("a1_scoring")[1]).watched_paths(sources))


@pytest.mark.slow  # a real kernel
def test_a_kernel_stops_sending_a_cells_output_past_its_limit():
    """What a flood costs the grader: past the limit one note, then nothing, for the cell's own prints, a
    thread's and display() calls; the next cell has its own budget. An exception's message of megabytes leaves
    the kernel cut, in the error's output and in the cell's reply."""
    async def run(kc, code):
        msg_id = kc.execute(code)
        text, sent = "", []
        while True:
            msg = await kc.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                text += msg["content"]["text"]
            elif msg["msg_type"] in ("display_data", "error"):
                sent.append(msg["content"])
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                reply = await kc.get_shell_msg(timeout=30)
                return text, sent, reply["content"]

    async def main():
        km, kc = await start_new_async_kernel(kernel_name="python3")
        try:
            assert "ok" in await remote.start(kc, km, {"op": "start", "args": {"chars": 1000, "address": remote.LOOPBACK, "witness_key": "00" * 32, "watched": []}},
                                              30, 3)
            flood = await run(kc, "import threading\nt = threading.Thread(target=lambda: [print('x' * 99) "
                                  "for _ in range(100)])\nt.start()\nfor _ in range(10_000): print('y' * 99)\nt.join()")
            after = await run(kc, "print('z' * 500)")
            shown = await run(kc, "from IPython.display import HTML, display\nfor _ in range(100): display(HTML('w' * 99))")
            raised = await run(kc, "raise ValueError('长' * 100_000)")
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)
        return flood[0], after[0], shown, raised

    flood, after, shown, raised = asyncio.run(main())
    assert 1000 <= len(flood) < 1100 and flood.endswith("……（输出过多，其余部分未发送）\n")
    assert after == "z" * 500 + "\n"
    assert 1 <= len(shown[1]) <= 10 and "显示的内容过多" in shown[0]
    (error,), reply = raised[1], raised[2]
    assert error["ename"] == reply["ename"] == "ValueError" and reply["status"] == "error"
    assert all(len(e["evalue"]) < 1100 and len("".join(e["traceback"])) < 1200 for e in (error, reply))


@pytest.mark.slow  # a real kernel
def test_a_request_that_runs_past_its_time_is_interrupted_and_the_kernel_goes_on():
    """The probe's own socket (after `start`, through a `Channel`): an exception whose message is not valid
    UTF-8 comes back as an error; a call into the student's code that loops is interrupted after its timeout
    and answers; the kernel then serves the next request."""
    async def start():
        km, kc = await start_new_async_kernel(kernel_name="python3")
        reply = await remote.start(kc, km, {"op": "start", "args": {"chars": 1000, "address": remote.LOOPBACK, "witness_key": "00" * 32, "watched": []}}, 30, 3)
        await kc.execute_interactive("def spin():\n    while True:\n        pass\nanswer = 41\n"
                                     "def odd():\n    raise ValueError('\\ud800')", timeout=30)
        return km, kc, reply["ok"]

    km, kc, address = asyncio.run(start())
    channel = remote.Channel(address, kc.session, km, 10)
    try:
        names = channel.request({"op": "names", "args": {"names": ["spin", "answer", "odd"]}}, 30)
        assert names["ok"]["answer"] == 41
        odd = channel.request({"op": "call", "args": {"ref": names["ok"]["odd"]["$ref"]["id"], "args": [],
                                                      "kwargs": {"$dict": {}}}}, 30)
        assert odd["error"]["ename"] == "ValueError" and odd["error"]["evalue"] == "?"  # a lone surrogate
        with pytest.raises(remote.KernelTimeout):
            channel.request({"op": "call", "args": {"ref": names["ok"]["spin"]["$ref"]["id"], "args": [],
                                                    "kwargs": {"$dict": {}}}}, 1)
        assert channel.request({"op": "names", "args": {"names": ["answer"]}}, 30) == {"ok": {"answer": 41}}
    finally:
        channel.close()
        kc.stop_channels()
        asyncio.run(km.shutdown_kernel(now=True))


def test_what_the_kernel_sends_that_is_not_a_readable_message_is_dropped_and_counted():
    """The grader's shell and IOPub channels (`remote.CheckedChannel`): frames without a delimiter, unsigned,
    badly signed, not JSON, replayed, or signed but without the parts nbclient reads are dropped and counted; the
    messages between them arrive in order, and a wait that finds only unreadable frames keeps its deadline."""
    import time
    from queue import Empty

    import zmq
    import zmq.asyncio
    from jupyter_client.session import Session as MessageSession

    session = MessageSession(key=b"kernel-key")
    forged = MessageSession(key=b"other-key")
    context = zmq.asyncio.Context()

    def signed(parent=b"{}", content=b"{}"):
        parts = [session.pack(session.msg_header("stream")), parent, b"{}", content]
        return [b"<IDS|MSG>", session.sign(parts), *parts]

    replayed = session.serialize(session.msg("stream", {"name": "stdout", "text": "x"}))
    unreadable = [[b"garbage"], [b"<IDS|MSG>", b"", b"{}", b"{}", b"{}", b"{}"],
                  forged.serialize(forged.msg("stream", {})), [b"<IDS|MSG>", b"0" * 64, b"{not json"],
                  signed(parent=b"[]"), signed(content=b"[1]"), replayed]

    async def main():
        receiver, sender = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
        receiver.bind("inproc://checked")
        sender.connect("inproc://checked")
        channel = remote.CheckedChannel(receiver, session)
        try:
            for frames in [replayed, *unreadable, session.serialize(session.msg("status", {"execution_state": "idle"}))]:
                await sender.send_multipart(frames)
            first, second = await channel.get_msg(timeout=5), await channel.get_msg(timeout=5)
            for frames in unreadable[:4]:
                await sender.send_multipart(frames)
            start = time.monotonic()
            with pytest.raises(Empty):
                await channel.get_msg(timeout=0.5)
            return first, second, channel.dropped, time.monotonic() - start
        finally:
            receiver.close()
            sender.close()

    first, second, dropped, waited = asyncio.run(main())
    context.term()
    assert (first["msg_type"], second["msg_type"]) == ("stream", "status")
    assert dropped == len(unreadable) + 4 and 0.4 < waited < 3
