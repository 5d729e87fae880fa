// The course's formgrader (src/attncourse/grading/publish/formgrader): loaded after nbgrader's page script.
// - What nbgrader's scripts write (dialogs, tooltips, table search, "None", "Submission #3") appears in Chinese.
// - Each list row shows its outcome from the records (the `course` entry of nbgrader's API rows, lists.py): the
//   status in the words every output uses, held and failed rows marked, no score where there is no grade, and
//   a held row's points in the report's words, never the 0 nbgrader keeps for the held points meanwhile.
// - The grading page: the decision on a held submission (review.py) and the reviewer's name sent with each score.
(function () {
    "use strict";

    var WORDS = {
        "Search:": "搜索：", "OK": "确定", "Close": "关闭", "Save": "保存", "Cancel": "取消", "Saving...": "正在保存……",
        "Student ID": "学号", "First name (optional)": "名（可不填）", "Last name (optional)": "姓（可不填）",
        "Email (optional)": "邮箱（可不填）", "Add New Student": "添加学生", "Please wait...": "请稍候……",
        "Log Output": "输出", "Traceback": "出错位置", "Success": "完成", "Error": "出错", "None": "—", "None, None": "—",
        "needs autograding": "尚未评分", "needs manual grading": "需要人工评分", "graded": "已评分",
        "Keyboard shortcuts": "快捷键", "Submission flagged": "已标记这份提交", "Submission unflagged": "已取消标记",
        "Show student name": "显示学生姓名", "Hide student name": "隐藏学生姓名",
        "Type any comments here (supports Markdown and MathJax)": "在这里写评语（可以用 Markdown 和 MathJax 公式）",
        "Move to the next score or comment input": "移到下一个分数或评语框",
        "Move to the previous score or comment input": "移到上一个分数或评语框",
        "Defocus and save the current score or comment input": "离开并保存当前的分数或评语框",
        "Refocus the most recent score or comment input": "回到刚才的分数或评语框",
        "Move to the same score or comment input of the next submission": "到下一份提交的同一个框",
        "Move to the same score or comment input of the next submission with failed tests":
            "到下一份有测试未通过的提交的同一个框",
        "Move to the same score or comment input of the previous submission": "到上一份提交的同一个框",
        "Move to the same score or comment input of the previous submission with failed tests":
            "到上一份有测试未通过的提交的同一个框",
        "Flag the submission": "标记或取消标记这份提交"
    };
    var PATTERNS = [
        [/^Editing (.+)$/, "修改 $1"], [/^Submission #(\d+)$/, "提交 #$1"],
        [/^(.+) \(no submission\)$/, "$1（没有提交）"], [/^(.+) \(not autograded\)$/, "$1（尚未评分）"],
        [/^(.+) \(file missing\)$/, "$1（文件缺失）"], [/^There was an error (.*)$/, "出错了：$1"],
        [/^In\s*\[(.*)\]:$/, "输入 [$1]："], [/^Out\s*\[(.*)\]:$/, "输出 [$1]："]
    ];
    // notebook content (the student's and the assignment's text) is never translated
    var CONTENT = ".text_cell_render, .input_area, .output_wrapper, pre, code";

    function translated(text) {
        var key = text.trim();
        if (Object.prototype.hasOwnProperty.call(WORDS, key)) return text.replace(key, WORDS[key]);
        for (var i = 0; i < PATTERNS.length; i++) {
            if (PATTERNS[i][0].test(key)) return text.replace(key, key.replace(PATTERNS[i][0], PATTERNS[i][1]));
        }
        return text;
    }

    function translate(node) {
        if (node.nodeType === Node.TEXT_NODE) {
            var parent = node.parentElement;
            if (parent && !parent.closest(CONTENT)) {
                var text = translated(node.nodeValue);
                if (text !== node.nodeValue) node.nodeValue = text;
            }
            return;
        }
        if (node.nodeType !== Node.ELEMENT_NODE || node.closest(CONTENT)) return;
        ["placeholder", "title", "data-original-title"].forEach(function (name) {
            var value = node.getAttribute(name);
            if (value && translated(value) !== value) node.setAttribute(name, translated(value));
        });
        node.childNodes.forEach(translate);
    }

    // tooltips given their text in a script (Bootstrap keeps it in its options)
    var tooltip = $.fn.tooltip;
    $.fn.tooltip = function (options) {
        if (options && typeof options.title === "string") options.title = translated(options.title);
        return tooltip.apply(this, arguments);
    };
    $.extend($.fn.tooltip, tooltip);

    if ($.fn.dataTable) {
        $.extend(true, $.fn.dataTable.defaults, {language: {
            search: "搜索：", emptyTable: "没有数据", zeroRecords: "没有符合的行", loadingRecords: "正在载入……"}});
    }

    $(function () {
        translate(document.body);
        new MutationObserver(function (changes) {
            changes.forEach(function (change) {
                if (change.type === "childList") change.addedNodes.forEach(translate);
                else translate(change.target);
            });
        }).observe(document.body, {childList: true, subtree: true, characterData: true, attributes: true,
                                   attributeFilter: ["placeholder", "title", "data-original-title"]});
    });

    // --- each row's outcome ---

    function number(x) {
        return roundToPrecision(x, 2);
    }

    function label(o, withAssignment) {
        return $("<span/>").addClass("label course-status course-" + o.status).attr("title", o.detail || "")
            .text((withAssignment ? o.assignment + " " : "") + o.label);
    }

    function none(cell) {
        return $(cell).empty().text("—").attr("data-order", -1);
    }

    function mark(row, status) {
        row.removeClass(function (i, names) { return (names.match(/course-row-\S+/g) || []).join(" "); });
        if (status) row.addClass("course-row-" + status);
    }

    // the page's insertRow adds a status cell after cell `at` (at the end when `at` is -1)
    function statusColumn(at) {
        var insert = window.insertRow;
        window.insertRow = function (table) {
            var row = insert(table);
            var cell = $("<td/>").addClass("text-center course-cell");
            if (at < 0) row.append(cell); else row.children().eq(at).after(cell);
            return row;
        };
    }

    function afterRender(View, show) {
        var render = View.prototype.render;
        View.prototype.render = function () {
            var out = render.apply(this, arguments);
            show.call(this, this.model.get("course"), this.$el.find(".course-cell"));
            return out;
        };
    }

    function status(cell, row, c) {
        cell.empty();
        if (!c) {
            none(cell).addClass("course-none").attr("title", "这份作业还没有收取");
            mark(row, null);
            return;
        }
        cell.append(label(c)).attr("data-order", c.rank);
        if (!c.scored && c.detail) {  // why there is no grade
            cell.append($("<div/>").addClass("course-reason").text(c.detail).attr("title", c.detail));
        }
        mark(row, c.status);
    }

    function counts(cell, c) {
        cell.empty();
        if (!c || !c.counts.length) { none(cell); return; }
        c.counts.forEach(function (n) {
            cell.append(label({status: n.status, label: n.label + " " + n.n})).append(" ");
        });
    }

    function plainName(cell) {  // a name that nbgrader wrote with an English note
        var text = cell.text().replace(/ \((no submission|not autograded|file missing)\)$/, "");
        if (!cell.find("a").length) cell.text(text);
    }

    function noScores(view, c, cells) {
        if (!c || !c.scored) cells.forEach(function (name) { if (view[name]) none(view[name]); });
        if (c && c.held_score) {  // the total as the report reads it; the autograded part waits as a whole
            var why = "自动评分的分数待复核，复核后才计入";
            if (view.$score) view.$score.text(c.held_score).addClass("course-held-score").attr("title", why);
            if (view.$code_score) view.$code_score.text("待复核").addClass("course-held-score").attr("title", why);
        }
    }

    var SCORES = ["$score", "$code_score", "$written_score", "$task_score"];
    var FLAGS = ["$needs_manual_grade", "$tests_failed", "$flagged"];

    if (typeof StudentUI !== "undefined") {  // Manage Students
        statusColumn(2);
        afterRender(StudentUI, function (c, cell) {
            c = c || {outcomes: [], score: null, name: ""};
            var name = c.name || "—";
            this.$name.attr("data-order", name).find("a").text(name);
            cell.empty().attr("data-order", c.rank);
            if (!c.outcomes.length) none(cell).addClass("course-none").attr("title", "还没有收取这名学生的作业");
            c.outcomes.forEach(function (o) { cell.append(label(o, true)).append(" "); });
            var worst = c.outcomes.slice().sort(function (a, b) { return a.rank - b.rank; })[0];
            mark(this.$el, worst ? worst.status : null);
            if (c.score !== null) this.$score.text(number(c.score) + " / " + number(c.max_score));
            else if (c.held) none(this.$score).text("待复核").attr("title", "有分数待复核，复核后才有总分");
            else none(this.$score).attr("title", "有作业没有成绩，不计总分");
        });
    }

    if (typeof StudentSubmissionUI !== "undefined") {  // a student's assignments
        statusColumn(0);
        afterRender(StudentSubmissionUI, function (c, cell) {
            plainName(this.$name);
            status(cell, this.$el, c);
            noScores(this, c, SCORES);
        });
    }

    if (typeof StudentSubmittedNotebookUI !== "undefined") {  // a student's notebooks of one assignment
        statusColumn(0);
        afterRender(StudentSubmittedNotebookUI, function (c, cell) {
            plainName(this.$name);
            status(cell, this.$el, c);
            noScores(this, c, SCORES);
            if (!c || !c.scored) FLAGS.forEach(function (name) { this[name].empty(); }, this);
        });
    }

    if (typeof SubmissionUI !== "undefined") {  // Manage Submissions: the course's steps replace the buttons
        var insert = window.insertRow;
        window.insertRow = function (table) {
            var row = insert(table);
            row.find(".autograde, .generate-feedback, .release-feedback").remove();
            return row;
        };
        afterRender(SubmissionUI, function (c) {
            var name = (c && c.name) || "—";
            var link = this.$student_name.find("a");
            if (link.length) link.text(name); else this.$student_name.text(name);
            this.$student_name.attr("data-order", name);
            status(this.$status, this.$el, c);
            noScores(this, c, ["$score"]);
        });
    }

    if (typeof AssignmentUI !== "undefined") {  // Manual Grading: the assignments
        statusColumn(-1);
        afterRender(AssignmentUI, function (c, cell) { counts(cell, c); });
    }

    if (typeof NotebookUI !== "undefined") {  // Manual Grading: an assignment's notebooks
        statusColumn(-1);
        afterRender(NotebookUI, function (c, cell) { counts(cell, c); });
    }

    if (typeof SubmittedNotebookUI !== "undefined") {  // Manual Grading: a notebook's submissions
        statusColumn(1);
        afterRender(SubmittedNotebookUI, function (c, cell) {
            this.$name.find(".name-hidden").text("提交 #" + (this.model.get("index") + 1));
            if (c && c.name) this.$name.find(".name-shown").text(c.name);
            status(cell, this.$el, c);
            noScores(this, c, SCORES);
        });
        window.updateToggleNamesButtonLabel = function () {
            var hidden = $(".glyphicon.name-hidden").toArray().some(function (el) { return $(el).is(":visible"); });
            $("#toggle_names").text(hidden ? "显示全部姓名" : "隐藏全部姓名");
        };
        window.toggleAllNames = function () {
            var show = $("#toggle_names").text() === "显示全部姓名";
            $(show ? ".glyphicon.name-hidden" : ".glyphicon.name-shown").toArray().forEach(function (x) { x.click(); });
        };
    }

    // --- the grading page: the decision on a held submission, and who enters held cells' points ---

    if (typeof FormGrader !== "undefined" && window.course && course.api) {
        var REMEMBERED = "attncourse-reviewer";

        var reviewer = function () {
            var field = $("#course-reviewer");
            return ((field.length ? field.val() : "") || localStorage.getItem(REMEMBERED) || "").trim();
        };
        var message = function (text) {
            var box = $("#course-review-message");
            if (!box.length) box = $("#statusmessage").css({color: "rgba(200, 0, 0, 0.8)"}).show();
            box.text(text).addClass("text-danger");
            if (box[0].scrollIntoView) box[0].scrollIntoView({block: "center"});
        };

        $(function () {
            var field = $("#course-reviewer");
            if (field.length && !field.val()) field.val(localStorage.getItem(REMEMBERED) || "");
            field.on("change", function () {
                if (reviewer()) localStorage.setItem(REMEMBERED, reviewer());
            });
            // formgrader's keys (Tab to the next score, Enter back to it) stay out of the form
            $("#course-review").on("keydown", function (e) { e.stopPropagation(); });
            $("#course-review button[data-accept]").on("click", function () {
                var accept = $(this).data("accept") === true;
                var note = $("#course-review-note").val().trim();
                var name = reviewer();
                if (!name) { message("请写上复核人的姓名：复核决定要记录是谁做的。"); return; }
                if (!accept && !note) { message("不计入时请写明理由：学生会在反馈中看到它。"); return; }
                localStorage.setItem(REMEMBERED, name);
                $("#course-review button").prop("disabled", true);
                $.ajax({method: "POST", url: course.api + "/" + submission_id, contentType: "application/json",
                        data: JSON.stringify({accept: accept, note: note, reviewer: name})})
                    .done(function () { location.reload(); })
                    .fail(function (xhr) {
                        $("#course-review button").prop("disabled", false);
                        message((xhr.responseJSON && xhr.responseJSON.error) || "没有保存：" + xhr.status);
                    });
            });
        });

        // each score sent with the reviewer's name: a held cell's score needs it (review.py)
        $.ajaxPrefilter(function (options, original, xhr) {
            if (options.type.toUpperCase() === "PUT" && reviewer()) {
                xhr.setRequestHeader(course.header, encodeURIComponent(reviewer()));
            }
        });
        $(document).ajaxComplete(function (event, xhr) {
            if (xhr.getResponseHeader(course.decided_header)) location.reload();  // the banner follows
        });
        $(document).ajaxError(function (event, xhr, options) {
            if (options.type.toUpperCase() === "PUT" && xhr.status === 400) {
                var found = {};
                try { found = JSON.parse(xhr.responseText); } catch (e) { found = {}; }
                message(found.error || "分数没有保存");
                formgrader.grades.fetch({data: {submission_id: submission_id}});  // the boxes show what is saved
            }
        });
    }
})();
