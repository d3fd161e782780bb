"""cluster/nodecache.py: the change log node_values reads, and the log that goes on after a node set change."""

from __future__ import annotations

from accelsched.cluster.nodecache import ChangeLog


def test_a_restarted_log_goes_on_from_the_old_end_and_gives_readers_behind_it_every_node() -> None:
    log = ChangeLog(3)
    for node in (2, 0, 2):
        log.append(node)
    cursor = 1  # a reader that saw the first change only
    assert log[cursor:] == [0, 2]
    new = log.restarted(5)  # a node set of five now: the old indices are void
    assert len(new) == len(log) == 3
    assert new[cursor:] == [0, 1, 2, 3, 4]
    new.append(4)
    assert new[3:] == [4] and len(new) == 4
