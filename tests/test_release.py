"""Student versions: exactly nbgrader's output, and nothing secret in them or in the helper package."""
import ast
import re
from pathlib import Path

import nbformat
import pytest

from attncourse.grading.course import nbgrader_config
from attncourse.grading.release import student_version as release

from conftest import ROOT, copy_course


@pytest.mark.slow
def test_release_is_what_generate_assignment_makes(tmp_path, assignment_ids):
    course = copy_course(tmp_path)
    for aid in assignment_ids:
        release.generate(nbgrader_config(course), aid)
    for aid in assignment_ids:
        fresh = sorted(p.relative_to(course) for p in (course / "release" / aid).rglob("*") if p.is_file())
        shipped = sorted(p.relative_to(ROOT) for p in (ROOT / "release" / aid).rglob("*") if p.is_file())
        assert fresh == shipped, f"{aid}: files differ"
        for rel in fresh:
            assert (course / rel).read_text(encoding="utf-8") == (ROOT / rel).read_text(encoding="utf-8"), \
                f"{rel} is stale: run `course build` (or `nbgrader generate_assignment`)"


@pytest.mark.parametrize("aid", sorted(p.name for p in (ROOT / "source").iterdir() if p.is_dir()))
def test_release_leaks_nothing(aid):
    for src in (ROOT / "source" / aid).glob("*.ipynb"):
        release.check_release(src, ROOT / "release" / aid / src.name)
        nb = nbformat.read(ROOT / "release" / aid / src.name, as_version=4)
        stubs = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"]
        assert stubs and all("NotImplementedError" in c.source for c in stubs)


def test_leak_check_catches_a_leak(tmp_path, assignment_ids):
    """The check can fail: a student version with one solution line put back is refused."""
    aid = assignment_ids[0]
    src = next((ROOT / "source" / aid).glob("*.ipynb"))
    nb = nbformat.read(ROOT / "release" / aid / src.name, as_version=4)
    source = nbformat.read(src, as_version=4)
    solution = next(c for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")
                    and "BEGIN SOLUTION" in c.source and c.cell_type == "code")
    body = solution.source.split("BEGIN SOLUTION", 1)[1].split("END SOLUTION", 1)[0]
    line = max(body.splitlines(), key=len).strip()
    stub = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code")
    stub.source += "\n" + line
    leaked = tmp_path / src.name
    nbformat.write(nb, leaked)
    with pytest.raises(release.LeakError):
        release.check_release(src, leaked)


def _exercise_names():
    names = set()
    for src in (ROOT / "source").glob("*/*.ipynb"):
        for cell in nbformat.read(src, as_version=4).cells:
            if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
                try:
                    tree = ast.parse(cell.source)
                except SyntaxError:
                    continue
                names |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return names


def test_helper_package_solves_no_exercise():
    """Nothing a student imports from attncourse defines a function or class the exercises ask for."""
    names = _exercise_names()
    assert names
    offenders = []
    for path in (ROOT / "src" / "attncourse").rglob("*.py"):
        defined = re.findall(r"^\s*(?:def|class)\s+(\w+)", path.read_text(encoding="utf-8"), re.M)
        offenders += [f"{path.name}:{n}" for n in defined if n in names]
    assert not offenders, offenders


def _assert_messages(source):
    """The message texts of the `assert` statements of a cell (f-string values counted as 10 characters)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assert) and node.msg is not None:
            parts = [n for n in ast.walk(node.msg) if isinstance(n, (ast.Constant, ast.FormattedValue))]
            found.append("".join(n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else "x" * 10
                                 for n in parts if not isinstance(n, ast.Constant) or isinstance(n.value, str)))
    return found


@pytest.mark.parametrize("aid", sorted(p.name for p in (ROOT / "source").iterdir() if p.is_dir()))
def test_validate_shows_every_visible_message_in_full(aid):
    """nbgrader's Validate cuts each line at `Validator.width`; the student setup widens it, and every message a
    student can meet fits (an "AssertionError: " prefix and nbgrader's indent included)."""
    from attncourse.student import VALIDATE_WIDTH
    messages = [m for p in (ROOT / "release" / aid).glob("*.ipynb") for c in nbformat.read(p, as_version=4).cells
                if c.cell_type == "code" for m in _assert_messages(c.source)]
    assert messages
    long = [m for m in messages if len("    AssertionError: " + m) > VALIDATE_WIDTH - 3]
    assert not long, long


def test_the_student_setup_widens_validate_and_sets_chinese(tmp_path):
    import json

    from nbgrader.validator import Validator
    from traitlets.config.loader import PyFileConfigLoader

    from attncourse.student import VALIDATE_WIDTH, write_settings
    write_settings(tmp_path)
    write_settings(tmp_path)  # twice: nothing doubled
    config = PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path / "etc" / "jupyter")).load_config()
    validator = Validator(config=config)
    message = "    AssertionError: " + "有效长度之外的权重应为 0" * 8
    assert validator.width == VALIDATE_WIDTH and validator._indent(message).strip() == message.strip()
    assert (tmp_path / "etc" / "jupyter" / "nbgrader_config.py").read_text().count("Validator.width") == 1
    assert (tmp_path / "etc" / "jupyter" / "nbgrader_config.py").read_text().count("use_in_nbgrader()") == 1
    overrides = json.loads((tmp_path / "share" / "jupyter" / "lab" / "settings" / "overrides.json").read_text())
    assert overrides["@jupyterlab/translation-extension:plugin"]["locale"] == "zh_CN"
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    server = json.loads((tmp_path / "etc" / "jupyter" / "jupyter_server_config.d" / "attncourse.validate.json")
                        .read_text())
    assert server["ServerApp"]["jpserver_extensions"] == {"attncourse.validate": True}
    button = tmp_path / "share" / "jupyter" / "labextensions" / "attncourse-validate"
    assert json.loads((button / "package.json").read_text())["jupyterlab"]["_build"]["load"] == "static/remoteEntry.js"
    assert (button / "static" / "remoteEntry.js").is_file()


@pytest.mark.parametrize("figure", [None, "../../img/scoring-masking.svg"])
def test_the_bundle_readme_names_only_what_the_zip_holds(tmp_path, monkeypatch, figure):
    """Every path the hand-out's README names (its list of files and its commands) is in the zip, and everything
    in the zip is in that list: `img/` only when a notebook shows a figure."""
    import json
    import zipfile

    from attncourse.grading.release import bundle
    aid = "a1_scoring"
    root = copy_course(tmp_path / "course")
    (root / release.RECORD).write_text(json.dumps({aid: {}}))
    (root / "constraints.txt").write_bytes((ROOT / "constraints.txt").read_bytes())
    if figure:
        nb = nbformat.read(root / "release" / aid / "scoring.ipynb", as_version=4)
        next(c for c in nb.cells if c.cell_type == "markdown").source += f"\n\n![掩蔽]({figure})"
        nbformat.write(nb, root / "release" / aid / "scoring.ipynb")

    def wheel(_, out_dir):  # the real wheel takes a pip run; the README only needs its name
        path = Path(out_dir) / "attncourse-0.1.0-py3-none-any.whl"
        zipfile.ZipFile(path, "w").close()
        return path
    monkeypatch.setattr(bundle, "wheel", wheel)
    with zipfile.ZipFile(bundle.build(root, aid)) as z:
        held = {n.split("/", 1)[1] for n in z.namelist()}
        readme = z.read(f"{aid}/README.md").decode()
    folders = {n.split("/")[0] + "/" for n in held if "/" in n}
    named = {p for p in re.findall(r"`([^`\s]+)`", readme) + re.findall(r"\s(\S+\.(?:whl|txt|ipynb))\b", readme)
             if re.fullmatch(r"[\w.\-/]+", p) and not p.startswith((".venv", "-")) and ("/" in p or "." in p[1:])
             and re.search(r"[A-Za-z]", p)}
    assert f"{aid}/" in named and "constraints.txt" in named and f"{aid}/scoring.ipynb" in named, named
    missing = {p for p in named if p not in held and p not in folders}
    assert not missing, f"the README names what the zip lacks: {missing}"
    listed = set(re.findall(r"^- `([^`]+)`", readme, re.M))
    assert listed == {n for n in held if "/" not in n} | folders, (listed, held)
    assert ("img/" in listed) == bool(figure)
    assert "{" not in readme, "a placeholder was left"
