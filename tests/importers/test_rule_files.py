from __future__ import annotations

import hashlib

from rollout_cards.importers.rule_files import MAX_PART, rule_id_part
from rollout_cards.model.card import RuleRef


def test_rule_id_parts_keep_short_names_and_bound_long_ones():
    assert rule_id_part("mmlu/college math") == "mmlu_college_math"
    assert rule_id_part("-x") == "x" and rule_id_part("") == "x" and rule_id_part("ü") == "x"
    long = "task_" + "a" * 300
    part = rule_id_part(long)
    assert len(part) == MAX_PART
    assert part == "task_" + "a" * (MAX_PART - 14) + "_" + hashlib.sha256(long.encode()).hexdigest()[:8]
    assert rule_id_part(long + "b") != part  # names sharing the kept prefix stay apart
    # Four long parts still make an id the manifest accepts (at most 128 characters).
    rule_id = ".".join(["lm_eval", *(rule_id_part(c * 500) for c in "abc")])
    RuleRef(id=rule_id, path=f"rules/{rule_id}.yaml", sha256="0" * 64)
