"""`python -m attncourse.student`: set up a student's JupyterLab for this course.

It keeps nbgrader's Validate button and turns off the instructor's tools (Formgrader, Create Assignment, the
course and assignment lists), shows JupyterLab in Chinese (the language pack is installed with the course's
package), and lets Validate show a test's message in full (nbgrader cuts every line at 90 characters, which is
about 35 Chinese characters). All in this Python environment only.
"""
import json
import subprocess
import sys
from pathlib import Path

INSTRUCTOR_PLUGINS = ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                      "@jupyter/nbgrader:course-list", "@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:menu"]
INSTRUCTOR_SERVER_EXTENSIONS = ["nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.assignment_list",
                                "nbgrader.server_extensions.course_list"]


def still_on() -> list[str]:
    """The instructor's tools this environment's JupyterLab would still show."""
    etc = Path(sys.prefix) / "etc" / "jupyter"
    try:
        disabled = json.loads((etc / "labconfig" / "page_config.json").read_text())["disabledExtensions"]
    except (OSError, ValueError, KeyError):
        disabled = {}
    server: dict[str, bool] = {}
    for path in sorted((etc / "jupyter_server_config.d").glob("*.json")):
        server.update(json.loads(path.read_text()).get("ServerApp", {}).get("jpserver_extensions", {}))
    return ([p for p in INSTRUCTOR_PLUGINS if not disabled.get(p)]
            + [e for e in INSTRUCTOR_SERVER_EXTENSIONS if server.get(e, False)])


VALIDATE_WIDTH = 240  # characters of a line Validate shows; the course's messages fit (tests/test_release.py)
LOCALE = {"@jupyterlab/translation-extension:plugin": {"locale": "zh_CN"}}


def write_settings(prefix: str | Path | None = None) -> None:
    """nbgrader's Validator line width and JupyterLab's language, in this environment's configuration."""
    prefix = Path(prefix or sys.prefix)
    config = prefix / "etc" / "jupyter" / "nbgrader_config.py"
    line = f"c.Validator.width = {VALIDATE_WIDTH}  # attncourse: show test messages in full"
    text = config.read_text(encoding="utf-8") if config.exists() else "c = get_config()  # noqa: F821\n"
    if line not in text:
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(text.rstrip("\n") + "\n" + line + "\n", encoding="utf-8")
    overrides = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    settings = json.loads(overrides.read_text(encoding="utf-8")) if overrides.exists() else {}
    overrides.parent.mkdir(parents=True, exist_ok=True)
    overrides.write_text(json.dumps({**settings, **LOCALE}, ensure_ascii=False, indent=1), encoding="utf-8")


def main() -> None:
    run = [sys.executable, "-m"]
    subprocess.run([*run, "jupyterlab.labextensions", "disable", "--level=sys_prefix", *INSTRUCTOR_PLUGINS],
                   check=True)
    for extension in INSTRUCTOR_SERVER_EXTENSIONS:
        subprocess.run([*run, "jupyter_server.extension.serverextension", "disable", "--sys-prefix", extension],
                       check=True)
    left = still_on()
    if left:
        sys.exit(f"未能关闭：{'、'.join(left)}（是否已在这个环境中安装了作业包里的 attncourse？）")
    write_settings()
    print("已完成：JupyterLab 中保留 Validate（验证）按钮，关闭了教师用的评分工具，界面改为中文。")


if __name__ == "__main__":
    main()
