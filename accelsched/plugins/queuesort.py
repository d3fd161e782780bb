"""PrioritySort: higher priority first, then the order pods entered the queue."""

from __future__ import annotations

from accelsched.api.objects import Pod

NAME = "PrioritySort"


class PrioritySort:
    name = NAME

    def sort_key(self, pod: Pod, seq: int) -> tuple[int, int]:
        return (-pod.priority, seq)


def new(args: dict, handle: object) -> PrioritySort:
    return PrioritySort()
