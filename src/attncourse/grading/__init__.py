"""The instructor's grading pipeline, built on nbgrader's own API."""
