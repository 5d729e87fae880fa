"""Review flags, derived from the trust boundary, read from the syntax tree of the student's cells.

Verdicts are made in the grader (protocol/): a student's code decides only the values its own functions return,
which is its answer. So most code, however unusual, cannot change a score, and gets no flag. A construct is held
for a person only when it could plausibly reach what the grader relies on inside the kernel:
- the grading machinery loaded in the kernel: `attncourse.grading`, IPython's shell that carries the requests and
  replies (`get_ipython()` beyond magics, hooks, formatters), the forbidden-call watch (profile and trace
  hooks, torch function modes and torch internals), the builtins the probe uses;
- what the grader sends in (references, hidden inputs), found by introspection: frame walks, the garbage
  collector's object lists, `sys.modules`, function internals (`__code__`, `__globals__`, `__subclasses__`),
  ctypes;
- code that cannot be read: `exec`/`eval`/`compile`/`__import__` of a computed string, `%run` and friends,
  attribute names computed on a module, a module (or IPython extension) the notebook writes to disk and imports;
- without a sandbox only: files, processes, databases and the network (the kernel then runs as the grader).

A hold keeps back only the points it could affect: the test cells that run after the cell holding the construct.
What shows intent but cannot change a verdict (patching torch's functions, a Tensor subclass, looking for
NBGRADER_EXECUTION) is a note for the TA, never a hold.

Honest idioms that reach none of this, and so are never held (each class tested in tests/test_flags.py): memory
clean-up (`gc.collect()`, `torch.cuda.empty_cache()`), reading where the notebook runs (`sys.platform`,
`os.getcwd()`, `'google.colab' in sys.modules`), loading an extension (`%load_ext autoreload`; one the grader does
not have, like a module it does not have, fails its cell as any import error does),
progress bars, plotting setup, device selection, timing magics and the student's own self-checks.
"""
import ast
import importlib.util
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..model import Hold, HoldKind
from ..syntax import dotted, module_aliases, python_source

# Of the paths below: those that could capture what the grader sends in, and those that run code nobody can read;
# the rest reach the grading machinery.
INTROSPECTION_PATHS = ("sys.modules", "sys._getframe", "sys._current_frames", "gc.get_objects", "gc.get_referrers",
                       "gc.get_referents", "gc.garbage", "gc.callbacks", "ctypes", "cffi", "inspect.currentframe",
                       "inspect.stack", "inspect.trace", "inspect.getouterframes", "inspect.getinnerframes",
                       "traceback.walk_stack", "traceback.walk_tb", "marshal")
UNREADABLE_PATHS = ("importlib", "runpy", "code")
# Paths (after the last module name in a chain: `d2l.sys.modules` is `sys.modules`) that reach the grading
# machinery or what the grader sends in. A path matches an entry equal to it or below it.
HOLD_PATHS = (
    "attncourse.grading", "sys.modules", "sys._getframe", "sys._current_frames", "sys.setprofile", "sys.settrace",
    "sys.monitoring", "sys.displayhook", "sys.excepthook", "sys.meta_path", "sys.path_hooks", "sys.addaudithook",
    "sys.setrecursionlimit", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "gc.garbage", "gc.callbacks",
    "ctypes", "cffi", "importlib", "builtins", "_thread", "threading.setprofile",
    "threading.settrace", "inspect.currentframe", "inspect.stack", "inspect.trace", "inspect.getouterframes",
    "inspect.getinnerframes", "traceback.walk_stack", "traceback.walk_tb", "torch.overrides", "torch._",
    "torch.utils._", "torch.library", "IPython.core", "IPython.terminal", "IPython.kernel", "ipykernel",
    "jupyter_client", "zmq", "pdb", "bdb", "cProfile", "profile", "trace", "code", "runpy", "marshal")
# Modules whose names mark the start of a path when reached through another module's attribute.
MODULE_NAMES = {"sys", "gc", "inspect", "ctypes", "cffi", "importlib", "builtins", "_thread", "threading",
                "traceback", "os", "subprocess", "shutil", "socket", "sqlite3", "IPython", "ipykernel", "zmq",
                "jupyter_client", "attncourse", "torch", "pathlib", "pdb", "runpy", "marshal"}
# Paths that touch files, processes, databases or the network: harmless in the sandbox, held without one.
UNSANDBOXED_PATHS = (
    "os.remove", "os.unlink", "os.rmdir", "os.removedirs", "os.rename", "os.renames", "os.replace", "os.system",
    "os.popen", "os.kill", "os.killpg", "os.chmod", "os.chown", "os.symlink", "os.link", "os.fork", "os.forkpty",
    "os.exec", "os.spawn", "os.posix_spawn", "os.truncate", "os.setuid", "os.setgid", "os.open", "os.write",
    "shutil", "subprocess", "sqlite3", "socket", "urllib.request", "http.client", "requests", "multiprocessing",
    "signal.pthread_kill")
PATH_WRITES = {"write_text", "write_bytes", "unlink", "rename", "replace", "rmdir", "touch", "chmod", "symlink_to",
               "hardlink_to"}  # pathlib methods that change files
FRAME_ATTRIBUTES = {"f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "gi_frame", "cr_frame", "ag_frame"}
DANGEROUS_DUNDERS = {"__globals__", "__builtins__", "__subclasses__", "__bases__", "__mro__", "__code__",
                     "__closure__", "__traceback__", "__import__", "__loader__", "__spec__", "__self__"}
DYNAMIC_CODE = {"exec", "eval", "compile"}
# IPython: the shell methods that magics and `!` become; magics that run code nobody can read or install tracers
# are held, shell commands are held only without a sandbox, every other magic is ordinary notebook code.
SHELL_METHODS = {"run_line_magic", "run_cell_magic", "system", "getoutput"}
HELD_MAGICS = {"run", "prun", "pdb", "debug", "load", "loadpy", "edit", "rerun", "recall", "macro", "reload_ext",
               "unload_ext", "alias_magic", "xmode", "tb"}
SHELL_MAGICS = {"system", "sx", "bash", "sh", "script", "writefile", "!"}


@dataclass
class Finding:
    cell: int  # index of the cell in the notebook
    label: str  # how a person finds the cell ("单元格 masked_softmax", "单元格 #12")
    what: str  # the construct, in Chinese
    kind: HoldKind | None  # why it holds points (UNSANDBOXED: only without a sandbox); None for a note
    line: int = 0  # line of the cell's source (as the student wrote it, magics included), 0 if unknown

    def __str__(self) -> str:
        return str(self.hold())

    def hold(self) -> Hold:
        where = f"{self.label}{f' 第 {self.line} 行' if self.line else ''}"
        return Hold(self.kind or HoldKind.GRADER, self.what, where, self.cell, self.line)

    def holds(self, sandboxed: bool) -> bool:
        return self.kind is not None and (self.kind != HoldKind.UNSANDBOXED or not sandboxed)


def _matches(path: str | None, prefixes: Iterable[str]) -> bool:
    """Whether `path` is one of `prefixes` or below one; an entry ending in "_" matches private names below it
    (`torch._C`), never dunders (`torch.__version__`)."""
    if path is None:
        return False
    for p in prefixes:
        if p.endswith("_"):
            if path.startswith(p) and not path[len(p) - 1:].startswith("__"):
                return True
        elif path == p or path.startswith(p + "."):
            return True
    return False


@cache
def _installed(module: str) -> bool:
    """Whether a top-level module exists in the grader's environment (else the student wrote it: unreadable)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _canonical(path: str | None) -> str | None:
    """`sys.modules` for `d2l.torch.sys.modules`: the path from the last module name in the chain."""
    if path is None:
        return None
    parts = path.split(".")
    starts = [i for i, p in enumerate(parts) if p in MODULE_NAMES]
    return ".".join(parts[starts[-1]:]) if starts else path


def _constant(node: ast.AST) -> bool:
    """Whether a value is made of literals only (a setting, not a replacement function)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(map(_constant, node.elts))
    if isinstance(node, ast.Dict):
        return all(_constant(n) for n in [*node.keys, *node.values] if n is not None)
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand)
    return False


def _literal_string(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Reader(ast.NodeVisitor):
    """Collects (what, kind, line) for one cell's tree."""

    def __init__(self, aliases: dict[str, str], written: Collection[str | None]) -> None:
        self.aliases, self.written = aliases, written
        self.found: list[tuple[str, HoldKind | None, int]] = []
        self.line, self.frozen = 0, False

    def visit(self, node: ast.AST) -> Any:
        if not self.frozen and (line := getattr(node, "lineno", None)):
            self.line = line
        return super().visit(node)

    def add(self, what: str, kind: HoldKind | None) -> None:
        """Record a construct once; a shorter path of a chain already recorded (`torch._C` after
        `torch._C._nn`) adds nothing."""
        if not any(known.startswith(what) or what.startswith(known) for known, _, _ in self.found):
            self.found.append((what, kind, self.line))

    def path(self, node: ast.AST) -> str | None:
        return _canonical(dotted(node, self.aliases))

    def check_path(self, path: str | None, verb: str = "使用了") -> None:
        if _matches(path, HOLD_PATHS):
            kind = (HoldKind.INTROSPECTION if _matches(path, INTROSPECTION_PATHS) else
                    HoldKind.UNREADABLE if _matches(path, UNREADABLE_PATHS) else HoldKind.GRADER)
            self.add(f"{verb} {path}", kind)
        elif _matches(path, UNSANDBOXED_PATHS):
            self.add(f"{verb} {path}", HoldKind.UNSANDBOXED)

    # --- imports
    def imported(self, module: str, verb: str = "导入了") -> None:
        """A module the grader has is package code (held only on a path of HOLD_PATHS). One it does not have either
        fails to import, as any import error fails its cell, or is one the notebook writes to disk itself: code
        nobody can read, held."""
        top = module.split(".")[0]
        if not _installed(top):
            if top in self.written or None in self.written:  # a module the notebook writes to disk itself
                self.add(f"{verb}自己写到磁盘上的模块 {top}（看不到它的代码）", HoldKind.UNREADABLE)
        else:
            self.check_path(module, verb)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.imported(a.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.add(f"相对导入 {'.' * node.level}{node.module or ''}", HoldKind.UNREADABLE)
        elif node.module == "__future__":
            return
        else:
            self.check_path(node.module, "导入了")
            for a in node.names:
                self.imported(f"{node.module}.{a.name}")

    # --- names and attributes
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in DANGEROUS_DUNDERS:
            self.add(f"使用了 {node.id}", HoldKind.INTROSPECTION)
        elif node.id == "breakpoint" and isinstance(node.ctx, ast.Load):
            self.add("调用了 breakpoint（调试器）", HoldKind.GRADER)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in FRAME_ATTRIBUTES:
            self.add(f"访问了帧对象的 {node.attr}", HoldKind.INTROSPECTION)
        elif node.attr in DANGEROUS_DUNDERS:
            self.add(f"访问了特殊属性 {node.attr}", HoldKind.INTROSPECTION)
        else:
            self.check_path(self.path(node))
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        """`'google.colab' in sys.modules` only asks where the notebook runs: a membership test reaches nothing."""
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, (ast.In, ast.NotIn)) and self.path(right) == "sys.modules":
                self.visit(node.left)
                for other in node.comparators:
                    if other is not right:
                        self.visit(other)
                return
        self.generic_visit(node)

    # --- calls
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) \
                and isinstance(func.value.func, ast.Name) and func.value.func.id == "get_ipython":
            self._ipython(node, func.attr)
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                self.visit(arg)
            return
        name = func.id if isinstance(func, ast.Name) else None
        if name == "get_ipython":
            self.add("使用了 get_ipython()", HoldKind.GRADER)
        elif name in DYNAMIC_CODE or name == "__import__":
            text = _literal_string(node.args[0]) if node.args else None
            if text is None:
                self.add(f"用计算出来的字符串调用了 {name}（看不到运行的代码）", HoldKind.UNREADABLE)
            elif name == "__import__":
                self.imported(text)
            else:
                self._literal_code(text)
        elif name in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) >= 2:
            owner = self.path(node.args[0]) if not isinstance(node.args[0], ast.Name) or \
                node.args[0].id in self.aliases else None
            attr = _literal_string(node.args[1])
            if owner is not None and attr is None:
                self.add(f"用计算出来的属性名对模块 {owner} 调用了 {name}", HoldKind.UNREADABLE)
            elif owner is not None:
                self.check_path(f"{owner}.{attr}")
                if name in ("setattr", "delattr"):
                    self.add(f"改写了 {owner}.{attr}（只影响自己的内核）", None)
            if attr in FRAME_ATTRIBUTES or attr in DANGEROUS_DUNDERS:
                self.add(f"用 {name} 访问了 {attr}", HoldKind.INTROSPECTION)
        elif name == "open":
            mode = _literal_string(node.args[1]) if len(node.args) > 1 else next(
                (_literal_string(k.value) for k in node.keywords if k.arg == "mode"), "r")
            if mode is None or set(mode) & set("wax+"):
                self.add("用 open 写文件", HoldKind.UNSANDBOXED)
        elif isinstance(func, ast.Attribute) and func.attr in PATH_WRITES and self.path(func) is None:
            self.add(f"调用了 .{func.attr}() 改动文件", HoldKind.UNSANDBOXED)
        self.generic_visit(node)

    def _ipython(self, node: ast.Call, method: str) -> None:
        if method not in SHELL_METHODS:
            self.add(f"使用了 get_ipython().{method}", HoldKind.GRADER)
            return
        if method in ("system", "getoutput"):
            self.add("执行了 shell 命令（!）", HoldKind.UNSANDBOXED)
            return
        magic = _literal_string(node.args[0]) if node.args else None
        argument = _literal_string(node.args[1]) if len(node.args) > 1 else ""
        if magic is None:
            self.add("用计算出来的名字调用了 IPython 魔法命令", HoldKind.UNREADABLE)
        elif magic in HELD_MAGICS:
            self.add(f"使用了魔法命令 %{magic}", HoldKind.UNREADABLE)
        elif magic == "load_ext":  # an extension is a module, loaded as an import loads it
            if extension := (argument or "").strip():
                self.imported(extension, "用 %load_ext 加载了")
        elif magic in SHELL_MAGICS:
            self.add(f"使用了魔法命令 %{magic}（shell 或写文件）", HoldKind.UNSANDBOXED)
        elif magic in ("time", "timeit", "capture", "prun") and len(node.args) > 2:
            self._literal_code(_literal_string(node.args[2]) or "")

    def _literal_code(self, text: str) -> None:
        tree = python_source(text)
        if tree is None:
            self.add("exec/eval 的字符串无法解析", HoldKind.UNREADABLE)
            return
        frozen, self.frozen = self.frozen, True  # findings inside the string are on the line that runs it
        aliases, self.aliases = self.aliases, {**self.aliases, **module_aliases([tree])}  # the string's imports
        try:
            self.visit(tree)
        finally:
            self.frozen, self.aliases = frozen, aliases

    # --- writes and classes
    def _assigned(self, targets: Iterable[ast.expr], value: ast.expr | None) -> None:
        for target in targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Call) \
                    and getattr(target.value.func, "id", None) == "vars" and target.value.args \
                    and self.path(target.value.args[0]):
                self.add(f"通过 vars() 改写了 {self.path(target.value.args[0])}（只影响自己的内核）", None)
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute):
                    path = self.path(t)
                    if path and path.split(".")[0] in ("builtins",):
                        self.add(f"改写了 {path}", HoldKind.GRADER)
                    elif path and path.split(".")[0] in MODULE_NAMES | {"d2l", "numpy", "matplotlib"} \
                            and value is not None and not _constant(value):
                        self.add(f"改写了 {path}（只影响自己的内核）", None)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assigned(node.targets, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assigned([node.target], node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assigned([node.target], node.value)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            path = dotted(base, self.aliases) or ""
            if path.startswith("torch") and path.endswith(("Tensor", "Parameter")):
                self.add(f"定义了 {path} 的子类 {node.name}（比较在评分程序中进行，不受影响）", None)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if node.value == "NBGRADER_EXECUTION":
            self.add("检测是否正在评分（NBGRADER_EXECUTION）", None)


def _called(func: ast.AST) -> str | None:
    """The name a call calls: `join` for `os.path.join(...)`."""
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _module_stem(target: ast.AST) -> str | None:
    """The module a written file's name makes (`helper.py`, `os.path.join(folder, "helper.py")` → "helper"), ""
    for a name that is visibly no module (`f"{folder}/log.txt"`), None for a name computed at run time that may
    be a module (`name`, `"hel" + "per.py"`)."""
    whole = False  # whether `tail` is the file's whole name
    if (tail := _literal_string(target)) is not None:
        whole = True
    elif isinstance(target, ast.JoinedStr) and target.values:
        tail = _literal_string(target.values[-1])
        whole = tail is not None and "/" in tail
    elif isinstance(target, ast.BinOp) and isinstance(target.op, (ast.Add, ast.Div)):
        tail, whole = _literal_string(target.right), isinstance(target.op, ast.Div)
    elif isinstance(target, ast.Call) and target.args and _called(target.func) in ("join", "joinpath", "Path"):
        tail, whole = _literal_string(target.args[-1]), True
    if tail is None:
        return None
    if not tail.endswith(".py"):
        return ""
    name = tail[:-3].split("/")[-1]
    return name if whole and name else None


def written_modules(trees: Iterable[ast.AST]) -> set[str | None]:
    """Stems of the .py files the code writes (`open("helper.py", "w")`, `Path("helper.py").write_text(...)`,
    `%%writefile helper.py`); None in the set when a file that may be a module is written under a name computed
    at run time."""
    stems: set[str | None] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func, name = node.func, _called(node.func)
            if name == "open" and node.args:
                mode = _literal_string(node.args[1]) if len(node.args) > 1 else next(
                    (_literal_string(k.value) for k in node.keywords if k.arg == "mode"), "r")
                if mode is None or set(mode) & set("wax+"):
                    stems.add(_module_stem(node.args[0]))
            elif name in ("write_text", "write_bytes") and isinstance(func, ast.Attribute):
                stems.add(_module_stem(func.value))
            elif name == "run_cell_magic" and node.args and _literal_string(node.args[0]) == "writefile" \
                    and len(node.args) > 1:
                line = (_literal_string(node.args[1]) or "").split()
                stems.add(line[-1][:-3].split("/")[-1] if line and line[-1].endswith(".py") else "")
    return stems - {""}


def findings(cells: Iterable[tuple[int, str, str]], imports: Iterable[str] = ()) -> list[Finding]:
    """The flagged constructs of the student's code cells `cells` = [(index, label, source)], in order.

    `imports` are the sources of the notebook's given import cells (for `F`, `nn`, `d2l`)."""
    trees = [(index, label, python_source(source)) for index, label, source in cells]
    aliases = module_aliases([t for t in (*map(python_source, imports), *(t for _, _, t in trees)) if t])
    written = written_modules([t for _, _, t in trees if t is not None])
    found: list[Finding] = []
    for index, label, tree in trees:
        if tree is None:
            continue
        reader = _Reader(aliases, written)
        try:
            reader.visit(tree)
        except RecursionError:
            reader.add("代码嵌套过深，无法读取", HoldKind.UNREADABLE)
        found += [Finding(index, label, what, kind, line) for what, kind, line in reader.found]
    return found


def review_flags(cells: Sequence[tuple[str, str]], imports: Iterable[str] = (), sandboxed: bool = True) -> list[str]:
    """The holds among the findings of `cells` = [(label, source)], as "<cell> 第 n 行：<construct>"."""
    return [str(f) for f in findings([(i, label, src) for i, (label, src) in enumerate(cells)], imports)
            if f.holds(sandboxed)]
