"""What the two oracles' command lines share (``python -m conformance``, ``python -m conformance.kueue``): the
progress lines while scenarios run, and the report before the summary line."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol


class Tally(Protocol):
    """What both runners' tallies answer (conformance/runner.py, conformance/kueue/runner.py)."""

    verdicts: list[Any]
    seconds: float

    def by_class(self) -> dict[str, tuple[int, int]]: ...

    def kinds(self) -> Any: ...  # a Counter of the first disagreement's kind


def progress(total: int, verbose: bool, label: Callable[[Any], str]) -> Callable[[int, Any], None]:
    """A runner's progress callback: with ``verbose`` each disagreement (and oracle error) under the scenario's
    ``label``, and a line every 100 scenarios."""
    started = time.monotonic()

    def report(n: int, verdict: Any) -> None:
        if verbose:
            for d in verdict.diffs:
                print(f"  [{label(verdict)}] {d}")
            if verdict.error:
                print(f"  [{label(verdict)}] error: {verdict.error.splitlines()[0]}")
        if (n + 1) % 100 == 0:
            print(f"  ... {n + 1}/{total} in {time.monotonic() - started:.0f} s", flush=True)

    return report


def print_report(title: str, tally: Tally, scenarios: int, saved: Sequence[Path], width: int,
                 extra: Sequence[str] = ()) -> None:
    """Per class, the disagreements' kinds, the oracle errors, ``extra`` lines, the saved cases and the wall time."""
    print(title)
    for klass, (agree, of) in tally.by_class().items():
        print(f"  {klass:{width}} {agree:5}/{of:<5} {100 * agree / of:6.1f}%")
    for kind, count in tally.kinds().most_common():
        print(f"  disagreement {kind}: {count}")
    errors = [v for v in tally.verdicts if v.error]
    if errors:
        print(f"  oracle errors (not counted): {len(errors)}; first: {errors[0].error.splitlines()[0]}")
    for line in extra:
        print(f"  {line}")
    for path in saved:
        print(f"  saved {path}")
    per = tally.seconds / max(1, scenarios)
    print(f"wall {tally.seconds:.1f} s, {per * 1000:.0f} ms per scenario (both sides; control plane start not counted)")
