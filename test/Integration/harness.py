"""What the integration scripts share: the repository paths, the training
corpus, the environment mpirun needs here, a check that counts failures and
the relative error of a run's losses.

Importing it puts python-bindings on sys.path (for loom.*)."""

from __future__ import annotations

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python-bindings"))

# Installed documentation text: the same bytes on every machine with the
# package, and it is always there (CMake's own copyright file).
CORPUS = next(p for p in ("/usr/share/common-licenses/GPL-3", "/usr/share/doc/cmake/copyright",
                          os.path.join(ROOT, "README.md")) if os.path.exists(p))


def mpi_env(timeout_s: int) -> dict[str, str]:
    """mpirun as root with more ranks than cores, and loomrt's bounded wait."""
    return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_rmaps_base_oversubscribe": "1", "LOOMRT_TIMEOUT_S": str(timeout_s)}


def relative_errors(got, want) -> list[float]:
    """|got - want| / |want|, pair by pair (as far as the shorter goes)."""
    return [abs(g - w) / abs(w) for g, w in zip(got, want)]


class Check:
    """`check(ok, what)` prints `ok WHAT` or `FAIL WHAT` and counts failures."""

    def __init__(self):
        self.failures = 0

    def __call__(self, ok: bool, what: str) -> None:
        self.failures += not ok
        print(f"{'ok' if ok else 'FAIL'} {what}", flush=True)
