"""Publish: in, the gradebook, the records and the autograded notebooks; out, what people read: each student's
feedback (in Chinese, no test code and no output of the grader's run, by construction), `build/grades.csv`, the
class report and the LMS export."""
