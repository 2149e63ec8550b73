"""Write a card's results in other tools' formats (Inspect's precomputed scores, ...)."""

from .inspect_scores import export_inspect_scores

__all__ = ["export_inspect_scores"]
