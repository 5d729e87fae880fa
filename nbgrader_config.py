# nbgrader configuration of the attention course. Every path is relative to the course root: run nbgrader
# from this folder (`course` finds it from anywhere below, or takes --root).
c = get_config()  # noqa: F821

c.CourseDirectory.course_id = "attention"
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".DS_Store"]

# What students see where a solution was removed; the stub still raises NotImplementedError.
c.ClearSolutions.code_stub = {"python": "# 请在此处编写你的代码\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "请在此处写下你的回答。"

# Every exercise cell runs in well under a second on a laptop CPU; 30 s leaves room for a slow
# machine and stops an endless loop. A kernel that ignores the interrupt is killed 10 s later.
c.Execute.timeout = 30
c.Execute.interrupt_on_timeout = True
c.Execute.execute_retries = 0

# A correct answer that makes torch print a warning on stderr keeps its points.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"(?i)\b\w*warning\b"  # also logging's "WARNING:root:..." lines

# Deleting a test cell does not dodge it: the grader puts it back.
c.OverwriteCells.add_missing_cells = True

# A runaway print cannot flood the autograded notebook or the feedback.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 50

# Feedback shows each test's docstring and a Chinese verdict, never the (hidden) test code, and no active
# content (scripts, SVG, event handlers) from the student's cells.
c.GenerateFeedback.preprocessors = [
    "attncourse.grading.publish.feedback.GetGradesAndWaits",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    "attncourse.grading.publish.feedback.SafeHTML",
    "attncourse.grading.publish.feedback.HideTestSource",
]
# In Chinese, points waiting for a grader shown as waiting, math from a MathJax file beside each page. Set on
# the feedback's own exporter: formgrader's views keep nbgrader's templates.
c.GenerateFeedback.exporter_class = "attncourse.grading.publish.feedback.FeedbackExporter"
c.FeedbackExporter.template_name = "course_feedback"
c.FeedbackExporter.extra_template_basedirs = __import__("attncourse.grading.publish.feedback", fromlist=["_"]).TEMPLATES

# `course collect` and `nbgrader zip_collect`: how an LMS names the files it hands out. The pattern is matched
# against each file's name and must give student_id and file_id; full_name (or first_name/last_name) and a
# timestamp nbgrader can parse are optional (without one, the time stored in the zip is used).
# Default: 2023123456_张三_scoring.ipynb, also 2023123456_张三_scoring (1).ipynb for a second copy.
c.FileNameCollectorPlugin.named_regexp = r"^(?P<student_id>[A-Za-z0-9]+)_(?P<full_name>[^_]+)_(?P<file_id>.+\.ipynb)$"
# The LMS's clock: times in file names and in the zip that carry no zone are read in this zone (all times are
# compared in UTC). Empty: the grading machine's own zone.
c.LMSFileNames.timezone = "Asia/Shanghai"
# The most a download may expand to (MiB), counted while unpacking: a class of 200 with 10 MB each.
c.LMSFileNames.max_download_mb = 2048

# `course export` and `nbgrader export`: one row per student for the LMS (学号, 姓名, each assignment, 总分, 说明).
c.ExportApp.plugin_class = "attncourse.grading.publish.export.LMSExport"
c.ZipCollectApp.collector_plugin = "attncourse.grading.intake.lms.LMSFileNames"  # the same pattern, on file names
