"""Forbidden shortcuts: the functions an exercise text forbids (`d2l.masked_softmax`,
`F.scaled_dot_product_attention`, `enable_gqa=`), found in one answer and in the student's code that answer calls.
"""
import ast

from ..syntax import dotted, module_aliases, python_source


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
