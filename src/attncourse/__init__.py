"""Helpers shared by the decks, the assignments and the instructor tools of the attention course.

Students may import this package: it holds plotting, fonts and device choice, never an answer.
"""
from .device import get_device
from .plotting import show_heatmaps, use_course_style

__all__ = ["get_device", "show_heatmaps", "use_course_style"]
