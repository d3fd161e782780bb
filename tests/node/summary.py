"""`make node-e2e`'s last line, from what the node tests recorded (podkit.record: one JSON line per checked pod).

Usage: python tests/node/summary.py REPORT PYTEST_EXIT_CODE
Prints ``node e2e: P/N pods ran with the devices accelsched chose`` (P: pods whose annotation, the kubelet's
checkpoint and the container's visible devices were the same IDs; N: pods checked) and exits with pytest's code,
or 1 when pytest passed but no pod was checked (the tests were skipped: nothing was shown).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    report, code = Path(argv[1]), int(argv[2])
    rows = [json.loads(line) for line in report.read_text().splitlines() if line.strip()] if report.exists() else []
    agreed = sum(1 for r in rows if r.get("agree"))
    for r in rows:
        if not r.get("agree"):
            print(f"  {r['test']}: {r['pod']}: accelsched chose {r['annotation']}, the kubelet gave {r['checkpoint']}")
    print(f"node e2e: {agreed}/{len(rows)} pods ran with the devices accelsched chose")
    return code if code != 0 or rows else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
