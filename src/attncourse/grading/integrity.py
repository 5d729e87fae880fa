"""What a submission's code may contain, read from its syntax tree (comments and strings never count).

`review_flags` lists constructs that honest answers to these exercises never need and that could reach the
grading machinery: importing `os` or `sys`, `exec`/`eval`, dunder attributes, writing to attributes of torch,
Tensor subclasses, IPython hooks and most magics. A flagged submission keeps its autograded score only after a
person has looked at it.

`forbidden_uses` finds the shortcuts an exercise text forbids (`d2l.masked_softmax`,
`F.scaled_dot_product_attention`, `enable_gqa=`) in one answer and in the student's code that answer calls.
"""
import ast
import threading

from IPython.core.inputtransformer2 import TransformerManager

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


_PARSING = threading.Lock()


def parse(source):
    """`ast.parse`, one thread at a time: CPython 3.11 can raise "AST constructor recursion depth mismatch"
    when threads build syntax trees at once (python/cpython#106905), and the grader runs several students."""
    with _PARSING:
        return ast.parse(source)


def python_source(source):
    """Cell source as plain Python (IPython magics become `get_ipython()` calls); None if it does not parse."""
    try:
        return parse(TransformerManager().transform_cell(source))
    except (SyntaxError, ValueError, TypeError):
        return None


def module_aliases(trees):
    """{local name: dotted module or object path} from every import in `trees`, plus names bound to them
    (`T = torch.Tensor`)."""
    aliases = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                path = dotted(node.value, aliases)
                if path:
                    aliases.setdefault(node.targets[0].id, path)
    return aliases


def dotted(node, aliases):
    """`torch.nn.functional.softmax` for `F.softmax` (or `getattr(F, "softmax")`) when the root is an alias."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str)):
            parts.append(node.args[1].value)
            node = node.args[0]
        else:
            break
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(parts)])
    return None


def _root_name(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


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
            elif node.attr.startswith("_") and not node.attr.startswith("__") and _root_name(node) in module_roots:
                found.append(f"访问了内部属性 {dotted(node, aliases) or node.attr}")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete, ast.For, ast.With)):
            targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete))
                       else [i.optional_vars for i in node.items if i.optional_vars] if isinstance(node, ast.With)
                       else [node.target])
            for target in targets:
                for t in ast.walk(target):
                    if isinstance(t, (ast.Attribute, ast.Subscript)) and _root_name(t) in module_roots:
                        found.append(f"改写了 {aliases[_root_name(t)]} 中的内容")
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


def _top_level_names(tree):
    names = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                for t in ast.walk(target):
                    if isinstance(t, ast.Name):
                        names.setdefault(t.id, []).append(node)
    return names


def forbidden_uses(cells, solution_cell, names, imports=(), judged_alone=()):
    """The entries of `names` used by the answer in cell `solution_cell` or by the student's code it calls.

    `cells` = [(grade_id or None, source)] of the student's code; a name ending in "=" is a keyword argument.
    `judged_alone`: names the test replaces with references (`using(...)`): other questions, judged by their
    own tests, so they are not followed (no cascade).
    """
    trees = [(gid, python_source(source)) for gid, source in cells]
    trees = [(gid, t) for gid, t in trees if t is not None]
    aliases = module_aliases([t for t in map(python_source, imports) if t] + [t for _, t in trees])
    for name in judged_alone:
        aliases.pop(name, None)
    defined = {}  # the student's top-level definitions the answer may call
    for _, tree in trees:
        for name, nodes in _top_level_names(tree).items():
            if name not in judged_alone:
                defined.setdefault(name, []).extend(nodes)
    todo = [t for gid, t in trees if gid == solution_cell]
    seen, used_paths, used_keywords = set(), set(), set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                todo.extend(defined.get(sub.id, []))
                if sub.id in aliases:
                    used_paths.add(aliases[sub.id])
            elif isinstance(sub, (ast.Attribute, ast.Call)):
                path = dotted(sub, aliases)
                if path:
                    used_paths.add(path)
            if isinstance(sub, ast.Call):
                used_keywords.update(k.arg for k in sub.keywords if k.arg)
    wanted_aliases = module_aliases([t for t in map(python_source, imports) if t])
    found = []
    for name in names:
        if name.endswith("="):
            if name[:-1] in used_keywords:
                found.append(name[:-1])
            continue
        root, _, rest = name.partition(".")
        path = f"{wanted_aliases.get(root, root)}.{rest}" if rest else wanted_aliases.get(root, root)
        if path in used_paths:
            found.append(name)
    return found
