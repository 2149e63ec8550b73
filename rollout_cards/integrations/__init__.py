"""Integrations that write rollout cards from inside other tools while they run.

`rollout_cards.integrations.inspect`: an Inspect AI hook (needs the `inspect` extra).
"""
