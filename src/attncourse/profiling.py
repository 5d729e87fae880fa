"""What an attention computation does at PyTorch's dispatcher, for deck 5 and the a5 tests: the largest tensor it
creates and the aten operators it calls (`TorchDispatchMode`, PyTorch's "Extending PyTorch", `__torch_dispatch__`).

Students may import these: every operator still runs unchanged, so they observe and never alter a computation
(a mode of a student's own, which could, is held for review by the grader, grading/run/flags.py). Deck 5 prints
their source on its slides, so they are written as the deck teaches, without type annotations (pyproject.toml).
"""
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class LargestTensor(TorchDispatchMode):
    """记下 with 块中新分配的最大张量（视图、原地修改不算）"""
    def __init__(self):
        super().__init__()
        self.elements, self.shape = 0, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        tensors = lambda x: [t for t in tree_leaves(x) if isinstance(t, torch.Tensor)]  # noqa: E731
        old = {t.untyped_storage().data_ptr() for t in tensors((args, kwargs))}
        for t in tensors(out):                   # 元素个数按背后的存储计
            n = t.untyped_storage().nbytes() // t.element_size()
            if t.untyped_storage().data_ptr() not in old and n > self.elements:
                self.elements, self.shape = n, tuple(t.shape)
        return out


class OpNames(TorchDispatchMode):
    """记下 with 块中调用的 aten 算子名"""
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.__name__)
        return func(*args, **(kwargs or {}))
