"""Figures for `img/`, made by code. Each unit module maps file names to functions that write them."""
import importlib

UNIT_MODULES = ["scoring", "multihead", "gqa"]


def save(fig, path):
    """Save and close; an SVG gets no date, so that re-running `course figures` changes no file."""
    import matplotlib.pyplot as plt
    fig.savefig(path, metadata={"Date": None} if str(path).endswith(".svg") else None)
    plt.close(fig)


def all_figures():
    """{file name: writer(path)} over every unit's `FIGURES`."""
    figures = {}
    for name in UNIT_MODULES:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        figures.update(module.FIGURES)
    return figures


def write_all(img_dir):
    from ..plotting import use_course_style
    import matplotlib
    matplotlib.use("Agg")
    written = []
    for filename, writer in sorted(all_figures().items()):
        use_course_style()
        writer(img_dir / filename)
        written.append(filename)
    return written
