"""`python -m attncourse.student`: set up a student's JupyterLab for this course.

It turns off the instructor's tools (Formgrader, Create Assignment, the course and assignment lists), replaces
nbgrader's English Validate button by the course's (attncourse.validate: a Chinese report per question, also
for `nbgrader validate`), shows JupyterLab in Chinese (the language pack is installed with the course's
package) without its news pop-up, and lets a traceback line be 240 characters wide (nbgrader cuts at 90, about
35 Chinese characters). All in this Python environment only. It prints one Chinese line; what the jupyter
commands it runs print (English, with terminal colours) is shown only if one of them fails.
"""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

INSTRUCTOR_PLUGINS = ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                      "@jupyter/nbgrader:course-list", "@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:menu",
                      "@jupyter/nbgrader:validate-assignment"]  # nbgrader's English Validate: the course's replaces it
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
LAB_SETTINGS = {
    "@jupyterlab/translation-extension:plugin": {"locale": "zh_CN"},
    # no "news" pop-up asking to fetch Jupyter's news feed, and no update check (both reach the internet)
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}
NBGRADER_LINES = [
    f"c.Validator.width = {VALIDATE_WIDTH}  # attncourse: show test messages in full",
    "import attncourse.validate  # attncourse: nbgrader validate reports per question, in Chinese",
    "attncourse.validate.use_in_nbgrader()",
]
VALIDATE_EXTENSION = Path(__file__).parent / "labextension" / "attncourse-validate"


def write_settings(prefix: str | Path | None = None) -> None:
    """nbgrader's validate command and Validator line width, JupyterLab's language and notifications, and the
    course's Validate button, in this environment's configuration."""
    prefix = Path(prefix or sys.prefix)
    config = prefix / "etc" / "jupyter" / "nbgrader_config.py"
    text = config.read_text(encoding="utf-8") if config.exists() else "c = get_config()  # noqa: F821\n"
    missing = [line for line in NBGRADER_LINES if line not in text.splitlines()]
    if missing:
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(text.rstrip("\n") + "\n" + "\n".join(missing) + "\n", encoding="utf-8")
    overrides = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    settings = json.loads(overrides.read_text(encoding="utf-8")) if overrides.exists() else {}
    overrides.parent.mkdir(parents=True, exist_ok=True)
    overrides.write_text(json.dumps({**settings, **LAB_SETTINGS}, ensure_ascii=False, indent=1), encoding="utf-8")
    server = prefix / "etc" / "jupyter" / "jupyter_server_config.d" / "attncourse.validate.json"
    server.parent.mkdir(parents=True, exist_ok=True)  # what a package with a server extension installs
    server.write_text(json.dumps({"ServerApp": {"jpserver_extensions": {"attncourse.validate": True}}}, indent=1))
    shutil.copytree(VALIDATE_EXTENSION, prefix / "share" / "jupyter" / "labextensions" / VALIDATE_EXTENSION.name,
                    dirs_exist_ok=True)


def _quietly(*command: str) -> None:
    """Run `python -m <command>`; its output (English) is shown, without terminal colours, only if it fails."""
    done = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True)
    if done.returncode:
        output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
        sys.exit(f"设置失败：python -m {' '.join(command)}\n{output}")


def main() -> None:
    _quietly("jupyterlab.labextensions", "disable", "--level=sys_prefix", *INSTRUCTOR_PLUGINS)
    for extension in INSTRUCTOR_SERVER_EXTENSIONS:
        _quietly("jupyter_server.extension.serverextension", "disable", "--sys-prefix", extension)
    left = still_on()
    if left:
        sys.exit(f"未能关闭：{'、'.join(left)}（是否已在这个环境中安装了作业包里的 attncourse？）")
    write_settings()
    print("已完成：JupyterLab 界面改为中文，关闭了教师用的评分工具；工具栏的 Validate（验证）按钮按题列出通过、"
          "未通过和未作答。")


if __name__ == "__main__":
    main()
