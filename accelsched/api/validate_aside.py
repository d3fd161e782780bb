"""Schema validation of a large input in a second process, while this one builds the objects.

Validating a 55,000-object cluster dump takes about as long as building the objects from it, and both only read
the same documents. On a machine with a second core, a forked child reads the same bytes again and validates
them while the parent parses and builds without validating; ``load`` then waits for the child's verdict before
it returns anything. The result is the sequential one: the child goes through the files in order, parse then
validation, exactly as ``read_documents`` would, so its first error is the first error a sequential run would
have raised before building began; only when the child found nothing does an error of the parent's own (in
building) stand. A child that dies without a verdict (killed for memory, say) is replaced by validating here.

It costs memory (the child holds its own documents), so it is used only for JSON input (what ``kubectl get -o
json`` dumps) between ``MIN_BYTES`` and ``MAX_BYTES``, where fork exists and a second CPU is there;
``ACCELSCHED_VALIDATE_ASIDE=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
from collections.abc import Callable, Iterator, Sequence

from accelsched.errors import InputError

MIN_BYTES = 16 << 20  # below this a fork costs more than it saves
MAX_BYTES = 1 << 30  # above this two copies of the documents would need too much memory
_JSON_START = re.compile(rb"[ \t\r\n]*[{\[]")


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def worthwhile(blobs: Sequence[bytes]) -> bool:
    """JSON only: its C decoder reads it again in about what validating it costs. YAML costs libyaml's events,
    several times its validation, so a second reading would cost more than it saves."""
    total = sum(len(b) for b in blobs)
    return (
        MIN_BYTES <= total <= MAX_BYTES
        and all(_JSON_START.match(b) for b in blobs)
        and hasattr(os, "fork")
        and _cpus() >= 2
        and os.environ.get("ACCELSCHED_VALIDATE_ASIDE", "1") != "0"
    )


@contextlib.contextmanager
def aside(validate_all: Callable[[], None], enabled: bool) -> Iterator[bool]:
    """Run ``validate_all`` (which raises InputError on the first problem) in a forked child while the body runs.

    Yields whether the child took the validation (the body then skips it). On leaving, the child's error, if
    any, is raised in place of whatever the body raised or returned.
    """
    if not enabled:
        yield False
        return
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: validate, send the verdict, and leave without running the parent's cleanups
        status = 0
        try:
            os.close(read_end)
            try:
                validate_all()
                verdict = None
            except InputError as exc:
                verdict = (exc.message, exc.source, exc.obj, exc.field)
            with os.fdopen(write_end, "wb") as out:
                pickle.dump(verdict, out)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    child = _Child(pid, read_end)
    try:
        try:
            yield True
        except InputError:
            error = child.verdict(validate_all)
            if error is not None:
                raise error from None
            raise
        error = child.verdict(validate_all)
        if error is not None:
            raise error
    finally:
        child.abandon()


class _Child:
    """The forked validator: its verdict is read, and it is reaped, exactly once."""

    def __init__(self, pid: int, read_end: int) -> None:
        self.pid, self.read_end, self.reaped = pid, read_end, False

    def verdict(self, validate_all: Callable[[], None]) -> InputError | None:
        pipe = os.fdopen(self.read_end, "rb")
        self.read_end = -1  # the file object owns the descriptor now, and closes it
        with pipe:
            data = pipe.read()
        _, status = os.waitpid(self.pid, 0)
        self.reaped = True
        if status == 0 and data:
            verdict: Sequence[str] | None = pickle.loads(data)  # our own child's bytes, from our own pipe
            if verdict is None:
                return None
            message, source, obj, field = verdict
            return InputError(message, source=source, obj=obj, field=field)
        try:  # no verdict: validate here, as a sequential run does
            validate_all()
        except InputError as exc:
            return exc
        return None

    def abandon(self) -> None:
        """The body failed otherwise (KeyboardInterrupt, MemoryError): the child is killed, not waited for."""
        if self.reaped:
            return
        self.reaped = True
        with contextlib.suppress(OSError):
            os.kill(self.pid, 9)
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, 0)
        if self.read_end >= 0:
            with contextlib.suppress(OSError):
                os.close(self.read_end)
