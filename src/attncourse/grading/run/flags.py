"""Review flags: constructs in a submission's code that honest answers to these exercises never need and that
could reach the grading machinery, read from the syntax tree (comments and strings never count).

Importing `os` or `sys`, `exec`/`eval`, dunder attributes, writing to attributes of torch, Tensor subclasses,
IPython hooks and most magics are flagged. A flagged submission keeps its autograded score only after a person
has looked at it.
"""
import ast

from ..syntax import dotted, module_aliases, python_source, root_name

ALLOWED_MODULES = {
    "math", "cmath", "torch", "numpy", "d2l", "attncourse", "collections", "itertools", "functools", "operator",
    "typing", "dataclasses", "random", "time", "timeit", "logging", "warnings", "matplotlib", "seaborn", "pandas",
    "copy", "string", "re", "statistics", "fractions", "decimal", "enum", "abc", "contextlib", "types", "pprint"}
DENIED_MODULES = ("attncourse.grading", "torch.utils.cpp_extension", "torch.cuda.nvtx")
ALLOWED_SUBMODULES = ("IPython.display",)  # display(HTML(...)) is ordinary notebook code
ALLOWED_MAGICS = {"matplotlib", "time", "timeit"}
ALLOWED_DUNDERS = {"__init__", "__name__", "__class__", "__doc__", "__qualname__", "__module__", "__call__",
                   "__len__", "__getitem__"}
FLAGGED_BUILTINS = {"exec", "eval", "compile", "__import__", "open", "globals", "locals", "vars", "breakpoint",
                    "get_ipython"}
TORCH_HOOKS = {"__torch_function__", "__torch_dispatch__"}



def _magic(call):
    """The magic or shell command a `get_ipython().run_line_magic(...)` style call runs, else None."""
    func = call.func
    if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name) and func.value.func.id == "get_ipython"):
        if func.attr in ("run_line_magic", "run_cell_magic") and call.args and isinstance(call.args[0], ast.Constant):
            return f"%{call.args[0].value}"
        return "!" if func.attr in ("system", "getoutput") else f"get_ipython().{func.attr}"
    return None


def _constructs(tree, aliases):
    """Human-readable descriptions of the flagged constructs in one tree."""
    found, magic_calls = [], set()
    module_roots = {name for name, path in aliases.items() if path.split(".")[0] in ALLOWED_MODULES}
    assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [f"{node.module or '.' * node.level}.{a.name}" for a in node.names])
            for name in names:
                top = name.lstrip(".").split(".")[0]
                if node.level if isinstance(node, ast.ImportFrom) else False:
                    found.append(f"相对导入 {name}")
                elif name.startswith(ALLOWED_SUBMODULES):
                    continue
                elif top not in ALLOWED_MODULES:
                    found.append(f"导入了 {top} 模块")
                elif name.startswith(DENIED_MODULES) or any(p.startswith("_") for p in name.split(".")):
                    found.append(f"导入了 {name}")
        elif isinstance(node, ast.Call):
            magic = _magic(node)
            if magic:
                magic_calls.add(id(node.func.value.func))
            if magic == "!":
                found.append("执行了 shell 命令（!）")
            elif magic and magic.lstrip("%") not in ALLOWED_MAGICS:
                found.append(f"使用了 IPython 魔法命令或接口 {magic}")
            elif isinstance(node.func, ast.Name):
                name = node.func.id
                if name in ("setattr", "delattr") and not (node.args and isinstance(node.args[0], ast.Name)
                                                             and node.args[0].id == "self"):
                    found.append(f"调用了 {name}")
                elif name in ("getattr", "hasattr") and not (
                        len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                        and isinstance(node.args[1].value, str) and not node.args[1].value.startswith("__")):
                    found.append(f"用非常量属性名调用了 {name}")
        elif isinstance(node, ast.Name) and node.id in FLAGGED_BUILTINS and node.id not in assigned \
                and id(node) not in magic_calls:
            found.append(f"使用了 {node.id}")
        elif isinstance(node, ast.Name) and node.id.startswith("__") and node.id.endswith("__") \
                and node.id not in ALLOWED_DUNDERS:
            found.append(f"使用了 {node.id}")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in ALLOWED_DUNDERS:
                found.append(f"访问了特殊属性 {node.attr}")
            elif node.attr.startswith("_") and not node.attr.startswith("__") and root_name(node) in module_roots:
                found.append(f"访问了内部属性 {dotted(node, aliases) or node.attr}")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete, ast.For, ast.With)):
            targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete))
                       else [i.optional_vars for i in node.items if i.optional_vars] if isinstance(node, ast.With)
                       else [node.target])
            for target in targets:
                for t in ast.walk(target):
                    if isinstance(t, (ast.Attribute, ast.Subscript)) and root_name(t) in module_roots:
                        found.append(f"改写了 {aliases[root_name(t)]} 中的内容")
                        break
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                path = dotted(base, aliases) or ""
                if path.endswith(("Tensor", "Parameter")) and path.startswith("torch"):
                    found.append(f"定义了 {path} 的子类 {node.name}")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in TORCH_HOOKS:
            found.append(f"定义了 {node.name}")
    return list(dict.fromkeys(found))


def review_flags(cells, imports=()):
    """["<cell>：<construct>", ...] for the student's code cells `cells` = [(label, source)].

    `imports` are the sources of the notebook's given import cells (for `F`, `nn`, `d2l`).
    """
    trees = [(label, python_source(source)) for label, source in cells]
    aliases = module_aliases([t for t in (*map(python_source, imports), *(t for _, t in trees)) if t])
    return [f"{label}：{what}" for label, tree in trees if tree is not None for what in _constructs(tree, aliases)]
