#!/usr/bin/python3
"""One rank of the sidecar alltoall failure test (test_embedding.py), started by the test itself
(not torchrun, whose agent would tear the survivors down): runs alltoalls through its `hashsync
serve` sidecar (trainwire.embedding.SidecarAllToAll), two in flight at a time as the pipeline keeps
them; rank VICTIM SIGKILLs its own sidecar after step 3 and stops. A survivor prints what it caught
as one JSON line and exits 3 when a SidecarError named the victim.

usage: a2a_worker.py RANK WORLD MASTER VICTIM
"""

import json
import os
import signal
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from trainwire.embedding import SidecarAllToAll  # noqa: E402
from trainwire.serve import SidecarError  # noqa: E402


def main():
    rank, world, master, victim = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    a2a = SidecarAllToAll.start(rank, world, master, args=["--timeout", "30s"])
    try:
        for step in range(1000):
            if rank == victim and step == 3:
                a2a.sidecar.proc.send_signal(signal.SIGKILL)
                a2a.sidecar.proc.wait()
                time.sleep(5)
                return 0
            rows = np.full(world * 2, rank + step, np.float32)
            f1 = a2a.submit("x", [2] * world, rows)
            f2 = a2a.submit("y", [2] * world, rows)
            got, data = f1.result(timeout=60)
            f2.result(timeout=60)
            assert list(got) == [2] * world and list(data) == [float(k + step) for k in range(world) for _ in range(2)]
            time.sleep(0.01)
    except SidecarError as e:
        print(json.dumps({"rank": rank, "error": str(e), "culprit": e.culprit, "code": e.code}), flush=True)
        return 3 if e.culprit == victim else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
