"""The data that passes between the grader and a student's kernel, as JSON.

Both directions carry numbers, strings, lists, tuples, dicts with string keys, `torch.device`, `torch.dtype`
and tensors (raw bytes, base64). What the kernel cannot send as data it sends as a reference (`$ref`) to an
object it keeps. Only the grader may send other objects, pickled: the kernel unpickles what the grader
trusts, the grader never unpickles anything.
"""
import base64
import json
import pickle
import re
from collections.abc import Callable
from typing import Any

import torch

DTYPES = {name: getattr(torch, name) for name in (
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    "uint8", "int8", "int16", "int32", "int64", "bool")}
DEVICE = re.compile(r"^(cpu|cuda(:\d{1,2})?)$")
MAX_DEPTH = 20
MAX_ITEMS = 100_000
MAX_NUMEL = 1 << 26
MAX_DIMS = 8
MAX_REPLY = 64 << 20  # characters of one reply from the kernel


class WireError(ValueError):
    """Data from the kernel that is not what this format allows."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# --- tensors ------------------------------------------------------------------------------------------------

def tensor_payload(t: torch.Tensor, param: bool = False, grad: dict[str, Any] | None = None) -> dict[str, Any]:
    t = t.detach().to("cpu").contiguous()
    data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    payload: dict[str, Any] = {"dtype": dtype_name(t.dtype), "shape": list(t.shape),
                               "data": base64.b64encode(data).decode()}
    if param:
        payload["param"] = True
    if grad is not None:
        payload["grad"] = grad
    return payload


def encode_tensor(t: torch.Tensor) -> dict[str, Any]:
    """`{"$tensor": ...}` for a tensor or parameter (with its gradient), on either side of the wire."""
    param = isinstance(t, torch.nn.Parameter)
    grad = tensor_payload(t.grad) if param and t.grad is not None else None
    payload = tensor_payload(t, param=param, grad=grad)
    payload["device"] = str(t.device)
    return {"$tensor": payload}


def tensor_from_payload(p: Any, device: str = "cpu") -> torch.Tensor:
    """A plain tensor (or nn.Parameter) built here from checked fields; `device` where it should live."""
    if not isinstance(p, dict) or p.get("dtype") not in DTYPES:
        raise WireError("张量的数据类型无法识别")
    shape = p.get("shape")
    if (not isinstance(shape, list) or len(shape) > MAX_DIMS
            or not all(type(n) is int and 0 <= n <= MAX_NUMEL for n in shape)):
        raise WireError("张量的形状无法识别")
    dtype = DTYPES[p["dtype"]]
    numel = 1
    for n in shape:
        numel *= n
    if numel > MAX_NUMEL:
        raise WireError("张量过大")
    try:
        data = base64.b64decode(p.get("data", ""), validate=True)
    except (ValueError, TypeError) as exc:
        raise WireError("张量数据已损坏") from exc
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(data) != numel * itemsize:
        raise WireError("张量数据的长度与形状不符")
    t = (torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype).reshape(shape) if numel
         else torch.empty(shape, dtype=dtype))
    t = t.to(device)
    if p.get("param") is True:
        t = torch.nn.Parameter(t, requires_grad=t.is_floating_point() or t.is_complex())
        if p.get("grad") is not None:
            t.grad = tensor_from_payload(p["grad"], device)
    return t


# --- grader -> kernel ---------------------------------------------------------------------------------------

def encode_for_kernel(obj: Any, ref_of: Callable[[Any], int | None],
                      keep: Callable[[Any], int] | None = None) -> object:
    """JSON for what the grader sends. `ref_of(obj)` gives the id of a kernel object standing for `obj` (a proxy's,
    or the copy of an object sent before), or None. An object sent by value (a pickle: a module, a namespace) is
    kept by the kernel under the id `keep(obj)` gives, when `keep` is given."""
    ref = ref_of(obj)
    if ref is not None:
        return {"$ref": ref}
    if obj is None or type(obj) in (bool, int, float, str):
        return obj
    if isinstance(obj, torch.Tensor):
        return encode_tensor(obj)
    if isinstance(obj, torch.device):
        return {"$device": str(obj)}
    if isinstance(obj, torch.dtype):
        return {"$dtype": dtype_name(obj)}
    if type(obj) in (list, tuple):
        items = [encode_for_kernel(x, ref_of, keep) for x in obj]
        return items if type(obj) is list else {"$tuple": items}
    if type(obj) is dict and all(type(k) is str for k in obj):
        return {"$dict": {k: encode_for_kernel(v, ref_of, keep) for k, v in obj.items()}}
    data = base64.b64encode(pickle.dumps(obj)).decode()
    return {"$pickle": data} if keep is None else {"$kept": [keep(obj), data]}


def decode_in_kernel(data: Any, objects: dict[int, Any]) -> object:
    """In the kernel: the grader's JSON back to objects; `objects` maps reference ids to kernel objects."""
    if isinstance(data, list):
        return [decode_in_kernel(x, objects) for x in data]
    if not isinstance(data, dict):
        return data
    (tag, value), = data.items()
    if tag == "$ref":
        return objects[value]
    if tag == "$tensor":
        return tensor_from_payload(value, value.get("device", "cpu"))
    if tag == "$device":
        return torch.device(value)
    if tag == "$dtype":
        return DTYPES[value]
    if tag == "$tuple":
        return tuple(decode_in_kernel(x, objects) for x in value)
    if tag == "$dict":
        return {k: decode_in_kernel(v, objects) for k, v in value.items()}
    if tag == "$pickle":
        return pickle.loads(base64.b64decode(value))
    if tag == "$kept":  # [the id the grader will refer to it by, the pickle]
        number, data = value
        objects[number] = pickle.loads(base64.b64decode(data))
        return objects[number]
    raise WireError(f"unknown tag {tag}")


def dumps(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, allow_nan=True)


# --- kernel -> grader ---------------------------------------------------------------------------------------

def decode_from_kernel(data: Any, make_ref: Callable[[dict[str, Any]], object], depth: int = 0) -> object:
    """Untrusted JSON from the kernel to plain objects built here. `make_ref(fields)` builds a proxy."""
    if depth > MAX_DEPTH:
        raise WireError("返回值嵌套过深")
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        if len(data) > MAX_ITEMS:
            raise WireError("返回的列表过长")
        return [decode_from_kernel(x, make_ref, depth + 1) for x in data]
    if type(data) is not dict or len(data) != 1:
        raise WireError("返回值的格式无法识别")
    (tag, value), = data.items()
    if tag == "$tensor":
        device = value.get("device", "cpu") if isinstance(value, dict) else "cpu"
        return tensor_from_payload(value, _local_device(device))
    if tag == "$tuple" and type(value) is list and len(value) <= MAX_ITEMS:
        return tuple(decode_from_kernel(x, make_ref, depth + 1) for x in value)
    if tag == "$dict" and type(value) is dict and len(value) <= MAX_ITEMS:
        return {str(k): decode_from_kernel(v, make_ref, depth + 1) for k, v in value.items()}
    if tag == "$device" and type(value) is str and DEVICE.match(value):
        return torch.device(_local_device(value))
    if tag == "$dtype" and value in DTYPES:
        return DTYPES[value]
    if tag == "$ref" and type(value) is dict:
        return make_ref(value)
    raise WireError("返回值的格式无法识别")


def _local_device(name: object) -> str:
    """The device a tensor from the kernel is rebuilt on: the same one when this process has it, else the CPU."""
    if not isinstance(name, str) or not DEVICE.match(name):
        return "cpu"
    if name.startswith("cuda"):
        index = int(name.split(":")[1]) if ":" in name else 0
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            return "cpu"
    return name
