"""nbgrader logs every step: keep them in a file, show the tail when a step of ours fails."""
import logging
import os
from pathlib import Path

LOGGERS = ("traitlets", "nbgrader", "distributed", "tornado")  # the last two: `course grade --cluster`'s client


def to_file(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [%(threadName)s] %(message)s"))
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.propagate = False
        logger.handlers = [handler]
        logger.setLevel(logging.INFO)
    for name in list(logging.root.manager.loggerDict):  # distributed gives some of its loggers a handler each
        if name.partition(".")[0] in LOGGERS and "." in name:
            logging.getLogger(name).handlers = []
            logging.getLogger(name).propagate = True
    return path


def tail(path: str | os.PathLike[str], lines: int = 25) -> str:
    try:
        return "\n".join(Path(path).read_text(encoding="utf-8").splitlines()[-lines:])
    except OSError:
        return ""
