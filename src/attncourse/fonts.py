"""Chinese glyphs in matplotlib on Linux, macOS and Windows."""
from pathlib import Path

import matplotlib
from matplotlib import font_manager

# Families that carry Simplified Chinese, in order of preference, per platform.
CJK_FAMILIES = [
    "Noto Sans CJK SC", "Source Han Sans SC", "Noto Sans SC",  # Linux (fonts-noto-cjk), Adobe
    "PingFang SC", "Hiragino Sans GB", "Heiti SC", "STHeiti",  # macOS
    "Microsoft YaHei", "SimHei", "DengXian",  # Windows
    "WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Droid Sans Fallback",  # older Linux
    # matplotlib reads only the first face of Debian's NotoSansCJK-Regular.ttc, which is the JP one.
    # Noto CJK is pan-CJK: that face holds every Simplified Chinese glyph too.
    "Noto Sans CJK JP",
]
# Where Debian/Ubuntu and Fedora put the Noto CJK files; matplotlib's cache may predate the install.
FONT_DIRS = ["/usr/share/fonts/opentype/noto", "/usr/share/fonts/google-noto-cjk",
             "/usr/share/fonts/noto-cjk", "/usr/share/fonts/truetype/wqy"]


def _register_system_cjk_files() -> None:
    for folder in FONT_DIRS:
        for path in sorted(Path(folder).glob("*CJK*Regular*")) + sorted(Path(folder).glob("wqy*")):
            try:
                font_manager.fontManager.addfont(str(path))
            except (OSError, RuntimeError):
                pass


def find_cjk_family() -> str | None:
    """The first installed family from CJK_FAMILIES, or None."""
    for attempt in range(2):
        installed = {f.name for f in font_manager.fontManager.ttflist}
        for family in CJK_FAMILIES:
            if family in installed:
                return family
        if attempt == 0:
            _register_system_cjk_files()
    return None


def setup_cjk_font() -> str | None:
    """Put a CJK family first in matplotlib's sans-serif list. Returns its name (None if none found)."""
    family = find_cjk_family()
    if family:
        rc = matplotlib.rcParams
        rc["font.sans-serif"] = [family] + [f for f in rc["font.sans-serif"] if f != family]
        rc["font.family"] = "sans-serif"
    matplotlib.rcParams["axes.unicode_minus"] = False  # CJK fonts often lack U+2212
    return family
