"""The grader's hands inside a student's kernel: look up names, call, read attributes, send results back.

The grader evaluates `serve('<request>')` as a user expression (see `remote.py`). Everything here runs in
the student's process and can be tampered with; that is fine, because the grader only reads plain data
from the reply and decides every verdict itself.
"""
import base64
import builtins
import copy
import itertools
import json
import os
import random
import sys
import traceback
import types

import torch

from . import wire

MIME = "application/vnd.attncourse.probe+json"
_MISSING = object()
_objects = {}  # reference id -> object the grader holds a proxy to
_ids = {}  # id(object) -> reference id, so that one object keeps one reference
_counter = itertools.count(1)
_swapped = {}  # name -> what the student's namespace held before `swap_in`


class Reply:
    """What the user expression evaluates to: IPython sends `_repr_mimebundle_` to the grader."""

    def __init__(self, payload):
        self.text = wire.dumps(payload)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {MIME: self.text}


def _user_ns():
    from IPython import get_ipython
    return get_ipython().user_ns


def _ref(obj):
    key = id(obj)
    if key not in _ids or _objects.get(_ids[key]) is not obj:
        _ids[key] = next(_counter)
        _objects[_ids[key]] = obj
    kind = type(obj)
    return {"$ref": {"id": _ids[key], "type": f"{kind.__module__}:{kind.__qualname__}",
                     "mro": [f"{c.__module__}:{c.__qualname__}" for c in kind.__mro__],
                     "class": isinstance(obj, type), "callable": callable(obj)}}


def encode(obj, depth=0):
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


def _where(exc):
    """The innermost frame of the student's own code in a traceback: [function, line number, line]."""
    libraries = tuple({sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(__file__))})
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(libraries)]
    return [frames[-1].name, frames[-1].lineno, (frames[-1].line or "")[:200]] if frames else None


def _args(data):
    return wire.decode_in_kernel(data, _objects)


def op_names(names):
    ns = _user_ns()
    return {name: encode(ns[name]) if name in ns else {"$missing": True} for name in names}


def op_getattr(ref, name):
    return encode(getattr(_objects[ref], name))


def op_call(ref, args, kwargs):
    return encode(_objects[ref](*_args(args), **_args(kwargs)))


def op_deepcopy(ref):
    return encode(copy.deepcopy(_objects[ref]))


def _define(source, name):
    namespace = dict(_user_ns())
    namespace["__builtins__"] = builtins
    exec(compile(source, f"<grader: {name}>", "exec"), namespace)  # noqa: S102 - the grader's own code
    return namespace[name]


def op_define(source, name):
    return encode(_define(source, name))


def op_swap_in(references):
    ns = _user_ns()
    for name, (source, defined) in references.items():
        _swapped.setdefault(name, ns.get(name, _MISSING))
        ns[name] = _define(source, defined)


def op_swap_out(names):
    ns = _user_ns()
    for name in names:
        saved = _swapped.pop(name, _MISSING)
        if saved is _MISSING:
            ns.pop(name, None)
        else:
            ns[name] = saved


def op_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy
        numpy.random.seed(seed)
    except ImportError:
        pass


def op_release():
    _objects.clear()
    _ids.clear()


OPS = {name[3:]: fn for name, fn in globals().items() if name.startswith("op_")}


def serve(request):
    """Run one request (base64 JSON: {"op": ..., "args": {...}}); the reply is {"ok": ...} or {"error": ...}."""
    try:
        message = json.loads(base64.b64decode(request))
        return Reply({"ok": OPS[message["op"]](**message["args"])})
    except BaseException as exc:  # the student's code may raise anything, KeyboardInterrupt included
        try:
            evalue = str(exc)[:2000]
        except Exception:  # an exception whose str() fails
            evalue = ""
        return Reply({"error": {"ename": type(exc).__name__, "evalue": evalue, "where": _where(exc)}})
