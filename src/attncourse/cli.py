"""`course`: the instructor's commands."""
import argparse
import sys
from pathlib import Path

from .config import find_root


def cmd_tidy(args):
    from .notebooks import course_notebooks, tidy
    changed = [p for p in course_notebooks(args.root) if tidy(p, write=not args.check)]
    for p in changed:
        print(("需要整理: " if args.check else "已整理: ") + str(p.relative_to(args.root)))
    return 1 if (args.check and changed) else 0


def cmd_figures(args):
    from .figures import write_all
    for name in write_all(args.root / "img"):
        print("img/" + name)
    return 0


def cmd_build(args):
    import os
    import warnings
    from sqlalchemy.exc import SAWarning
    # nbgrader's own ORM chatter and nbformat's id notice say nothing to an instructor.
    warnings.filterwarnings("ignore", category=SAWarning)
    warnings.filterwarnings("ignore", message="Cell is missing an id field")
    from .grading.autograde import SandboxUnavailable
    from .grading.pipeline import ToolchainError, build
    from .grading.release import LeakError
    try:
        build(args.root, args.class_dir, args.jobs or os.cpu_count() or 1, with_slides=not args.no_slides)
    except (ToolchainError, LeakError, FileNotFoundError, SandboxUnavailable) as exc:
        print(f"\n✘ {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_screenshots(args):
    from .notebooks import decks
    from .slides import screenshots
    chosen = [d for d in decks(args.root) if not args.deck or d.stem in args.deck]
    out = args.out or args.root / "build" / "screenshots"
    fits = screenshots(args.root, out, chosen)
    too_tall = [f for f in fits if not f.fits]
    print(f"{len(fits)} 张幻灯片截图（1280×800）已写入 {out}/html/ 与 {out}/rise/")
    for f in too_tall:
        print(f"✘ 超出屏幕：{f}")
    return 1 if too_tall else 0


def main(argv=None):
    from .grading.course import use_this_environment
    use_this_environment()
    parser = argparse.ArgumentParser(prog="course", description="注意力机制课程：讲师与助教工具")
    parser.add_argument("--root", type=Path, default=None, help="课程根目录（默认：向上查找 course.toml）")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("tidy", help="清除 notebook 输出与多余元数据，按 course.toml 更新标题页")
    p.add_argument("--check", action="store_true", help="只检查，不写入")
    p.set_defaults(func=cmd_tidy)
    p = sub.add_parser("figures", help="重新生成 img/ 中的图")
    p.set_defaults(func=cmd_figures)
    p = sub.add_parser("build", help="主任务：生成学生版、运行讲义并生成离线幻灯片、评分、反馈、成绩与报告")
    p.add_argument("--class", dest="class_dir", type=Path, default=None,
                   help="提交目录，结构为 <学生>/<作业>/*.ipynb（如 submitted）；默认评分演示班级")
    p.add_argument("--jobs", type=int, default=None, help="同时评分的学生数（默认：CPU 核数）")
    p.add_argument("--no-slides", action="store_true", help="跳过讲义执行与幻灯片")
    p.set_defaults(func=cmd_build)
    p = sub.add_parser("screenshots", help="运行讲义，在离线 HTML 与 RISE 中为每张幻灯片截图（1280×800），列出超出屏幕的幻灯片")
    p.add_argument("--out", type=Path, default=None, help="截图目录（默认 build/screenshots）")
    p.add_argument("deck", nargs="*", help="只截这些讲义（文件名去掉 .ipynb），默认全部")
    p.set_defaults(func=cmd_screenshots)
    args = parser.parse_args(argv)
    args.root = Path(args.root or find_root()).resolve()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
