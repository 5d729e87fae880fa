"""`python -m attncourse.student`: set up a student's JupyterLab for this course.

It keeps nbgrader's Validate button and turns off the instructor's tools (Formgrader, Create Assignment, the
course and assignment lists), in this Python environment only.
"""
import json
import subprocess
import sys
from pathlib import Path

INSTRUCTOR_PLUGINS = ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                      "@jupyter/nbgrader:course-list", "@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:menu"]
INSTRUCTOR_SERVER_EXTENSIONS = ["nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.assignment_list",
                                "nbgrader.server_extensions.course_list"]


def still_on():
    """The instructor's tools this environment's JupyterLab would still show."""
    etc = Path(sys.prefix) / "etc" / "jupyter"
    try:
        disabled = json.loads((etc / "labconfig" / "page_config.json").read_text())["disabledExtensions"]
    except (OSError, ValueError, KeyError):
        disabled = {}
    server = {}
    for path in sorted((etc / "jupyter_server_config.d").glob("*.json")):
        server.update(json.loads(path.read_text()).get("ServerApp", {}).get("jpserver_extensions", {}))
    return ([p for p in INSTRUCTOR_PLUGINS if not disabled.get(p)]
            + [e for e in INSTRUCTOR_SERVER_EXTENSIONS if server.get(e, False)])


def main():
    run = [sys.executable, "-m"]
    subprocess.run([*run, "jupyterlab.labextensions", "disable", "--level=sys_prefix", *INSTRUCTOR_PLUGINS],
                   check=True)
    for extension in INSTRUCTOR_SERVER_EXTENSIONS:
        subprocess.run([*run, "jupyter_server.extension.serverextension", "disable", "--sys-prefix", extension],
                       check=True)
    left = still_on()
    if left:
        sys.exit(f"未能关闭：{'、'.join(left)}（是否已在这个环境中安装了作业包里的 attncourse？）")
    print("已完成：JupyterLab 中保留 Validate（验证）按钮，关闭了教师用的评分工具。")


if __name__ == "__main__":
    main()
