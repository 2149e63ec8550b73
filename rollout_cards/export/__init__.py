"""Write a card's results in other tools' formats (Inspect's precomputed scores, Every Eval Ever)."""

from .eee import export_eee, validate_eee
from .inspect_scores import export_inspect_scores

__all__ = ["export_eee", "export_inspect_scores", "validate_eee"]
