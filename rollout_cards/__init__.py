"""rollout_cards: reproducible agent and eval results.

A rollout card keeps every episode and step, declares each reporting rule as data
that can be replayed, lists everything dropped, and states the release scope.
"""

__version__ = "0.1.0"
