"""What grading one submission produces: its status, its scores and what a person must know about it."""
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    GRADED = "graded"  # graded in this run
    KEPT = "kept"  # graded earlier and unchanged since: the grade (and manual grades) are kept
    FAILED = "failed"  # cannot be graded (crash, hang, corrupt file, refused folder): no score, a reason
    ERROR = "error"  # the course's own tools failed: the command stops

    @property
    def has_score(self) -> bool:
        return self in (Status.GRADED, Status.KEPT)


@dataclass
class Scores:
    """A submission's points as the gradebook holds them."""
    counted: float  # points that count now: without points held back for review
    maximum: float
    cells: dict[str, tuple[float, float]]  # grade_id -> (score, max)
    pending: float  # points of written answers still waiting for a manual grade
    withheld: float  # autograded points held back until a person has reviewed the flags


@dataclass
class Review:
    """A person's decision on the points held for review: `course review --accept`/`--reject`, or scores
    entered in formgrader."""
    decision: str  # "accepted", "rejected" or "formgrader"
    points: float  # the held points decided on
    by: str
    at: str  # ISO 8601, UTC
    note: str = ""
    flags: list[str] = field(default_factory=list)  # what it was about

    def describe(self) -> str:
        what = {"accepted": "已确认计入", "rejected": "已确认记 0 分", "formgrader": "已在 formgrader 中给分"}
        return f"{what.get(self.decision, self.decision)}（{self.by}，{self.at.replace('T', ' ')[:16]} UTC）"


@dataclass
class Outcome:
    assignment: str
    student: str
    status: Status
    reason: str = ""
    seconds: float = 0.0
    score: float | None = None  # points counted now
    max_score: float | None = None
    cells: dict[str, tuple[float, float]] = field(default_factory=dict)  # test grade_id -> (score, max)
    flags: list[str] = field(default_factory=list)  # why a person must review it
    pending: float = 0.0
    withheld: float = 0.0
    notes: list[str] = field(default_factory=list)  # what was set aside or changed on the way
    # failed test grade_id -> {"id", "label"} of its likely mistake
    diagnoses: dict[str, dict[str, str]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # seconds of this run's steps (SubmissionResult.timings)
    review: Review | None = None  # a person's decision on the held points
    name: str = ""  # the student's name as the gradebook has it

    def take_scores(self, scores: Scores) -> "Outcome":
        self.score, self.max_score, self.cells = scores.counted, scores.maximum, scores.cells
        self.pending, self.withheld = scores.pending, scores.withheld
        return self


@dataclass
class SubmissionResult:
    """What running one submission leaves for its Outcome, filled in by the execute step as it runs."""
    sandboxed: bool = True  # whether the kernel runs in a sandbox (some constructs are held only without one)
    failure: str = ""  # why the submission cannot be graded ('' while it can)
    flags: list[str] = field(default_factory=list)  # review holds found in the student's code, for a person
    held: set[str] = field(default_factory=set)  # test cells whose points wait for that person (those run after)
    # (cell index, line, text) of each hold, for the TA
    review_lines: list[tuple[int, int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the TA may want to read, never holding a point
    # failed test grade_id -> {"id", "label"} (run/diagnosis.py)
    diagnoses: dict[str, dict[str, str]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # seconds of each step of execution: kernel start, student
    # cells, test cells, diagnosis (benchmarks/grading_speed.py's profile)

    def timed(self, step: str, seconds: float) -> None:
        self.timings[step] = self.timings.get(step, 0.0) + seconds

    def merge(self, other: "SubmissionResult") -> None:
        """Take in what the execute step left in `other` (on a grading worker, run/cluster.py); diagnoses are
        made here, after it."""
        self.sandboxed, self.failure = other.sandboxed, other.failure
        self.flags += other.flags
        self.held |= other.held
        self.review_lines += other.review_lines
        self.notes += other.notes
        for step, seconds in other.timings.items():
            self.timed(step, seconds)

    def __deepcopy__(self, memo: dict[int, Any]) -> "SubmissionResult":
        return self  # a handle: nbconvert deep-copies the resources it carries, this must stay the one object
