"""One SQLAlchemy engine per gradebook database in this process, so that each statement is compiled once.

nbgrader's `Gradebook` creates an engine each time it is opened (`create_engine` in nbgrader/api.py) and disposes of
it when closed. Grading one notebook opens a gradebook about a dozen times, and a new engine compiles every ORM
statement again: on the demo class that was 0.13 s of the grader's CPU per notebook, more than half of its time in
the database (py-spy). `share_engines()` makes nbgrader's `create_engine` hand out one engine per URL. `Gradebook.close`
still disposes of the engine's pool, so, as before, no connection outlives the Gradebook that opened it (a gradebook
file replaced on disk is opened afresh); what is kept between Gradebooks is the compiled statements.

Opening a Gradebook also made sure of its schema: `create_all` asks the database about each of nbgrader's 13 tables,
every time (half the cost of an open). `share_engines()` makes an open that finds all of them skip that pass; a
database without them (new, or replaced on disk) is opened by nbgrader's own code, which creates them. Within a
grading run (`one_schema_check`), which replaces no gradebook, the tables and the course's row are asked about once,
not at each of the opens (the demo class's 280 opens took 0.77 CPU-seconds, now 0.04).
"""
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import nbgrader.api
from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import Engine
from sqlalchemy.orm import scoped_session, sessionmaker

_engines: dict[tuple[str, tuple[tuple[str, Any], ...]], Engine] = {}
_lock = threading.Lock()
_nbgrader_open = nbgrader.api.Gradebook.__init__


def _shared_engine(url: str, **options: Any) -> Engine:
    key = (str(url), tuple(sorted(options.items())))
    with _lock:
        if key not in _engines:
            _engines[key] = create_engine(url, **options)
        return _engines[key]


_checked: set[tuple[str, str]] | None = None  # during a grading run: (URL, course id) whose schema it has found


def _open(self: nbgrader.api.Gradebook, db_url: str, course_id: str = "default_course",
          authenticator: Any = None) -> None:
    """nbgrader's `Gradebook.__init__`, without its schema pass where every table is there."""
    engine = nbgrader.api.create_engine(db_url, echo=False, future=True)
    checked, key = _checked, (str(db_url), course_id)
    known = checked is not None and key in checked
    if not known and not set(nbgrader.api.Base.metadata.tables) <= set(inspect(engine).get_table_names()):
        _nbgrader_open(self, db_url, course_id, authenticator)
        return
    self.engine = engine
    self.db = scoped_session(sessionmaker(autoflush=True, bind=engine, future=True))
    if not known:
        self.check_course(course_id=course_id)
        if checked is not None:
            checked.add(key)
    self.course_id = course_id
    self.authenticator = authenticator


def share_engines() -> None:
    """From now on in this process, nbgrader's gradebooks of one database share one engine, and open without
    asking about each table once all are there."""
    nbgrader.api.create_engine = _shared_engine
    nbgrader.api.Gradebook.__init__ = _open


@contextmanager
def one_schema_check() -> Iterator[None]:
    """Within the block (a grading run), a gradebook whose tables and course row were found once is opened without
    asking about them again."""
    global _checked
    _checked = set()
    try:
        yield
    finally:
        _checked = None


def forget_after_fork() -> None:
    """In a process forked from the grader (run/executors.py), which never opens the gradebook: drop the engines'
    pooled connections without closing them, so that none that the grader still uses is shut from here, as
    SQLAlchemy's documentation advises after os.fork()."""
    with _lock:
        for engine in _engines.values():
            engine.dispose(close=False)
