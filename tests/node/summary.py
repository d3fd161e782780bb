"""The last line of `make node-e2e` and `make chart-e2e`, from what the tests recorded (podkit.record: one JSON line
per checked pod).

Usage: python tests/node/summary.py REPORT PYTEST_EXIT_CODE [chart]
Prints ``node e2e: P/N pods ran with the devices accelsched chose`` (P: pods whose annotation, the kubelet's
checkpoint and the container's visible devices were the same IDs; N: pods checked), or with ``chart``
``chart e2e: P/N pods ran, scheduled by the in-cluster accelsched`` (P: those pods that the chart's scheduler pod
bound, by their Scheduled event), and exits with pytest's code, or 1 when pytest passed but no pod was checked
(the tests were skipped: nothing was shown).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    report, code = Path(argv[1]), int(argv[2])
    chart = argv[3:] == ["chart"]
    rows = [json.loads(line) for line in report.read_text().splitlines() if line.strip()] if report.exists() else []
    if chart:
        ok = [r for r in rows if r.get("agree") and r.get("in_cluster")]
        for r in rows:
            if not r.get("in_cluster"):
                print(f"  {r['test']}: {r['pod']}: not bound by the chart's scheduler pod")
            elif not r.get("agree"):
                print(f"  {r['test']}: {r['pod']}: accelsched chose {r['annotation']}, the node gave {r['checkpoint']}")
        print(f"chart e2e: {len(ok)}/{len(rows)} pods ran, scheduled by the in-cluster accelsched")
    else:
        ok = [r for r in rows if r.get("agree")]
        for r in rows:
            if not r.get("agree"):
                print(
                    f"  {r['test']}: {r['pod']}: accelsched chose {r['annotation']}, the kubelet gave {r['checkpoint']}"
                )
        print(f"node e2e: {len(ok)}/{len(rows)} pods ran with the devices accelsched chose")
    return code if code != 0 or rows else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
