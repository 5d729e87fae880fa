"""Publish: in, the gradebook, the records and the autograded notebooks; out, what people read: each student's
feedback (in Chinese, no test code, leak-scanned before it appears in `feedback/`), `build/grades.csv`, the
class report and the LMS export."""
