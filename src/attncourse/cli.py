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


def main(argv=None):
    parser = argparse.ArgumentParser(prog="course", description="注意力机制课程：讲师与助教工具")
    parser.add_argument("--root", type=Path, default=None, help="课程根目录（默认：向上查找 course.toml）")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("tidy", help="清除 notebook 输出与多余元数据，按 course.toml 更新标题页")
    p.add_argument("--check", action="store_true", help="只检查，不写入")
    p.set_defaults(func=cmd_tidy)
    p = sub.add_parser("figures", help="重新生成 img/ 中的图")
    p.set_defaults(func=cmd_figures)
    args = parser.parse_args(argv)
    args.root = Path(args.root or find_root()).resolve()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
