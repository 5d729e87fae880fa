"""The internals of nbgrader, nbclient, jupyter_client, nbconvert, ipykernel and distributed that the grading pipeline relies on.

The course overrides or calls these private or undocumented pieces. Their versions are pinned
(constraints.txt); this test fails, naming what to review, when one of them changes under an upgrade.
To accept a reviewed change, update its fingerprint here.
"""
import hashlib
import inspect
from importlib.metadata import version

import pytest

PINNED = {"nbgrader": "0.9.6", "nbclient": "0.11.0", "jupyter_client": "8.10.0", "nbconvert": "7.17.2",
          "ipykernel": "7.4.0", "distributed": "2026.8.0", "jupyterlab": "4.6.6", "torch": "2.14.1"}

# (object, what relies on it, sha256 of its source, first 16 hex digits)
INTERNALS = [
    ("dis:_parse_exception_table",
     "grading/protocol/bytecode.py writes the exception table this reads (CPython 3.11's format)", "EXCEPTION_TABLE"),
    ("torch.fx._symbolic_trace:Tracer.trace",
     "grading/protocol/witness.py _capturing: symbolic_trace and make_fx record a function's operations while a "
     "frame of this method runs", "FX_TRACE"),
    ("torch._jit_internal:is_ignored_fn",
     "grading/protocol/witness.py: TorchScript calls a function marked `_torchscript_modifier = IGNORE` back in "
     "Python", "JIT_IGNORED"),
    ("nbgrader.converters.autograde:Autograde.convert_single_notebook",
     "grading/run/autograde.py CourseAutograde copies it without nbgrader's thread-unsafe setenv", "CONVERT"),
    ("nbgrader.converters.autograde:Autograde.init_assignment",
     "grading/run/autograde.py grades a staged copy; nbgrader copies source files and creates the submission here",
     "INIT_ASSIGNMENT"),
    ("nbgrader.converters.base:BaseConverter.init_assignment",
     "grading/intake/staging.py: nbgrader copies every non-notebook file into autograded/ and feedback/", "BASE_INIT"),
    ("nbgrader.preprocessors.overwritecells:OverwriteCells.add_missing_task_cells",
     "grading/intake/staging.py removes duplicate ids itself (nbgrader leaves {} metadata that crashes here)", "TASKS"),
    ("nbgrader.preprocessors.deduplicateids:DeduplicateIds.preprocess_cell",
     "grading/intake/staging.py keeps the last of duplicated cells, as this does", "DEDUP"),
    ("nbgrader.preprocessors.saveautogrades:SaveAutoGrades._add_score",
     "grading/records.py hold sets needs_manual_grade and sets the auto score aside after this ran", "SAVE"),
    ("ipykernel.ipkernel:IPythonKernel.__init__",
     "grading/isolation/forked_kernel.py ForkedKernel.__init__ is a copy of it less the debugger's module list",
     "KERNEL_INIT"),
    ("nbgrader.preprocessors.saveautogrades:SaveAutoGrades.preprocess",
     "grading/run/autograde.py CourseSaveAutoGrades does what this does, in one transaction", "SAVE_NOTEBOOK"),
    ("nbgrader.preprocessors.saveautogrades:SaveAutoGrades._add_comment",
     "grading/run/autograde.py _SubmissionGrades: this and _add_score ask self.gradebook find_grade, find_comment "
     "and db only", "SAVE_COMMENT"),
    ("nbgrader.utils:determine_grade",
     "grading/run/execution.py writes a test cell's verdict as no output (pass) or one error (fail)", "DETERMINE"),
    ("nbclient.client:NotebookClient.output", "grading/run/execution.py CourseExecute.output caps output bytes", "OUTPUT"),
    ("nbclient.client:NotebookClient.async_execute_cell",
     "grading/run/execution.py: test cells never reach the kernel (preprocess_cell is overridden)", "EXECUTE_CELL"),
    ("nbclient.client:NotebookClient.setup_kernel",
     "grading/run/execution.py limits a kernel's output in start_new_kernel_client, before any cell runs",
     "SETUP_KERNEL"),
    ("nbclient.client:NotebookClient._async_handle_timeout",
     "grading/run/execution.py fails a submission whose kernel ignores the interrupt", "TIMEOUT"),
    ("nbconvert.preprocessors.execute:ExecutePreprocessor.preprocess",
     "grading/run/execution.py CourseExecute.preprocess and preprocess_cell", "PREPROCESS"),
    ("jupyter_client.provisioning.local_provisioner:LocalProvisioner.pre_launch",
     "grading/isolation/preload.py switches sandboxed kernels to ipc transport before the connection file is written",
     "PRE_LAUNCH"),
    ("jupyter_client.provisioning.local_provisioner:LocalProvisioner.launch_kernel",
     "grading/isolation/preload.py PreloadedProvisioner forks kernels instead", "LAUNCH"),
    ("jupyter_client.manager:KernelManager._async_launch_kernel",
     "grading/isolation/preload.py returns the connection info with the kernel's socket path", "MANAGER_LAUNCH"),
    ("ipykernel.kernelapp:IPKernelApp.initialize", "grading/isolation/preload.py starts a forked kernel with it", "KERNELAPP"),
    ("nbgrader.preprocessors.checkcellmetadata:CheckCellMetadata.preprocess",
     "grading/run/autograde.py CourseCheckCellMetadata does this with a validator that skips cells seen before",
     "CHECK_META"),
    ("nbgrader.nbgraderformat.common:BaseMetadataValidator.validate_cell",
     "grading/run/autograde.py _SeenMetadataValidator: a cell's check reads its type and nbgrader metadata only",
     "META_BASE"),
    ("nbgrader.nbgraderformat.v3:MetadataValidatorV3.validate_cell",
     "grading/run/autograde.py _SeenMetadataValidator: a cell's check reads its type and nbgrader metadata only "
     "(its source only for messages)", "META_V3"),
    ("jupyter_client.manager:KernelManager._async_wait",
     "grading/run/execution.py CourseKernelManager looks every 5 ms whether a killed kernel has ended", "KM_WAIT"),
    ("jupyter_client.manager:KernelManager._async_kill_kernel",
     "grading/run/execution.py CourseKernelManager: a killed kernel is waited for through _async_wait", "KM_KILL"),
    ("nbgrader.preprocessors.execute:Execute.__init__",
     "grading/run/execution.py CourseExecute passes its kernel manager class as nbgrader's does", "EXECUTE_INIT"),
    ("attncourse.grading.gradebook_engines:_nbgrader_open",  # nbgrader.api's Gradebook.__init__, before share_engines
     "nbgrader's Gradebook.__init__: in grading/gradebook_engines.py each Gradebook gets its engine from nbgrader.api's "
     "`create_engine`, and `_open` opens a gradebook whose tables are there as this does, without create_all",
     "GB_INIT"),
    ("nbgrader.api:Gradebook.close",
     "grading/gradebook_engines.py: closing a Gradebook disposes of its engine's pool (no connection outlives it)",
     "GB_CLOSE"),
    ("nbgrader.converters.base:BaseConverter.init_single_notebook_resources",
     "grading/run/autograde.py CourseAutograde adds the SubmissionResult to the resources it returns", "RESOURCES"),
    ("jupyter_client.provisioning.factory:KernelProvisionerFactory.create_provisioner_instance",
     "grading/isolation/preload.py registers its provisioner in `provisioners` and sets default_provisioner_name",
     "FACTORY_CREATE"),
    ("jupyter_client.provisioning.factory:KernelProvisionerFactory._check_availability",
     "grading/isolation/preload.py: a name in `provisioners` is available without an installed entry point",
     "FACTORY_AVAILABLE"),
    ("jupyter_client.provisioning.factory:KernelProvisionerFactory._get_provisioner_config",
     "grading/isolation/preload.py: kernels without a provisioner in their spec get default_provisioner_name",
     "FACTORY_CONFIG"),
    ("nbgrader.preprocessors.getgrades:GetGrades",
     "grading/publish/feedback.py GetGradesAndWaits: preprocess_cell calls _get_comment and _get_score, which it "
     "replaces (a notebook's grades and comments read in a query each), and its preprocess is GetGrades.preprocess "
     "in a gradebook session open already", "GET_GRADES"),
    ("nbgrader.converters.base:BaseConverter.start",
     "grading/publish/feedback.py CourseFeedback.start is this without making a new writer and exporter (made once "
     "for every page of a run)", "CONVERTER_START"),
    ("nbconvert.exporters.html:HTMLExporter.from_notebook_node",
     "grading/publish/feedback.py FeedbackExporter.from_notebook_node is this without its BeautifulSoup pass: "
     "with_alt_text gives images the same alt text, and the course's template has none of the elements it makes "
     "focusable (tests/test_publish.py compares the pages)", "HTML_EXPORT"),
    ("nbconvert.exporters.exporter:Exporter._preprocess",
     "grading/publish/feedback.py: the resources are deep-copied before the preprocessors run (feedback.Shared "
     "hands the gradebook session on as it is); optimistic_validation validates once, after the last",
     "EXPORT_PREPROCESS"),
    ("nbconvert.filters.highlight:Highlight2HTML.__call__",
     "grading/publish/feedback.py CachedHighlight: the highlighted code depends on the source, the language and "
     "the cell's magics_language only", "HIGHLIGHT"),
    ("nbconvert.filters.highlight:_pygments_highlight",
     "grading/publish/feedback.py CachedHighlight: of the cell's metadata, only magics_language is read",
     "PYGMENTS_HIGHLIGHT"),
    ("nbconvert.preprocessors.sanitize:SanitizeHTML.sanitize_html_tags",
     "grading/publish/feedback.py SafeHTML caches it: its result depends on the text and the preprocessor's "
     "settings only", "SANITIZE_TAGS"),
    ("ipykernel.kernelbase:Kernel.pre_handler_hook",
     "grading/protocol/probe.py _answer: SIGINT raises KeyboardInterrupt while a request is served", "PRE_HANDLER"),
    ("ipykernel.kernelbase:Kernel.post_handler_hook",
     "grading/protocol/probe.py _answer: SIGINT is ignored again once the reply is sent", "POST_HANDLER"),
    ("ipykernel.kernelbase:Kernel.start",
     "grading/protocol/probe.py op_start: `io_loop` is the main thread's, which serves the probe's socket", "START"),
    ("jupyter_client.client:KernelClient._async_wait_for_ready",
     "grading/protocol/remote.py BoundedClient.wait_for_ready is this wait without its last step (0.2 s of quiet "
     "IOPub)", "WAIT_FOR_READY"),
    ("distributed.client:Client._register_worker_plugin",
     "grading/run/cluster.py: a worker whose GradingWorker.setup failed (no sandbox) stops `course grade` here",
     "DASK_REGISTER"),
    ("nbgrader.apps.validateapp:ValidateApp.start",
     "validate.py use_in_nbgrader: `nbgrader validate` builds its module's `Validator` and calls validate_and_print",
     "VALIDATE_START"),
    ("nbgrader.validator:Validator.validate",
     "validate.py CourseValidator.report: it runs _preprocess and returns type_changed / changed", "VALIDATE"),
    ("nbgrader.validator:Validator._preprocess",
     "validate.py CourseValidator keeps the executed notebook it returns", "VALIDATE_PREPROCESS"),
    ("nbgrader.server_extensions.validate_assignment.handlers:ValidateAssignmentHandler.load_config",
     "validate.py: the course's Validate button reads nbgrader's config as nbgrader's own button does",
     "VALIDATE_CONFIG"),
    ("distributed.worker:Worker.plugin_add",
     "grading/run/cluster.py GradingWorker.setup is awaited with the worker, whose `plugins` and `state.nthreads` it "
     "reads", "DASK_PLUGIN_ADD"),
    ("nbgrader.server_extensions.formgrader.apihandlers:GradeHandler.put",
     "grading/publish/formgrader/review.py: before this saves a score (clearing needs_manual_grade) the reviewer is "
     "named; after it, the TA's decision is recorded", "FG_GRADE_PUT"),
    ("nbgrader.server_extensions.formgrader.handlers:SubmissionHandler.get",
     "grading/publish/formgrader/review.py Page: this builds `resources` (assignment_id, student, base_url) and calls "
     "self.exporter.from_filename(filename, resources=...)", "FG_SUBMISSION_GET"),
    ("nbgrader.server_extensions.formgrader.handlers:ManageAssignmentsHandler.get",
     "grading/publish/formgrader: the course's manage_assignments.tpl is rendered through self.render with base_url",
     "FG_MANAGE_ASSIGNMENTS"),
    ("nbgrader.server_extensions.formgrader.handlers:ManageSubmissionsHandler.get",
     "templates/formgrader/manage_submissions.tpl is rendered through self.render with assignment_id and base_url",
     "FG_MANAGE_SUBMISSIONS"),
    ("nbgrader.server_extensions.formgrader.base:BaseHandler.render",
     "grading/publish/formgrader replaces it: the same templates and arguments, the course's copies found first",
     "FG_RENDER"),
    ("nbgrader.server_extensions.formgrader.formgrader:FormgradeExtension.init_handlers",
     "grading/publish/formgrader adds the review API to apihandlers.default_handlers, which this registers before "
     "its catch-all for /formgrader/", "FG_INIT_HANDLERS"),
    ("jupyter_server.extension.manager:ExtensionManager.load_all_extensions",
     "grading/publish/formgrader loads before nbgrader's formgrader (extensions load in alphabetical order)",
     "EXTENSION_ORDER"),
    ("jupyter_server.auth.identity:IdentityProvider.generate_anonymous_user",
     "grading/publish/formgrader/review.py jupyter_user: a token's user is named 'Anonymous …' with a 32-digit hex "
     "username, which never signs a decision", "ANONYMOUS_USER"),
    ("nbgrader.apps.api:NbGraderAPI.get_students",
     "grading/publish/formgrader/lists.py adds each student's outcomes to the rows (dicts with 'id')", "API_STUDENTS"),
    ("nbgrader.apps.api:NbGraderAPI.get_submissions",
     "grading/publish/formgrader/lists.py adds each row's outcome (dicts with 'student') and the students not listed",
     "API_SUBMISSIONS"),
    ("nbgrader.apps.api:NbGraderAPI.get_notebook_submissions",
     "grading/publish/formgrader/lists.py adds each row's outcome (dicts with 'student')", "API_NOTEBOOK_SUBMISSIONS"),
    ("nbgrader.apps.api:NbGraderAPI.get_student_submissions",
     "grading/publish/formgrader/lists.py adds each row's outcome (dicts with the assignment's 'name')",
     "API_STUDENT_SUBMISSIONS"),
    ("nbgrader.apps.api:NbGraderAPI.get_student_notebook_submissions",
     "grading/publish/formgrader/lists.py adds each row's outcome, and rows where the gradebook has no notebooks",
     "API_STUDENT_NOTEBOOKS"),
    ("nbgrader.apps.api:NbGraderAPI.get_assignments",
     "grading/publish/formgrader/lists.py adds each assignment's status counts (dicts with 'name')", "API_ASSIGNMENTS"),
    ("nbgrader.apps.api:NbGraderAPI.get_notebooks",
     "grading/publish/formgrader/lists.py adds the assignment's status counts to each notebook's row", "API_NOTEBOOKS"),
    ("nbgrader.preprocessors.overwritecells:OverwriteCells.preprocess_cell",
     "grading/run/autograde.py CourseOverwriteCells: a changed checksum of a locked cell is reported through "
     "report_change(grade_id, 'checksum', ...) before the cell is put back; self.gradebook, notebook_id and "
     "assignment_id find the source cell, and self.gradebook is asked find_source_cell and find_graded_cell only "
     "(_SourceCells answers them)", "OVERWRITE_CELL"),
    ("nbgrader.preprocessors.overwritecells:OverwriteCells.preprocess",
     "grading/run/autograde.py CourseOverwriteCells.preprocess does what this does, with _SourceCells for the "
     "gradebook", "OVERWRITE_NOTEBOOK"),
    ("nbgrader.preprocessors.overwritecells:OverwriteCells.add_missing_grade_cells",
     "grading/run/autograde.py _SourceCells.find_notebook: this and add_missing_task_cells read source_cells, "
     "grade_cells, solution_cells and task_cells of self.gradebook.find_notebook(...)", "MISSING_GRADE_CELLS"),
    ("nbgrader.preprocessors.overwritecells:OverwriteCells.missing_cell_transform",
     "grading/run/autograde.py _SourceCells: a source cell's name, cell_type, locked, checksum and source",
     "MISSING_TRANSFORM"),
    ("nbgrader.server_extensions.formgrader.apihandlers",
     "grading/publish/formgrader.py REFUSED: the API handlers that generate, release, collect, autograde or give "
     "feedback answer with the course command instead", "FG_API"),
    ("nbgrader.preprocessors.execute:Execute.on_cell_executed",
     "grading/run/execution.py CourseExecute.on_cell_executed cuts the reply's error, which this adds to a cell "
     "whose outputs have no error of the same name", "ON_EXECUTED"),
    ("ipykernel.zmqshell:ZMQInteractiveShell._showtraceback",
     "grading/protocol/probe.py _limit_errors: the error output and `_last_traceback` (the reply's) come from its "
     "arguments", "SHOWTRACEBACK"),
    ("ipykernel.ipkernel:IPythonKernel.do_execute",
     "grading/protocol/probe.py _limit_errors: the reply's evalue is str(result.error_in_exec) read after "
     "post_run_cell", "DO_EXECUTE"),
    ("ipykernel.zmqshell:ZMQDisplayPublisher.publish",
     "grading/protocol/probe.py _limit_output: every display() of a cell goes through shell.display_pub.publish",
     "DISPLAY_PUBLISH"),
    ("jupyter_client.channels:AsyncZMQSocketChannel",
     "grading/protocol/remote.py CheckedChannel replaces its get_msg, reading self.socket and self.session", "CHANNEL"),
    ("jupyter_client.session:Session.deserialize",
     "grading/protocol/remote.py CheckedChannel: it raises on frames it cannot read or verify, and returns the dict "
     "whose header, parent_header, content and msg_type are checked", "DESERIALIZE"),
    ("jupyter_client.client:KernelClient.start_channels",
     "grading/protocol/remote.py BoundedClient.start_channels passes (shell, iopub, stdin, hb, control) in this order",
     "START_CHANNELS"),
    ("nbclient.client:NotebookClient.async_start_new_kernel_client",
     "grading/protocol/remote.py BoundedClient: start_channels() is called without arguments (stdin and control off)",
     "START_CLIENT"),
    ("nbclient.client:NotebookClient._async_poll_output_msg",
     "grading/protocol/remote.py CheckedChannel: IOPub is read with get_msg(timeout=None), each message to "
     "process_message, which grading/run/execution.py wraps", "POLL_OUTPUT"),
    ("nbclient.client:NotebookClient.process_message",
     "grading/run/execution.py CourseExecute.process_message: CellExecutionComplete ends the cell, anything else it "
     "raises is an unreadable message", "PROCESS_MESSAGE"),
    ("nbclient.client:NotebookClient._async_poll_for_reply",
     "grading/run/execution.py: the shell reply goes to on_cell_executed, an unanswered wait to _async_handle_timeout",
     "POLL_REPLY"),
    ("nbclient.client:NotebookClient._check_raise_for_error",
     "grading/run/execution.py CourseExecute.on_cell_executed gives every reply a status this reads", "RAISE_FOR_ERROR"),
]
FINGERPRINTS = {
    "EXCEPTION_TABLE": "43a7096c6a0e88c4",
    "FX_TRACE": "cc491db3f61442aa",
    "JIT_IGNORED": "f261b5b9e8efcb3a",
    "RESOURCES": "fb0abcdb270601c6",
    "GB_INIT": "c60c420276e8355e",
    "KM_WAIT": "574593dddfda8169",
    "KM_KILL": "9850bc22c85871db",
    "EXECUTE_INIT": "c9d4453bcebceb4f",
    "CHECK_META": "f8dfe8c496d03e52",
    "META_BASE": "e5f97f45a9aba510",
    "META_V3": "53eb5b8ac9370fed",
    "GB_CLOSE": "089cf56cf4f8a224",
    "FACTORY_CREATE": "8c83b9e92073e9e6",
    "FACTORY_AVAILABLE": "3e43d00e7032801b",
    "FACTORY_CONFIG": "dfeb755b98776ccc",
    "GET_GRADES": "8a8a0b0dcb855822",
    "CONVERTER_START": "10d6830579cdca63",
    "HTML_EXPORT": "3dccafff45cc4e74",
    "EXPORT_PREPROCESS": "5aea00c54a8a1a00",
    "HIGHLIGHT": "576b5d79815a7147",
    "PYGMENTS_HIGHLIGHT": "fef49f1191720c07",
    "SANITIZE_TAGS": "1874d61346e90866",
    "CONVERT": "d46973a12f2e4e75",
    "INIT_ASSIGNMENT": "a7c144dc746ec205",
    "BASE_INIT": "bcfda8a38bd24281",
    "TASKS": "479e921aed437e9f",
    "DEDUP": "ee5f39e017935a9d",
    "SAVE": "ee891a8fe3657ce7",
    "KERNEL_INIT": "943995af8385790e",
    "SAVE_NOTEBOOK": "edef3c387d5c104a",
    "SAVE_COMMENT": "31f0186fac9c23ec",
    "DETERMINE": "f97b74436f014b62",
    "OUTPUT": "8ac7ba61fc598f51",
    "EXECUTE_CELL": "366a0d406d758da2",
    "TIMEOUT": "27d6db41082b053f",
    "SETUP_KERNEL": "23a2adbdaac601b3",
    "PREPROCESS": "58beeaafc496ae5f",
    "PRE_LAUNCH": "2cb873ebeb4f5c1c",
    "LAUNCH": "5a5d3e639018fd53",
    "MANAGER_LAUNCH": "5ba0dfe7cf7e85aa",
    "KERNELAPP": "a6f709f442443cde",
    "PRE_HANDLER": "b398c28ca5a83779",
    "POST_HANDLER": "074f5f5a14014b68",
    "START": "06e1b340cef392b7",
    "WAIT_FOR_READY": "0d732ad86fea3115",
    "DASK_REGISTER": "17168a925233a32a",
    "DASK_PLUGIN_ADD": "8e428d0c8cd0ae6f",
    "FG_GRADE_PUT": "3ed20a040053ae1b",
    "FG_SUBMISSION_GET": "fcaa384e0b4551c8",
    "FG_MANAGE_ASSIGNMENTS": "c787dd23a16132e4",
    "FG_MANAGE_SUBMISSIONS": "9aed54a816af7993",
    "FG_RENDER": "be17584c70850a3f",
    "FG_INIT_HANDLERS": "368ca4d6a6400d32",
    "EXTENSION_ORDER": "ce826f95f74ed112",
    "ANONYMOUS_USER": "5cbc7e248eac5545",
    "API_STUDENTS": "fd48c72aa14e14f5",
    "API_SUBMISSIONS": "d8f6bf5442c612a9",
    "API_NOTEBOOK_SUBMISSIONS": "4ec3d42c1fe3737c",
    "API_STUDENT_SUBMISSIONS": "dcc96e405dbec2be",
    "API_STUDENT_NOTEBOOKS": "0d8cc132d3440e86",
    "API_ASSIGNMENTS": "ceaa0437f93683a8",
    "API_NOTEBOOKS": "f7610c607c9c2f8a",
    "FG_API": "5db811d72133f57e",
    "OVERWRITE_CELL": "663c856017e542de",
    "OVERWRITE_NOTEBOOK": "3a94b453d8e53bee",
    "MISSING_GRADE_CELLS": "f4ca1468d48ab2df",
    "MISSING_TRANSFORM": "46157994037b2d40",
    "VALIDATE_START": "6c8419d8567523d7",
    "VALIDATE": "a34e58827bc65ffe",
    "VALIDATE_PREPROCESS": "ca1c6e172237f38c",
    "VALIDATE_CONFIG": "82a4dc81cf5e0852",
    "ON_EXECUTED": "e2154da9c7efffa0",
    "SHOWTRACEBACK": "6a5da68855007d73",
    "DO_EXECUTE": "78aa91d0af8b79f1",
    "DISPLAY_PUBLISH": "2dd0b1637badf9d7",
    "CHANNEL": "9ee7af67ed39b405",
    "DESERIALIZE": "d497eee289aaca1c",
    "START_CHANNELS": "2677d69c1507775d",
    "START_CLIENT": "0034f6fd2447b05f",
    "POLL_OUTPUT": "1619965a18581fa3",
    "PROCESS_MESSAGE": "e345991e03a03272",
    "POLL_REPLY": "fc81a9e9c11c2a90",
    "RAISE_FOR_ERROR": "b8e5969ea6d26abc",
}


# nbgrader's formgrader files the course copies (templates/formgrader/: in Chinese, with the course's additions)
# or whose globals static/course.js wraps (each page's view and insertRow, utils.js's helpers, the grading page's
# FormGrader, GradeUI and keyboard help): path under nbgrader/server_extensions/formgrader -> sha256, 16 digits
NBGRADER_FILES = {
    "templates/base.tpl": "d206a94d41438f28",
    "templates/base_403.tpl": "2d198706be4e302a",
    "templates/base_500.tpl": "e04e1f39b090c83c",
    "templates/formgrade/formgrade_macros.html.j2": "5eed6cc257f4aa3b",
    "templates/formgrade/index.html.j2": "7a7a2c7539d2327c",
    "templates/gradebook_assignments.tpl": "78460d266ac27b11",
    "templates/gradebook_base.tpl": "8c26028a36dea407",
    "templates/gradebook_notebook_submissions.tpl": "6ba31e53a5cd3c07",
    "templates/gradebook_notebooks.tpl": "82397c92104b1d18",
    "templates/manage_students.tpl": "0932178cf83a164e",
    "templates/manage_students_assignments.tpl": "cdb9b9ac6ccbca77",
    "templates/manage_students_base.tpl": "d186f462b0ee4271",
    "templates/manage_students_notebook_submissions.tpl": "571edb1ad5a753a1",
    "templates/manage_submissions.tpl": "b482829c57d325ea",
    "static/js/backbone_xsrf.js": "2ab315481ea25400",
    "static/js/formgrade.js": "53db14a9ea4a17ff",
    "static/js/formgrade_keyboardmanager.js": "4273e983197cc394",
    "static/js/formgrade_models.js": "cf65a763c01f137e",
    "static/js/gradebook_assignments.js": "c886c6a5727f8c03",
    "static/js/gradebook_notebook_submissions.js": "c8418c99ad5ae93f",
    "static/js/gradebook_notebooks.js": "bbc0efad0bb96789",
    "static/js/manage_students.js": "14379bf5c7471fac",
    "static/js/manage_students_assignments.js": "c6d6e52b376aaac0",
    "static/js/manage_students_notebook_submissions.js": "b970149ba92067b5",
    "static/js/manage_submissions.js": "530b74e8c265089d",
    "static/js/utils.js": "bf49532f75071613",
}


def _resolve(path):
    module, _, attribute = path.partition(":")
    obj = __import__(module, fromlist=["_"])
    for part in attribute.split(".") if attribute else ():
        obj = getattr(obj, part)
    return obj


def fingerprint(path):
    return hashlib.sha256(inspect.getsource(_resolve(path)).encode()).hexdigest()[:16]


@pytest.mark.parametrize("package, wanted", sorted(PINNED.items()))
def test_pinned_versions(package, wanted):
    assert version(package) == wanted, (
        f"{package} is {version(package)}, the course was built against {wanted}: review tests/test_internals.py "
        "and the code it names, then update constraints.txt and this pin")


@pytest.mark.parametrize("path, relies, key", INTERNALS, ids=[i[0] for i in INTERNALS])
def test_relied_on_internals_are_unchanged(path, relies, key):
    got = fingerprint(path)
    assert got == FINGERPRINTS[key], (
        f"{path} changed (fingerprint {got}): review {relies}; if it still holds, set FINGERPRINTS[{key!r}] = {got!r}")


@pytest.mark.parametrize("path", sorted(NBGRADER_FILES))
def test_the_formgrader_files_the_course_copies_or_wraps_are_unchanged(path):
    from pathlib import Path

    from nbgrader.server_extensions.formgrader import handlers
    got = hashlib.sha256((Path(handlers.root_path) / path).read_bytes()).hexdigest()[:16]
    assert got == NBGRADER_FILES[path], (
        f"nbgrader's formgrader {path} changed (fingerprint {got}): bring the course's copy in "
        f"src/attncourse/templates/formgrader/ up to date, or review what static/course.js wraps in it; then set "
        f"NBGRADER_FILES[{path!r}] = {got!r}")


def test_autograde_runs_nbgraders_execute_step():
    """grading/run/autograde.py replaces, in Autograde's default steps, `Execute` by CourseExecute, `OverwriteCells`
    by CourseOverwriteCells, `CheckCellMetadata` by CourseCheckCellMetadata and `SaveAutoGrades` by
    CourseSaveAutoGrades, and nothing else."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import CheckCellMetadata, Execute, OverwriteCells, SaveAutoGrades

    from attncourse.grading.course import nbgrader_config
    from attncourse.grading.run import autograde
    from attncourse.grading.run.execution import CourseExecute

    from conftest import ROOT
    ours = {Execute: CourseExecute, OverwriteCells: autograde.CourseOverwriteCells,
            CheckCellMetadata: autograde.CourseCheckCellMetadata, SaveAutoGrades: autograde.CourseSaveAutoGrades}
    config = autograde.grading_config(nbgrader_config(ROOT))
    for name, replaced in (("autograde_preprocessors", (Execute, SaveAutoGrades)),
                           ("sanitize_preprocessors", (OverwriteCells,))):
        steps = Autograde.class_traits()[name].default()
        assert all(steps.count(step) == 1 for step in replaced) and steps.count(CheckCellMetadata) == 1, (
            f"Autograde's {name} changed: {steps}; review grading_config")
        assert config.Autograde[name] == [ours.get(step, step) for step in steps]


def test_the_metadata_check_still_refuses_a_corrupted_cell_it_has_seen_valid():
    """CourseCheckCellMetadata skips a cell whose type and metadata passed before, and checks any other."""
    import nbformat
    from nbgrader.nbgraderformat import ValidationError

    from attncourse.grading.run.autograde import CourseCheckCellMetadata
    meta = {"grade": True, "solution": False, "locked": True, "points": 2, "grade_id": "t1", "schema_version": 3}
    cell = nbformat.v4.new_code_cell("assert True", metadata={"nbgrader": meta})
    nb = nbformat.v4.new_notebook(cells=[cell])
    CourseCheckCellMetadata().preprocess(nb, {})
    CourseCheckCellMetadata().preprocess(nb, {})  # seen: skipped
    del cell.metadata.nbgrader["points"]
    with pytest.raises(ValidationError):
        CourseCheckCellMetadata().preprocess(nb, {})


def test_formgrader_gives_nbconverts_mathjax_macro_the_courses_copy():
    """The course's grading page (templates/formgrader/formgrade/index.html.j2) calls nbconvert's `mathjax(url)`
    with the course's own MathJax and the configuration the macro's CDN default asks for."""
    from pathlib import Path

    import nbconvert

    from attncourse.grading.publish.formgrader.review import MATHJAX_CONFIG, TEMPLATES
    macro = Path(nbconvert.__file__).parents[4] / "share" / "jupyter" / "nbconvert" / "templates" / "base" / "mathjax.html.j2"
    text = macro.read_text(encoding="utf-8")
    assert "macro mathjax(url=" in text and f"?config={MATHJAX_CONFIG}" in text, f"{macro} changed"
    assert "{{ mathjax(resources.course_mathjax) }}" in (TEMPLATES / "formgrade" / "index.html.j2").read_text()


def test_jupyterlab_loads_prebuilt_extensions_as_the_course_validate_button_expects():
    """labextension/attncourse-validate/static/remoteEntry.js is a module-federation container written by hand:
    JupyterLab's bootstrap calls its init(share scope) and get('./extension'), and it takes @jupyterlab/apputils,
    @jupyterlab/services and @lumino/widgets from that scope."""
    import json
    import sys
    from pathlib import Path
    static = Path(sys.prefix) / "share" / "jupyter" / "lab" / "static"
    assert "await container.init(__webpack_share_scopes__.default)" in (static / "bootstrap.js").read_text()
    assert "await window._JUPYTERLAB[scope].get(module)" in (static / "index.out.js").read_text()
    singletons = json.loads((static / "package.json").read_text())["jupyterlab"]["singletonPackages"]
    for name in ("@jupyterlab/apputils", "@jupyterlab/services", "@lumino/widgets"):
        assert name in singletons, f"{name} is no longer one of JupyterLab's shared singletons"


def test_the_witness_finds_the_sdpa_kernels_it_replaces():
    """grading/protocol/witness.py registers its kernels through torch's C++ binding for the aten SDPA family at
    the dispatch keys that have one: the public operator is composite, the CPU flash kernel a CPU one."""
    import torch
    names = set(torch._C._dispatch_get_all_op_names())
    for name, key in (("aten::scaled_dot_product_attention", "CompositeImplicitAutograd"),
                      ("aten::_scaled_dot_product_attention_math", "CompositeImplicitAutograd"),
                      ("aten::_scaled_dot_product_flash_attention_for_cpu", "CPU"),
                      ("aten::_native_multi_head_attention", "CPU")):
        assert name in names and torch._C._dispatch_has_kernel_for_dispatch_key(name, key), (name, key)
    assert callable(torch._C._dispatch_library) and torch.backends.mha.get_fastpath_enabled() in (True, False)


def test_the_witness_reads_every_operator_it_replaces_as_it_is_imported():
    """grading/protocol/witness.py lists the operators whose kernels it replaces as it is imported (`OPERATORS`),
    not as each kernel installs it: no operator of the family may appear later, when a kernel has imported what it
    imports before the watch (`IMPORTED_FIRST`)."""
    import importlib

    from attncourse.grading.protocol import witness
    for module in witness.IMPORTED_FIRST:
        importlib.import_module(module)
    assert witness.OPERATORS == witness._operators()
    assert "scaled_dot_product_attention" in dict(witness.OPERATORS), witness.OPERATORS


def test_gradebooks_of_one_database_share_an_engine_and_see_a_replaced_file(tmp_path):
    from nbgrader.api import Gradebook

    from attncourse.grading.gradebook_engines import share_engines
    share_engines()
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gb:
        gb.add_student("s1")
        first = gb.engine
    (tmp_path / "gradebook.db").unlink()  # replaced on disk: a new Gradebook reads the new file
    with Gradebook(url) as gb:
        assert gb.engine is first
        assert [s.id for s in gb.students] == []


def test_a_gradebook_whose_tables_are_there_opens_without_the_schema_pass(tmp_path):
    """nbgrader's Gradebook asks about each table as it opens; with share_engines, an open that finds every table
    asks once, and a new database still gets them all."""
    import nbgrader.api
    from nbgrader.api import Gradebook
    from sqlalchemy import event

    from attncourse.grading import gradebook_engines
    gradebook_engines.share_engines()
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as gb:  # a new database: nbgrader creates its tables
        gb.add_student("s1")
        engine = gb.engine
    statements = []

    def count(*args):
        statements.append(args[2])

    event.listen(engine, "before_cursor_execute", count)
    try:
        for init in (gradebook_engines._nbgrader_open, gradebook_engines._open):
            statements.clear()
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(nbgrader.api.Gradebook, "__init__", init)
                with Gradebook(url) as gb:
                    assert [s.id for s in gb.students] == ["s1"]
            counted = len(statements)
            if init is gradebook_engines._nbgrader_open:
                nbgraders = counted
        with gradebook_engines.one_schema_check():  # a grading run: the first open asks, the next ones do not
            opens = []
            for _ in range(3):
                statements.clear()
                with Gradebook(url) as gb:
                    assert [s.id for s in gb.students] == ["s1"]
                opens.append(len(statements))
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert counted + 10 <= nbgraders, (counted, nbgraders)
    assert opens[0] == counted and opens[1] == opens[2] < counted, (opens, counted)
    (tmp_path / "gradebook.db").unlink()  # after the run, an open finds a replaced file's missing tables again
    with Gradebook(url) as gb:
        assert [s.id for s in gb.students] == []


def test_graded_kernels_use_the_course_kernel_manager():
    """nbgrader's Execute sets jupyter_client's AsyncKernelManager unless told otherwise: CourseExecute tells it
    CourseKernelManager, which waits for a killed kernel 5 ms at a time."""
    from attncourse.grading.run.execution import CourseExecute, CourseKernelManager
    assert CourseExecute().kernel_manager_class is CourseKernelManager


def test_the_course_command_ends_without_walking_its_objects(monkeypatch):
    """`course` (the installed script and `python -m attncourse.cli`) is `cli.run`: `main`, then `gc.freeze()`, so
    that Python's shutdown does not walk the objects torch and d2l made (1.1-1.3 s of each command)."""
    import gc
    from importlib.metadata import entry_points

    from attncourse import cli
    assert entry_points(group="console_scripts")["course"].value == "attncourse.cli:run"
    steps = []
    monkeypatch.setattr(cli, "main", lambda: steps.append("main") or 3)
    monkeypatch.setattr(gc, "freeze", lambda: steps.append("freeze"))
    with pytest.raises(SystemExit) as ended:
        cli.run()
    assert ended.value.code == 3 and steps == ["main", "freeze"]
