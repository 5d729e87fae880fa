"""grading/protocol/bytecode.py: the report put first in a watched function's code, on the library functions a test
may forbid and on every function of torch.nn.functional, torch.nn and d2l (in a process of its own: the functions
are changed in place)."""
import subprocess
import sys
import textwrap

import pytest

# run in a fresh interpreter: prints "ok" when every check holds
CHECK = textwrap.dedent('''
    import collections, inspect, sys, traceback, types
    import torch, torch.nn as nn, torch.nn.functional as F
    from d2l import torch as d2l
    from attncourse.grading.protocol import bytecode

    functions = []
    for module in (F, nn, d2l):
        for value in list(vars(module).values()):
            for f in ([value] if isinstance(value, types.FunctionType)
                      else list(vars(value).values()) if isinstance(value, type) else []):
                f = getattr(f, "__func__", f)
                if isinstance(f, types.FunctionType) and f not in functions:
                    functions.append(f)
    assert len(functions) > 500, len(functions)

    # the tables, written again unchanged, give back what they had
    for f in functions:
        code = f.__code__
        assert bytecode.exception_table(code, 1 << 30, 0) == code.co_exceptiontable, code.co_qualname
        again = code.replace(co_linetable=bytecode.location_table(code.co_firstlineno, list(code.co_positions())))
        assert list(again.co_positions()) == list(code.co_positions()), code.co_qualname

    source = inspect.getsource(d2l.masked_softmax)
    calls = collections.Counter()
    sys.addaudithook(lambda event, args: calls.update(args) if event == "test.call" else None)
    before = {f: list(f.__code__.co_positions()) for f in functions}
    for token, f in enumerate(functions):
        f.__code__ = bytecode.report_first(f.__code__, sys.audit, "test.call", token,
                                           first_line=1 if f is d2l.masked_softmax else None)
    # every instruction keeps its position (the inserted call aside)
    for f in functions:
        kept = [p for p in f.__code__.co_positions()]
        assert len(kept) == len(before[f]) + 12 and set(before[f]) <= set(kept), f.__qualname__

    # the library still works, and each call reports once, from any thread
    X, lens = torch.rand(2, 2, 4), torch.tensor([2, 3])
    expected = torch.softmax(X.masked_fill(torch.arange(4) >= lens[:, None, None], -1e6), dim=-1)
    assert torch.allclose(d2l.masked_softmax(X, lens), expected)
    q = torch.rand(2, 3, 8)
    mha = d2l.MultiHeadAttention(8, 2, 0.1)
    mha(q, q, q, torch.tensor([2, 3])).sum().backward()
    out, weights = nn.MultiheadAttention(8, 2)(q, q, q)
    out.sum().backward()
    nn.LSTM(4, 5)(torch.rand(3, 2, 4))
    nn.TransformerEncoderLayer(8, 2)(q)
    calls.clear()
    import threading
    worker = threading.Thread(target=d2l.masked_softmax, args=(X, lens))
    worker.start()
    worker.join()
    assert calls[functions.index(d2l.masked_softmax)] == 1, calls

    # a traceback still shows the library's line; inspect finds no source where `first_line` moved the start
    try:
        d2l.masked_softmax(torch.rand(2, 2), torch.tensor([1, 2, 3]))
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        assert any(fr.name == "_sequence_mask" and fr.line == "X[~mask] = value" for fr in frames), frames
    assert inspect.getsource(d2l.MultiHeadAttention.forward).lstrip().startswith("def forward")
    assert inspect.getsource(d2l.masked_softmax) != source
    assert str(inspect.signature(d2l.masked_softmax)) == "(X, valid_lens)"

    # generators report at their first step
    def numbers():
        yield 1
        yield 2
    numbers.__code__ = bytecode.report_first(numbers.__code__, sys.audit, "test.call", -1)
    calls.clear()
    assert list(numbers()) == [1, 2] and calls == {-1: 1}
    print("ok")
''')


@pytest.mark.slow
def test_a_report_first_keeps_every_library_function_working():
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip().endswith("ok"), done.stderr[-3000:]
