"""Helpers shared by the decks, the assignments and the instructor tools of the attention course.

Students may import this package: it holds plotting, fonts and device choice, never an answer. The helpers are
imported when first used (PEP 562), so that the course's commands, which need neither torch nor matplotlib to
start, do not pay for importing them.
"""
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .device import get_device
    from .plotting import show_heatmaps, use_course_style

__all__ = ["get_device", "show_heatmaps", "use_course_style"]
_HOMES = {"get_device": "device", "show_heatmaps": "plotting", "use_course_style": "plotting"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module
    return getattr(import_module(f".{_HOMES[name]}", __name__), name)
