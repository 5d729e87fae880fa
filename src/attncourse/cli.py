"""`course`: the instructor's commands, named as nbgrader names the steps."""
import argparse
import gc
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from .config import find_root


def cmd_tidy(args: argparse.Namespace) -> int:
    from .notebooks import course_notebooks, tidied, tidy
    if args.stdin:  # git's clean filter (.gitattributes): what git stores of a deck saved while presenting
        sys.stdout.write(tidied(sys.stdin.read(), args.root / args.stdin, args.root))
        return 0
    changed = [p for p in course_notebooks(args.root) if tidy(p, write=not args.check, root=args.root)]
    for p in changed:
        print(("需要整理: " if args.check else "已整理: ") + str(p.relative_to(args.root)))
    return 1 if (args.check and changed) else 0


def cmd_figures(args: argparse.Namespace) -> int:
    from .figures import write_all
    for name in write_all(args.root / "img"):
        print("img/" + name)
    return 0


def cmd_screenshots(args: argparse.Namespace) -> int:
    from .notebooks import decks
    from .slides import screenshots
    chosen = [d for d in decks(args.root) if not args.deck or d.stem in args.deck]
    from .grading.course import build_dir
    out = args.out or build_dir(args.root) / "screenshots"
    from .slides import KIND_NAMES, LEGIBLE_PX, smallest
    fits = screenshots(args.root, out, chosen)
    print(f"{len(fits)} 张幻灯片截图（1280×800）已写入 {out}/html/ 与 {out}/rise/")
    for deck in dict.fromkeys(f.deck for f in fits):
        least = smallest([f for f in fits if f.deck == deck])
        print(f"  {deck}: 最小字号 " + "，".join(f"{KIND_NAMES[k]} {px:g} px" for k, px in least.items()))
    bad = [f for f in fits if not f.ok]
    for f in bad:
        print(f"✘ {'超出屏幕' if not f.fits else '字太小'}：{f}")
    if any(f.too_small for f in bad):
        print("  后排可读的最小字号：" + "，".join(f"{KIND_NAMES[k]} {px} px" for k, px in LEGIBLE_PX.items()))
    return 1 if bad else 0


def cmd_build(args: argparse.Namespace) -> None:
    from .grading.authoring import demo
    from .grading.commands import step
    if not args.no_slides:
        from .slides import build_slides
        step("运行讲义并生成离线幻灯片")
        from .grading.course import build_dir
        build_slides(args.root, build_dir(args.root) / "slides", build_dir(args.root) / "vendor" / "node_modules")
    demo.build(args.root, args.jobs)


def cmd_release(args: argparse.Namespace) -> None:
    from .grading import commands
    commands.release_assignments(args.root, args.assignment, force=args.force)


def cmd_collect(args: argparse.Namespace) -> None:
    from .grading import commands
    commands.collect_download(args.root, args.source, args.assignment)


def cmd_grade(args: argparse.Namespace) -> None:
    from .grading import commands
    commands.grade(args.root, args.assignment, args.student, args.jobs, args.class_dir, args.cluster)
    print("\n下一步：formgrader 中人工评分书面题与待复核的提交；course feedback；course report；course export")


def cmd_cluster_certs(args: argparse.Namespace) -> None:
    from .grading.run import certificates
    certificates.make(args.folder, args.host)
    print(f"已在 {args.folder} 中生成证书。调度器：ca.pem scheduler.pem scheduler.key；每台评分机：ca.pem worker.pem "
          "worker.key；运行 course grade 的机器：ca.pem client.pem client.key（c.Cluster.certificates）。"
          "ca.key 只留在讲师手中，不要复制到集群上。")


def cmd_feedback(args: argparse.Namespace) -> None:
    from .grading import commands
    commands.publish_feedback(args.root, commands.class_outcomes(args.root, args.assignment))


def cmd_report(args: argparse.Namespace) -> None:
    from .grading import commands
    commands.write_report(args.root, commands.class_outcomes(args.root, args.assignment))


def cmd_export(args: argparse.Namespace) -> None:
    from .grading import commands
    commands.export_grades(args.root, args.to)


def cmd_review(args: argparse.Namespace) -> None:
    from .grading import commands
    accept = True if args.accept else False if args.reject else None
    commands.review_holds(args.root, args.assignment, args.student, accept, args.by or "", args.note)


def cmd_bundle(args: argparse.Namespace) -> None:
    from .grading.release import bundle
    path = bundle.build(args.root, args.assignment)
    print(f"  ✔ {path.relative_to(args.root)}：发给学生的作业包（学生版 notebook、图、attncourse 安装包、说明）")


def cmd_new_unit(args: argparse.Namespace) -> None:
    from .grading.authoring import new_unit
    for path in new_unit.create(args.root, args.unit, args.title, args.notebook, args.deck):
        print(f"  ✔ {path.relative_to(args.root)}")
    print("\n下一步：写讲义与题目；在目录中填 LECTURER、讲义代码与至少 8 个常见错误；"
          f"python -m attncourse.grading.authoring.quickcheck {args.unit}；course release {args.unit}（见 AUTHORING.md）")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="course", description="注意力机制课程：讲师与助教工具（nbgrader 的步骤名）")
    p.add_argument("--root", type=Path, default=None, help="课程根目录（默认：从当前目录向上查找 course.toml）")
    sub = p.add_subparsers(dest="command", required=True)
    jobs: dict[str, Any] = {"type": int, "default": os.cpu_count() or 1,
                            "help": "同时运行的评分内核数，即同时执行的提交数（默认：CPU 核数）"}

    c = sub.add_parser("tidy", help="清除 notebook 输出与多余元数据，按 course.toml 更新标题页")
    c.add_argument("--check", action="store_true", help="只检查，不写入")
    c.add_argument("--stdin", metavar="PATH", default=None,
                   help="git 的清理过滤器：从标准输入读入 PATH 的内容，把整理后的内容写到标准输出")
    c.set_defaults(func=cmd_tidy)
    sub.add_parser("figures", help="重新生成 img/ 中的图").set_defaults(func=cmd_figures)
    c = sub.add_parser("screenshots", help="为每张幻灯片截图（离线 HTML 与 RISE，1280×800），测量字号，列出超出屏幕或字太小的幻灯片")
    c.add_argument("--out", type=Path, default=None, help="截图目录（默认 build/screenshots）")
    c.add_argument("deck", nargs="*", help="只截这些讲义（文件名去掉 .ipynb），默认全部")
    c.set_defaults(func=cmd_screenshots)
    c = sub.add_parser("build", help="演示：运行讲义生成离线幻灯片，并在 build/demo/ 中发布、评分、反馈、报告演示班级")
    c.add_argument("--jobs", **jobs)
    c.add_argument("--no-slides", action="store_true", help="跳过讲义与幻灯片")
    c.set_defaults(func=cmd_build)
    c = sub.add_parser("release", help="生成学生版 release/，检查泄露，记录发布版本；已有提交时拒绝（--force 强制）")
    c.add_argument("assignment", nargs="*", help="作业（默认：source/ 中的全部）")
    c.add_argument("--force", action="store_true", help="已有学生提交时仍重新发布（会说明对已提交作业的影响）")
    c.set_defaults(func=cmd_release)
    c = sub.add_parser("collect", help="把 LMS 下载的 zip 或文件夹收集到 submitted/<学生>/<作业>/")
    c.add_argument("source", type=Path, help="zip 文件或文件夹（文件名格式见 nbgrader_config.py）")
    c.add_argument("--assignment", required=True, help="作业，如 a1_scoring")
    c.set_defaults(func=cmd_collect)
    c = sub.add_parser("grade", help="按发布的版本自动评分 submitted/（保留人工评分；未改动的提交沿用成绩）")
    c.add_argument("assignment", nargs="*", help="作业（默认：全部已发布的）")
    c.add_argument("--student", default=None, help="只评（并重评）这名学生")
    c.add_argument("--class", dest="class_dir", type=Path, default=None,
                   help="先把这个 <学生>/<作业>/ 结构的文件夹并入 submitted/，再评分")
    c.add_argument("--jobs", **jobs)
    c.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help="在这个 Dask 调度器的工作进程上评分，如 tcp://10.0.0.5:8786（默认：c.Cluster.address；"
                        "未设置则在本机评分）")
    c.set_defaults(func=cmd_grade)
    c = sub.add_parser("cluster-certs", help="为评分用的 Dask 集群生成证书（TLS 双向认证：只有持有本课程证书的调度器、"
                                              "工作进程和评分机能互相连接）")
    c.add_argument("folder", type=Path, help="写入证书的文件夹")
    c.add_argument("--host", action="append", default=[], help="调度器的主机名或 IP（可多次给出）")
    c.set_defaults(func=cmd_cluster_certs)
    c = sub.add_parser("review", help="复核暂扣分数的提交：不加 --accept/--reject 时列出待复核的；--accept 计入，--reject 记 0 分")
    c.add_argument("assignment", nargs="?", help="作业")
    c.add_argument("student", nargs="?", help="学生")
    decision = c.add_mutually_exclusive_group()
    decision.add_argument("--accept", action="store_true", help="确认无问题：暂扣的自动评分计入")
    decision.add_argument("--reject", action="store_true", help="确认有问题：暂扣的分数不计入")
    c.add_argument("--by", default=None, help="复核人姓名（默认：c.Reviewer.name，否则本机的用户名；root 不算）")
    c.add_argument("--note", default="", help="复核的理由，写入记录，学生会在反馈中看到")
    c.set_defaults(func=cmd_review)
    c = sub.add_parser("feedback", help="为已评分的提交生成反馈 feedback/（不含测试代码，发布前检查泄露）")
    c.add_argument("assignment", nargs="*")
    c.set_defaults(func=cmd_feedback)
    c = sub.add_parser("report", help="成绩表 build/grades.csv 与班级报告 build/report/report.{md,html}")
    c.add_argument("assignment", nargs="*")
    c.set_defaults(func=cmd_report)
    c = sub.add_parser("export", help="导出 LMS 可导入的成绩 CSV（学号、姓名、各作业、总分、说明）")
    c.add_argument("--to", type=Path, default=Path("build/grades_lms.csv"), help="输出文件（默认 build/grades_lms.csv）")
    c.set_defaults(func=cmd_export)
    c = sub.add_parser("new-unit", help="新单元的骨架：源 notebook（nbgrader 元数据、可见/隐藏测试的写法）、错误目录、讲义")
    c.add_argument("unit", help="作业编号，如 a4_window")
    c.add_argument("--title", required=True, help="单元标题，如 窗口注意力")
    c.add_argument("--notebook", default=None, help="作业 notebook 名（默认：编号下划线后的部分）")
    c.add_argument("--deck", default=None, help="讲义文件名（默认：下一个编号 + notebook 名）")
    c.set_defaults(func=cmd_new_unit)
    c = sub.add_parser("bundle", help="发给学生的作业包 build/student/<作业>.zip")
    c.add_argument("assignment")
    c.set_defaults(func=cmd_bundle)
    return p


def main(argv: list[str] | None = None) -> int:
    from .grading.course import use_this_environment
    use_this_environment()
    # nbgrader's own ORM chatter and nbformat's id notice say nothing to an instructor.
    from sqlalchemy.exc import SAWarning
    warnings.filterwarnings("ignore", category=SAWarning)
    warnings.filterwarnings("ignore", message="Cell is missing an id field")
    args = parser().parse_args(argv)
    try:
        args.root = Path(args.root or find_root()).resolve()
    except FileNotFoundError as exc:
        print(f"\n✘ {exc}", file=sys.stderr)
        return 1
    if args.command == "grade":  # its first line within a second: the imports below take several
        print("course grade：载入评分程序（nbgrader、torch）……", flush=True)
    from .grading.commands import ToolchainError
    from .grading.gradebook_engines import share_engines
    from .grading.release.student_version import LeakError, ReleaseRefused
    share_engines()
    try:
        return args.func(args) or 0
    except (ToolchainError, LeakError, ReleaseRefused, FileNotFoundError, ValueError) as exc:
        print(f"\n✘ {exc}", file=sys.stderr)
        return 1


def run() -> None:
    """The `course` command: `main`, then the process ends. Before it ends, the garbage collector is told to leave
    the objects there are (`gc.freeze`): Python's shutdown otherwise walks, more than once, the millions that torch
    and d2l made, which took 1.1–1.3 s of each command that imported them (5.2–5.5 s against 4.1–4.2 s for an
    import of d2l.torch and exit, on the 2-core machine)."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
