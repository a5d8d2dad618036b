"""The rollback history: several changes deep, newest first, within the annotation's limit
(older records dropped and counted), always readable by `share rollback`; a change whose
record cannot be kept is refused before anything is written."""

from __future__ import annotations

import json

import pytest

from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.rollout import Record, RecordTooLarge
from kubectl_gpu.sharing.rollout.record import MAX_HISTORY, MAX_RECORD_CHARS


def change(n: int, size: int = 10) -> Record:
    return Record("nvidia.com/gpu", {"any": f"# change {n}\n" + "x" * size}, {f"node-{n}": None})


def history(*records: Record) -> str:
    text = ""
    for record in records:
        pushed = rollout.push(text, record, "cm")
        assert pushed.text is not None
        text = pushed.text
    return text


def test_rollbacks_undo_changes_newest_first_down_to_none() -> None:
    text = history(change(1), change(2), change(3))

    seen = []
    while text:
        seen.append(rollout.decode(text, "cm"))
        text = rollout.pop(text, "cm").text or ""

    assert seen == [change(3), change(2), change(1)]


def test_at_most_max_history_changes_are_kept_and_the_rest_counted() -> None:
    text = history(*(change(n) for n in range(MAX_HISTORY + 3)))

    assert rollout.depth(text) == (MAX_HISTORY, 3)
    assert rollout.decode(text, "cm") == change(MAX_HISTORY + 2)


def test_large_records_drop_older_ones_to_stay_within_the_limit() -> None:
    big = MAX_RECORD_CHARS // 3
    text = history(change(1, big), change(2, big), change(3, big))

    assert len(text) <= MAX_RECORD_CHARS
    assert rollout.depth(text) == (2, 1)
    pushed = rollout.push(text, change(4, big), "cm")
    assert pushed.dropped == 1 and rollout.decode(pushed.text or "", "cm") == change(4, big)


def test_a_record_too_large_to_keep_is_refused() -> None:
    with pytest.raises(RecordTooLarge, match="nothing was written") as refused:
        rollout.push("", change(1, MAX_RECORD_CHARS), "ConfigMap ns/cm")

    assert "ConfigMap ns/cm" in refused.value.message
    assert "more than its rollback record can keep" in refused.value.message


def test_a_version_1_record_is_read_as_a_history_of_one() -> None:
    old = change(1).encode()
    assert json.loads(old)["version"] == 1

    assert rollout.decode(old, "cm") == change(1)
    assert rollout.pop(old, "cm").text is None
    assert rollout.depth(rollout.push(old, change(2), "cm").text or "") == (2, 0)


def test_a_damaged_history_is_replaced_by_the_next_change_and_counted() -> None:
    pushed = rollout.push('{"version": 2, "history": [{"oops": 1}]}', change(1), "cm")

    assert pushed.dropped == 1
    assert rollout.decode(pushed.text or "", "cm") == change(1)
