"""The grader's peak memory for an honest class, and for the same class with one huge submission.

    .venv/bin/python benchmarks/memory.py [--students 6] [--jobs 2]

Each class is graded by `course grade`, `course feedback` and `course report` in a scratch course of its own, as an
instructor runs them; the grade command runs in a process whose peak resident memory (`ru_maxrss`: the grader,
which keeps the books) is printed with the ratio of the two, and so is the largest peak of its executors (forks of
the grader that run the test cells, run/executors.py; sampled every 0.05 s; kernels are children of the preloading
process and not counted). The huge submission is the reference answer that also
- returns a tensor of 44 MB (a reply just under `wire.MAX_REPLY`) from every function and module the tests call,
- raises, in a cell of its own, an exception whose message is 30 MB, and prints and `display()`s a flood,
- was saved with ten million lines of its own output (a 70 MB file, as JupyterLab saves a printing loop).
Prints the largest page published from each class (feedback, autograded notebook, report) and the huge one's
outcome. Not run in CI.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_output

from attncourse.config import find_root
from attncourse.grading.authoring.variants import answered, load_catalog, source_notebook
from attncourse.grading.course import copy_course_files, use_this_environment

UNIT = "a1_scoring"
HUGE_REPLIES = '''
import torch as _torch
_HUGE = _torch.zeros(11_000_000)  # 44 MB: a reply of 59 million characters
for _name, _value in list(globals().items()):
    if _name.startswith("_") or getattr(_value, "__module__", None) != "__main__":
        continue
    if isinstance(_value, type) and issubclass(_value, _torch.nn.Module):
        _value.forward = lambda self, *args, **kwargs: _HUGE
    elif type(_value).__name__ == "function":
        globals()[_name] = lambda *args, **kwargs: _HUGE
'''
LONG_EXCEPTION = 'raise ValueError("长" * 10_000_000)  # 30 MB of message\n'
FLOOD = '''from IPython.display import HTML, display
print("x" * 100_000_000)
for _ in range(20_000):
    display(HTML("<b>" + "刷" * 1000 + "</b>"))
'''
GRADE = """import json, resource, sys, threading, time
import psutil
from attncourse.cli import main
me = psutil.Process()
command, executor = me.cmdline(), [0]
def sample():  # the executors: forks of this process, with its command line
    while True:
        for child in me.children():
            try:
                if child.cmdline() == command:
                    executor[0] = max(executor[0], child.memory_info().rss)
            except psutil.Error:
                pass
        time.sleep(0.05)
threading.Thread(target=sample, daemon=True).start()
try:
    sys.exit(main(sys.argv[2:]))
finally:
    grader = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    json.dump({"grader": grader, "executor": executor[0]}, open(sys.argv[1], "w"))
"""


def huge(nb):
    """The reference answer `nb` made huge in the ways the module docstring lists."""
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source += "\n" + HUGE_REPLIES
    saved = new_code_cell("for _ in range(10_000_000):\n    print('x')")
    saved.outputs = [new_output("stream", name="stdout", text=["x\n"] * 10_000_000)]  # as JupyterLab saves it
    nb.cells += [saved, new_code_cell(LONG_EXCEPTION), new_code_cell(FLOOD)]
    return nb


def scratch_course(root, folder, students, with_huge):
    dest = copy_course_files(root, folder)
    course(dest, "release", UNIT)
    catalog = load_catalog(dest, UNIT)
    rel = nbformat.read(dest / "release" / UNIT / f"{catalog.NOTEBOOK}.ipynb", as_version=4)
    honest = answered(rel, source_notebook(dest, UNIT, catalog))
    names = [f"honest{i:02d}" for i in range(students)] + (["huge"] if with_huge else [])
    for name in names:
        target = dest / "submitted" / name / UNIT / f"{catalog.NOTEBOOK}.ipynb"
        target.parent.mkdir(parents=True)
        nb = huge(nbformat.from_dict(json.loads(json.dumps(honest)))) if name == "huge" else honest
        target.write_text(json.dumps(nb), encoding="utf-8")  # not nbformat.write: it would split the lines anew
    return dest


def course(root, *args):
    run = subprocess.run([sys.executable, "-m", "attncourse.cli", "--root", str(root), *args], capture_output=True,
                         text=True)
    if run.returncode:
        sys.exit(f"course {' '.join(args)} failed:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
    return run.stdout


def graded_peak_mb(root, jobs):
    """Peak resident memory of `course grade`: {"grader": MB, "executor": the largest executor's MB}, and its
    output."""
    with tempfile.NamedTemporaryFile("r") as out:
        run = subprocess.run([sys.executable, "-c", GRADE, out.name, "--root", str(root), "grade", UNIT,
                              "--jobs", str(jobs)], capture_output=True, text=True)
        if run.returncode:
            sys.exit(f"course grade failed:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
        return {name: size / 1e6 for name, size in json.load(out).items()}, run.stdout


def largest_pages(root):
    pages = {"feedback": list((root / "feedback").rglob("*.html")), "autograded": list((root / "autograded").rglob(
        "*.ipynb")), "report": list((root / "build").glob("report/*.html")) + list((root / "build").glob("*.csv"))}
    return {kind: max((p.stat().st_size for p in found), default=0) for kind, found in pages.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    root = find_root()
    use_this_environment()
    peaks, pages = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("honest", "with_huge"):
            dest = scratch_course(root, Path(tmp) / name, args.students, name == "with_huge")
            peaks[name], out = graded_peak_mb(dest, args.jobs)
            course(dest, "feedback")
            course(dest, "report")
            pages[name] = largest_pages(dest)
            if name == "with_huge":
                print("the huge submission:", *[line for line in out.splitlines() if " huge " in line], sep="\n  ")
    print(f"\n{args.students} honest submissions of {UNIT}, {args.jobs} jobs; peak memory of `course grade`:")
    print(f"  {'class':10s} {'grader':>10s} {'executor':>10s}")
    for name in peaks:
        sizes = ", ".join(f"{kind} {size / 1e6:.2f} MB" for kind, size in pages[name].items())
        print(f"  {name:10s} {peaks[name]['grader']:7.0f} MB {peaks[name]['executor']:7.0f} MB   largest pages: {sizes}")
    ratios = [peaks["with_huge"][p] / peaks["honest"][p] if peaks["honest"][p] else float("nan")
              for p in ("grader", "executor")]
    print(f"  {'ratio':10s} {ratios[0]:9.2f}x {ratios[1]:9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
