"""Intake: in, what students handed in (an LMS download, a class folder); out, `submitted/<student>/<a>/` and,
for each submission to grade, a staged copy that only the grader writes (an `Intake`: the folder, or the
reason it cannot be graded, and notes on what was set aside or repaired)."""
