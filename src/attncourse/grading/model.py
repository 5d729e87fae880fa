"""What grading one submission produces: its status, its scores and what a person must know about it."""
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """A student's outcome for one assignment: one of this closed set, and the same words in every output
    (grades.csv, the report, the LMS export, formgrader, the feedback page, the console). A record
    (records.py) keeps what a run or intake found: GRADED, FAILED or NOT_COLLECTED; HELD and the three
    decisions follow from its holds and its review, MISSING from the roster."""
    GRADED = "graded"  # autograded; every point counts
    HELD = "held"  # autograded, some points held back until a person has reviewed why
    ACCEPTED = "accepted"  # held, then accepted: the held points count
    REJECTED = "rejected"  # held, then rejected: the held points are withheld (0)
    REVIEWED = "reviewed"  # held, then the held test cells were scored one by one in formgrader
    FAILED = "failed"  # handed in, but it cannot be graded (crash, hang, corrupt file, refused folder): no score
    NOT_COLLECTED = "not_collected"  # the LMS download names the student, but no notebook could be taken in
    COLLECTED = "collected"  # collected, not graded yet
    MISSING = "missing"  # the roster names the student, the download has nothing of theirs
    ERROR = "error"  # the course's own tools failed: the command stops; never recorded

    @property
    def label(self) -> str:
        """The Chinese words every output uses."""
        return STATUS_LABELS[self]

    @property
    def has_score(self) -> bool:
        """Whether the gradebook holds points of this submission (some may still wait for review)."""
        return self in (Status.GRADED, Status.HELD, Status.ACCEPTED, Status.REJECTED, Status.REVIEWED)

    @property
    def is_grade(self) -> bool:
        """Whether its points are a grade that can be exported: scored, and nothing waits for a person."""
        return self.has_score and self != Status.HELD


STATUS_LABELS = {Status.GRADED: "已评分", Status.HELD: "待复核", Status.ACCEPTED: "复核后计入",
                 Status.REJECTED: "复核后不计入", Status.REVIEWED: "复核后逐题给分", Status.FAILED: "评分失败",
                 Status.NOT_COLLECTED: "未能收取", Status.COLLECTED: "尚未评分", Status.MISSING: "未提交", Status.ERROR: "工具出错"}


class HoldKind(StrEnum):
    """Why points are held for a person: each kind with the reason the TA and the student read."""
    GRADER = "grader"  # reaches what the grader relies on inside the kernel
    INTROSPECTION = "introspection"  # could capture what the grader sends in
    UNREADABLE = "unreadable"  # runs code that cannot be read from the notebook
    UNSANDBOXED = "unsandboxed"  # files, processes, network: held only where no sandbox isolates the kernel
    TAMPERED = "tampered"  # the kernel answered outside the protocol, or the forbidden-call watch failed

    @property
    def reason(self) -> str:
        return HOLD_REASONS[self]


HOLD_REASONS = {
    HoldKind.GRADER: "代码用到了评分程序在内核中依赖的部分（评分模块、IPython 内核、禁止函数的监视、内置函数），"
                     "可能影响评分，需要助教确认",
    HoldKind.INTROSPECTION: "代码用内省（调用栈帧、垃圾回收器的对象表、sys.modules、函数的内部属性、ctypes）"
                            "可能读到评分程序传入的数据，需要助教确认",
    HoldKind.UNREADABLE: "代码运行了无法从 notebook 中读出的代码（exec/eval 计算出的字符串、%run、自己写到磁盘再导入的模块），"
                         "需要助教确认",
    HoldKind.UNSANDBOXED: "评分机没有沙箱，代码读写文件、启动进程或访问网络，需要助教确认",
    HoldKind.TAMPERED: "评分时内核返回了协议不允许的数据，或禁止函数的监视失灵，提交的代码可能干扰了评分程序",
}


@dataclass
class Hold:
    """One construct (or event) that holds points for review."""
    kind: HoldKind
    what: str  # the construct, in Chinese ("导入了 ctypes 模块")
    where: str = ""  # how a person finds it ("单元格 masked_softmax 第 3 行"); "" for the whole submission
    cell: int = -1  # the notebook cell's index, -1 for none
    line: int = 0  # the line in that cell, 0 if unknown

    def __str__(self) -> str:
        return f"{self.where}：{self.what}" if self.where else self.what


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
    """A person's decision on the points held for review: `course review --accept`/`--reject` or formgrader's
    accept and reject (ACCEPTED, REJECTED), or the held test cells scored one by one in formgrader (REVIEWED)."""
    decision: Status  # ACCEPTED, REJECTED or REVIEWED
    points: float  # the held points decided on
    by: str  # the reviewer's name, as the course or the login names them (records.reviewer)
    at: str  # ISO 8601, UTC
    note: str = ""  # the reviewer's reason, shown to the student
    flags: list[str] = field(default_factory=list)  # the holds it was about

    def describe(self) -> str:
        return f"{self.decision.label}（{self.by}，{self.at.replace('T', ' ')[:16]} UTC）"


@dataclass
class Outcome:
    """One student's outcome for one assignment, as every output shows it (`status` is one of the closed set)."""
    assignment: str
    student: str
    status: Status
    reason: str = ""  # why there is no score (FAILED, NOT_COLLECTED, MISSING), in Chinese
    seconds: float = 0.0
    score: float | None = None  # points counted now
    max_score: float | None = None
    cells: dict[str, tuple[float, float]] = field(default_factory=dict)  # test grade_id -> (score, max)
    holds: list[Hold] = field(default_factory=list)  # why a person must review it
    pending: float = 0.0
    withheld: float = 0.0
    notes: list[str] = field(default_factory=list)  # what was set aside or changed on the way
    # failed test grade_id -> {"id", "label"} of its likely mistake
    diagnoses: dict[str, dict[str, str]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # seconds of this run's steps (SubmissionResult.timings)
    review: Review | None = None  # a person's decision on the held points
    name: str = ""  # the student's name as the gradebook (the roster) has it
    held_cells: list[str] = field(default_factory=list)  # the test cells whose points were held for review
    kept: bool = False  # graded earlier and unchanged since: this run kept the grade (and manual grades)

    @property
    def flags(self) -> list[str]:
        return [str(h) for h in self.holds]

    def take_scores(self, scores: Scores) -> "Outcome":
        self.score, self.max_score, self.cells = scores.counted, scores.maximum, scores.cells
        self.pending, self.withheld = scores.pending, scores.withheld
        return self


@dataclass
class SubmissionResult:
    """What running one submission leaves for its Outcome, filled in by the execute step as it runs."""
    sandboxed: bool = True  # whether the kernel runs in a sandbox (some constructs are held only without one)
    failure: str = ""  # why the submission cannot be graded ('' while it can)
    holds: list[Hold] = field(default_factory=list)  # what a person must review, with the cell and line
    held: set[str] = field(default_factory=set)  # test cells whose points wait for that person (those run after)
    notes: list[str] = field(default_factory=list)  # what the TA may want to read, never holding a point
    # failed test grade_id -> {"id", "label"} (run/diagnosis.py)
    diagnoses: dict[str, dict[str, str]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # seconds of each step of execution: kernel start, student
    # cells, test cells, diagnosis (benchmarks/grading_speed.py's profile)

    @property
    def flags(self) -> list[str]:
        return [str(h) for h in self.holds]

    def timed(self, step: str, seconds: float) -> None:
        self.timings[step] = self.timings.get(step, 0.0) + seconds

    def merge(self, other: "SubmissionResult") -> None:
        """Take in what the execute step left in `other` (on a grading worker, run/cluster.py); diagnoses are
        made here, after it."""
        self.sandboxed, self.failure = other.sandboxed, other.failure
        self.holds += other.holds
        self.held |= other.held
        self.notes += other.notes
        for step, seconds in other.timings.items():
            self.timed(step, seconds)

    def __deepcopy__(self, memo: dict[int, Any]) -> "SubmissionResult":
        return self  # a handle: nbconvert deep-copies the resources it carries, this must stay the one object
