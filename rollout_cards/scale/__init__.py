"""Engines beyond one process: the rule kernels and digest checks of `rules/` and `io/` run on
Ray Data (`ray_engine`), with the same numbers as in-process. Ray is an optional extra
(`pip install 'rollout-cards[ray]'`); nothing here imports it until an engine is asked for."""

from __future__ import annotations

ENGINES = ("local", "ray")

__all__ = ["ENGINES"]
