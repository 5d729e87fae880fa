"""The instructor's grading pipeline. Its folders are the stages a submission passes through, in order:

    release/    source/<a>/  →  release/<a>/ (student versions, leak-checked), released.json, the student bundle
    intake/     an LMS download  →  submitted/<student>/<a>/  →  a staged copy only the grader writes
    isolation/  a sandbox per kernel (bubblewrap), kernels forked from a preloaded process
    protocol/   test cells run in the grader; the student's names are proxies to the kernel; data on the wire
    run/        nbgrader's autograde around it all: verdicts, review flags, forbidden shortcuts, likely
                mistakes (diagnosis), records
    publish/    feedback pages (no hidden test by construction), the grades CSV and class report, the LMS export
    authoring/  the demo class, the catalogs of variants, the author's quick check

Modules at this level are shared by every stage: `model` (outcomes and statuses), `cells` (nbgrader's cell facts),
`catalogs` (a unit's catalog of mistakes, its format), `deck_code` (the code a deck teaches, for catalogs),
`syntax` (reading code), `course` (the course folder's names and nbgrader's config), `records` (what grading keeps
between runs, and its one writer: grades, holds, review decisions), `gradebook_engines` (one database engine per
gradebook, shared by nbgrader's Gradebooks), `safe_html` (student markup made inert), `text`
(student text made safe for a terminal, CSV or markdown), `files` and `logs`. `commands` runs the stages as the
`course` commands; it comes after publish/ and before authoring/, whose demo course runs those commands.

A module imports only the shared modules and the stages above its own, never one below, and no import
forms a circle anywhere in attncourse: `tests/test_layout.py` checks both.
"""
