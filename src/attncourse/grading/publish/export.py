"""Grades for the LMS: one row per student, on nbgrader's export plugin interface.

`nbgrader_config.py` makes this nbgrader's export plugin, so `course export` and plain `nbgrader export`
write the same file: 学号, 姓名, one column per assignment, 总分, and 说明. A score is never a 0 that is not one:
an assignment with points held for review reads 待复核 (and 总分 too) until a person has decided
(`course review`), with the points named in 说明; written answers waiting for a TA are named in 说明; a
submission that could not be graded has an empty cell and its reason.
"""
import csv
import io
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin

from ..files import write_atomic
from ..model import Status
from ..records import counted, read_record
from ..text import for_csv

PENDING = "待复核"


class LMSExport(ExportPlugin):  # type: ignore[misc]  # nbgrader has no type information
    """CSV for an LMS (UTF-8 with BOM, so that Excel opens the Chinese names)."""

    def export(self, gradebook: Gradebook) -> None:
        root = Path(self.parent.coursedir.root) if self.parent is not None else Path.cwd()
        dest = Path(self.to or "grades_lms.csv")
        assignments = [a.name for a in gradebook.assignments if not self.assignment or a.name in self.assignment]
        buffer = io.StringIO()
        out = csv.writer(buffer)
        out.writerow(["学号", "姓名", *assignments, "总分", "说明"])
        for student in sorted(gradebook.students, key=lambda s: s.id):
            if self.student and student.id not in self.student:
                continue
            row: list[str] = []
            total: float | str = 0.0  # PENDING once an assignment's points wait for review
            notes: list[str] = []
            for name in assignments:
                score, note = self._score(gradebook, root, name, student.id)
                row.append("" if score is None else score if isinstance(score, str) else f"{score:g}")
                total = PENDING if isinstance(score, str) or isinstance(total, str) else total + (score or 0.0)
                notes += [f"{name}：{note}"] if note else []
            full_name = f"{student.last_name or ''}{student.first_name or ''}"
            out.writerow([for_csv(student.id), for_csv(full_name), *row, total if total == PENDING else f"{total:g}",
                          for_csv("；".join(notes), 2000)])
        write_atomic(dest if dest.is_absolute() else root / dest, "\ufeff" + buffer.getvalue())
        self.log.info("Exported grades to %s", dest)

    @staticmethod
    def _score(gradebook: Gradebook, root: Path, assignment: str, student: str) -> tuple[float | str | None, str]:
        """(points counted now or None, a note) for one student's assignment."""
        record = read_record(root, assignment, student)
        if record is not None and record.status == Status.FAILED:
            return None, f"评分失败（{record.reason}）"
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            return None, "未提交"
        scores = counted(submission, record)
        held = [f"{scores.withheld:g} 分待复核（已确定 {scores.counted:g} 分）"] if scores.withheld else []
        waiting = [f"{scores.pending:g} 分待人工评分"] if scores.pending else []
        decided = [f"复核：{record.review.describe()}"] if record is not None and record.review else []
        return PENDING if scores.withheld else scores.counted, "，".join(held + waiting + decided)
