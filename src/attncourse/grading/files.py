"""Writing the grader's outputs so that nobody ever reads half of one."""
import os
import shutil
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write a text file so that a reader sees the old or the new content, never a half-written one. It gets
    the permissions of an ordinary new file (readable by the course's group under the usual umask), not the
    0600 of a temporary one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)


def replace_dir(new: str | os.PathLike[str], dest: str | os.PathLike[str], scratch: str | os.PathLike[str]) -> None:
    """Move folder `new` to `dest`, replacing what was there (set aside in `scratch`, then removed).

    `new`, `dest` and `scratch` must be on one file system, so that each step is a rename."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    old = None
    if dest.exists():
        old = Path(tempfile.mkdtemp(dir=scratch, prefix="replaced-"))
        os.replace(dest, old / "old")
    os.replace(new, dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
