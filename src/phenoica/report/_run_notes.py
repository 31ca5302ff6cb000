"""What the report's "Notes on this run" lists (the section: :mod:`phenoica.report._notes_section`): every note of the check at the door (the demo planned, a
fallback taken, rows left out, heavy reuse of the null, genes whose profiles are all zero...:
:func:`phenoica.workflow.check_screen_once`, recorded in ``screen/validated.json``) and
every component-sweep point that was skipped (its fit failed), which were otherwise said only in
the logs and the record."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from phenoica.utils import JOB_CPU

#: What the component sweep's warning of a skipped point says (:mod:`phenoica.sweep._component_sweep`).
SKIPPED_POINT = "point skipped"
#: The line every job's log starts with (:func:`phenoica.utils.rule_logger`): a resumed or
#: rerun job appends to its log, so only the lines after the last one are the finished job's.
JOB_START = f"{JOB_CPU} start:"
#: The level word of a log line (:data:`phenoica.utils._io.LOG_FORMAT`) before its message.
WARNING = " WARNING "


def last_job_lines(log: Path | str) -> list[str]:
    """The lines of a job's log written by its last run (after its last :data:`JOB_START` line);
    [] when the log is absent."""
    try:
        lines = Path(log).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    starts = [i for i, line in enumerate(lines) if JOB_START in line]
    return lines[starts[-1] + 1 :] if starts else lines


def skipped_sweep_points(logs: Iterable[Path | str]) -> list[str]:
    """The warnings of the sweep points skipped by the last run of each component-sweep job
    (``logs``: their log files), each as its message."""
    out = []
    for log in logs:
        for line in last_job_lines(log):
            if SKIPPED_POINT in line and WARNING in line:
                out.append(line.split(WARNING, 1)[1].strip())
    return out


def run_notes(door: Sequence[str], sweep_logs: Iterable[Path | str]) -> pd.DataFrame:
    """The run's notes as a table (``source``: ``door`` or ``sweep``; ``note``): the door's notes
    in order, then the skipped sweep points."""
    rows = [("door", str(n)) for n in door] + [("sweep", n) for n in skipped_sweep_points(sweep_logs)]
    return pd.DataFrame(rows, columns=["source", "note"])
