"""Grades for the LMS: one row per student, on nbgrader's export plugin interface.

`nbgrader_config.py` makes this nbgrader's export plugin, so `course export` and plain `nbgrader export`
write the same file: 学号, 姓名, one column per assignment, 总分, and 说明. Each cell is the student's one
outcome (records.class_outcomes): a grade is a number; points held for review read 待复核 until a person has
decided; a submission that failed, was not collected, is missing or is not graded yet has no number, only
`c.LMSExport.no_grade` (empty by default: an LMS that imports the column records nothing, never a 0), with the
reason in 说明. 总分 is the sum only when every collected assignment of the student has a grade.
"""
import csv
import io
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.plugins import ExportPlugin
from traitlets import Unicode

from ..course import Folders, nbgrader_config, submissions
from ..files import write_atomic
from ..model import Outcome, Status
from ..records import class_outcomes
from ..text import for_csv

PENDING = "待复核"


class LMSExport(ExportPlugin):  # type: ignore[misc]  # nbgrader has no type information
    """CSV for an LMS (UTF-8 with BOM, so that Excel opens the Chinese names)."""

    no_grade = Unicode("", help="What a cell reads where there is no grade (failed, not collected, missing, not "
                                "graded yet): empty by default, or the marker your LMS imports as 'no grade' "
                                "(e.g. '-'). Never a number.").tag(config=True)

    def export(self, gradebook: Gradebook) -> None:
        where = Folders(nbgrader_config(self.parent.coursedir.root if self.parent is not None else Path.cwd()))
        dest = Path(self.to or "grades_lms.csv")
        assignments = [a.name for a in gradebook.assignments if not self.assignment or a.name in self.assignment]
        submitted = submissions(where.submitted(), assignments) if where.submitted().is_dir() else []
        outcomes: dict[str, dict[str, Outcome]] = {}
        for o in class_outcomes(gradebook, where.root, assignments, submitted):
            outcomes.setdefault(o.student, {})[o.assignment] = o
        names = {s.id: f"{s.last_name or ''}{s.first_name or ''}" for s in gradebook.students}
        buffer = io.StringIO()
        out = csv.writer(buffer)
        out.writerow(["学号", "姓名", *assignments, "总分", "说明"])
        for student in sorted(set(names) | set(outcomes)):
            if self.student and student not in self.student:
                continue
            row = [self._cell(o) for o in (outcomes.get(student, {}).get(a) for a in assignments)]
            mine = outcomes.get(student, {}).values()
            notes = [f"{o.assignment}：{self._note(o)}" for o in mine if self._note(o)]
            if all(o.status.is_grade for o in mine):
                total = f"{sum(o.score or 0.0 for o in mine):g}" if mine else self.no_grade
            else:
                total = PENDING if all(o.status.has_score for o in mine) else self.no_grade
                notes.append("总分未计：" + "、".join(f"{o.assignment}{o.status.label}" for o in mine
                                                    if not o.status.is_grade))
            out.writerow([for_csv(student), for_csv(names.get(student, "")), *row, total,
                          for_csv("；".join(notes), 2000)])
        write_atomic(dest if dest.is_absolute() else where.root / dest, "\ufeff" + buffer.getvalue())
        self.log.info("Exported grades to %s", dest)

    def _cell(self, o: Outcome | None) -> str:
        if o is None:
            return ""  # nothing collected for this assignment yet
        if o.status == Status.HELD:
            return PENDING
        return f"{o.score:g}" if o.status.is_grade and o.score is not None else self.no_grade

    @staticmethod
    def _note(o: Outcome) -> str:
        """What the 说明 column says of one assignment: why it has no grade, the points held or decided, the written
        answers waiting for a TA."""
        if not o.status.has_score:
            return f"{o.status.label}（{o.reason}）" if o.reason else o.status.label
        held = [f"{o.withheld:g} 分待复核（已确定 {o.score:g} 分）"] if o.status == Status.HELD else []
        waiting = [f"{o.pending:g} 分待人工评分"] if o.pending else []
        decided = [f"复核：{o.review.describe()}" + (f"，{o.review.note}" if o.review.note else "")] if o.review else []
        return "，".join(held + waiting + decided)
