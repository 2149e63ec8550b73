"""The expression language now lives in `rollout_cards.expr` (below `io`, whose string
filters compile with it); this name is kept so that existing imports keep working."""

from ..expr import FUNCTIONS, MAX_DEPTH, MAX_LENGTH, Expression, parse_expression

__all__ = ["FUNCTIONS", "MAX_DEPTH", "MAX_LENGTH", "Expression", "parse_expression"]
