"""Run the accelsched CLI with bounds, and check the bad-input contract (exit 0 or 2, one line, no traceback).

Two runners return the same ``Outcome``:
- ``invoke``: in-process through click's CliRunner (fast; for inputs that cannot hang or exhaust memory);
- ``run_limited``: in a forked child under ``RLIMIT_AS`` and a wall-clock timeout, in its own process group, so
  a hang or a memory blow-up fails the test that asked for it instead of killing the whole test run. The child
  is a fork of the test process (accelsched already imported), which makes a bounded run cost milliseconds
  rather than the second a fresh interpreter takes; it runs ``accelsched.cli:main`` exactly as the console
  script does (standalone mode, ``sys.exit`` with its code).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from accelsched.cli import main

GiB = 1 << 30
# ACCELSCHED_TEST_RLIMIT_AS (bytes) raises or lowers the bound for a machine that needs another: what a run may add
# to the address space of the test process it is forked from.
MEMORY_LIMIT = int(os.environ.get("ACCELSCHED_TEST_RLIMIT_AS", 2 * GiB))
ERROR_PREFIX = "accelsched: error: "


@dataclass(frozen=True)
class Outcome:
    """What one CLI run did. ``exit_code`` is None when the run was killed (timeout or signal)."""

    args: tuple[str, ...]
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    signal: int | None = None
    max_children: int = 0  # the most child processes seen at once (run_limited only)

    def describe(self) -> str:
        state = "timed out" if self.timed_out else f"signal {self.signal}" if self.signal else f"exit {self.exit_code}"
        return (
            f"accelsched {' '.join(self.args)} -> {state} in {self.seconds:.2f}s\n"
            f"--- stderr ---\n{self.stderr[-3000:]}\n--- stdout ---\n{self.stdout[-1500:]}"
        )


def invoke(args: Sequence[str], stdin: bytes | None = None) -> Outcome:
    """The CLI in this process. An exception escaping it (anything but SystemExit) becomes a traceback in stderr."""
    start = time.perf_counter()
    result = CliRunner().invoke(main, list(args), input=stdin, catch_exceptions=True)
    seconds = time.perf_counter() - start
    stderr = result.stderr
    code: int | None = result.exit_code
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info)) if result.exc_info else repr(result.exception)
        code = 1
    return Outcome(tuple(args), code, result.stdout, stderr, seconds)


def _address_space() -> int:
    """This process's virtual memory size in bytes (/proc/self/statm's first field, in pages)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _child(args: Sequence[str], stdin_fd: int, out_fd: int, err_fd: int, memory: int) -> None:
    """Runs in the forked child; never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        # The bound is on what the run adds: the fork starts with the test process's whole address space (its
        # threads' stacks and malloc arenas included), which grows with the tests that ran before in the session.
        limit = _address_space() + memory
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        os.dup2(stdin_fd, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        sys.stdin = open(0, encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        sys.argv = ["accelsched", *args]
        try:
            main.main(list(args), prog_name="accelsched", standalone_mode=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # what would escape the console script: print it as Python would
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # even the plumbing failing must not return into the test runner
        with contextlib.suppress(BaseException):
            os.write(2, traceback.format_exc().encode())
    os._exit(code)


def _children(pid: int) -> int:
    try:
        return len(Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
    except OSError:
        return 0


def run_limited(
    args: Sequence[str], *, timeout: float = 10.0, memory: int = MEMORY_LIMIT, stdin: bytes = b""
) -> Outcome:
    """The CLI in a forked child limited to ``memory`` bytes of address space and ``timeout`` seconds."""
    with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout, tempfile.TemporaryFile() as ferr:
        fin.write(stdin)
        fin.flush()
        fin.seek(0)
        sys.stdout.flush()
        sys.stderr.flush()
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            _child(args, fin.fileno(), fout.fileno(), ferr.fileno(), memory)
        timed_out, status, most = False, 0, 0
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            most = max(most, _children(pid))
            if time.perf_counter() - start > timeout:
                timed_out = True
                _kill_group(pid)
                _, status = os.waitpid(pid, 0)
                break
            time.sleep(0.002)
        seconds = time.perf_counter() - start
        _kill_group(pid)  # workers the child left behind
        fout.seek(0)
        ferr.seek(0)
        stdout = io.TextIOWrapper(fout, encoding="utf-8", errors="backslashreplace").read()
        stderr = io.TextIOWrapper(ferr, encoding="utf-8", errors="backslashreplace").read()
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    return Outcome(tuple(args), code, stdout, stderr, seconds, timed_out, sig, most)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def contract_violation(out: Outcome, names: Sequence[str] = ()) -> str | None:
    """Why ``out`` breaks the bad-input contract, or None. ``names``: what the error line must start with after
    the prefix (the files given, or the option), any one of them.

    The contract (design.md): exit 0, or exit 2 with exactly one stderr line ``accelsched: error: FILE: ...``
    and nothing on stdout (nothing half-printed); never a traceback, never killed, never past the time limit.
    """
    if out.timed_out:
        return "timed out"
    if out.signal is not None:
        return f"killed by signal {out.signal}"
    if "Traceback (most recent call last)" in out.stderr or "Traceback (most recent call last)" in out.stdout:
        return "traceback"
    if out.exit_code not in (0, 2):
        return f"exit code {out.exit_code}"
    if out.exit_code == 2:
        # A line ends at \n or \r only: str.splitlines would also split at \x1c or \u2028 inside a quoted value.
        lines = re.split(r"\r\n|\r|\n", out.stderr.removesuffix("\n"))
        if len(lines) != 1:
            return f"{len(lines)} stderr lines, want exactly one"
        if not lines[0].startswith(ERROR_PREFIX):
            return f"stderr does not start with {ERROR_PREFIX!r}"
        rest = lines[0][len(ERROR_PREFIX) :]
        if names and not any(rest.startswith(str(n)) for n in names):
            return f"error line does not start with one of {list(map(str, names))}"
        if out.stdout:
            return "exit 2 but something was printed on stdout"
    return None


def assert_contract(out: Outcome, names: Sequence[str] = ()) -> None:
    why = contract_violation(out, names)
    assert why is None, f"{why}\n{out.describe()}"


def assert_bad_input(out: Outcome, starts: str, *fragments: str, max_seconds: float | None = None) -> str:
    """Exit 2, one line ``accelsched: error: <starts>...`` containing every fragment; returns the line."""
    assert_contract(out)
    assert out.exit_code == 2, f"want exit 2 (bad input)\n{out.describe()}"
    line = out.stderr.removesuffix("\n")
    assert line.startswith(ERROR_PREFIX + starts), f"want the line to start with {starts!r}\n{out.describe()}"
    for fragment in fragments:
        assert fragment in line, f"want {fragment!r} in the error line\n{out.describe()}"
    if max_seconds is not None:
        assert out.seconds <= max_seconds, f"took {out.seconds:.2f}s, bound {max_seconds}s\n{out.describe()}"
    return line
