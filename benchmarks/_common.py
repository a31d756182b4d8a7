"""What every benchmark module shares: sizes, the results container, statistics, machine facts, where the
conformance kit (``../shared/conformance``) is, and how to find pi 0.73.1.

Nothing here asserts a timing: the benchmarks print numbers and write JSON.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CONFORMANCE = SHARED / "conformance"
RESULTS_DIR = Path(__file__).resolve().parent / "results"
PI_VERSION = "0.73.1"


# ---------------------------------------------------------------------------------------------
# Sizes
# ---------------------------------------------------------------------------------------------
@dataclass
class Sizes:
    """How big each workload is. ``FULL`` is what the issue asks for; ``TINY`` is for the smoke test."""

    words: int = 2000                 # chunks in the streamed reply
    session_files: int = 500          # files for list_sessions
    session_entries: int = 20000      # entries in the session that is opened
    grep_files: int = 50000           # files in the grep/find tree
    compaction_tokens: int = 200000   # estimated tokens in the session to compact
    export_messages: int = 2000       # messages in the session to export
    provider_events: int = 2000       # streamed events per provider request


FULL = Sizes()
TINY = Sizes(words=50, session_files=10, session_entries=202, grep_files=200, compaction_tokens=30000,
             export_messages=20, provider_events=50)


@dataclass
class Config:
    sizes: Sizes = field(default_factory=Sizes)
    rounds: int = 5                   # alternating rounds for side-by-side figures, reps for the others
    quick: bool = False
    with_pi: bool = True
    pi_cli: str | None = None         # path of pi's cli.js, when it can run
    tmp: Path = Path("/tmp")          # scratch root for workloads (deleted by the runner)
    log: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------
@dataclass
class Figure:
    key: str
    label: str
    unit: str                         # "ms", "us", "KiB", "bytes"
    pisces: list[float]
    ref: list[float] | None = None    # the other side's samples (pi, or bare rg)
    ref_name: str = "pi"              # "pi" or "rg"
    ref_missing: str = ""             # why the other side is not measured
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        p = summary(self.pisces)
        r = summary(self.ref) if self.ref else None
        ratio = (p["median"] / r["median"]) if (p and r and r["median"]) else None
        return {"label": self.label, "unit": self.unit, "pisces": p,
                "reference": {"pi": f"pi {PI_VERSION}", "rg": "bare rg"}.get(self.ref_name, self.ref_name),
                "ref": r, "ref_missing": self.ref_missing or None,
                "ratio": round(ratio, 4) if ratio is not None else None, "detail": self.detail}


@dataclass
class Results:
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    not_measured: list[dict[str, str]] = field(default_factory=list)

    def add(self, fig: Figure) -> Figure:
        self.figures.append(fig)
        if not fig.pisces:
            self.not_measured.append({"figure": fig.key, "side": "pisces", "why": fig.detail.get("error", "")})
        if fig.ref is None and fig.ref_missing:
            self.not_measured.append({"figure": fig.key, "side": fig.ref_name, "why": fig.ref_missing})
        return fig

    def skip(self, key: str, label: str, why: str) -> None:
        """A figure that could not be measured at all."""
        self.figures.append(Figure(key, label, "ms", [], ref_missing=why, detail={"error": why}))
        self.not_measured.append({"figure": key, "side": "both", "why": why})


def summary(xs: list[float] | None) -> dict[str, Any] | None:
    if not xs:
        return None
    return {"n": len(xs), "median": statistics.median(xs), "min": min(xs), "max": max(xs),
            "samples": [round(x, 4) for x in xs]}


def timed(fn: Callable[[], Any]) -> float:
    """Milliseconds one call of ``fn`` takes."""
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def samples(fn: Callable[[], Any], reps: int, warmup: int = 1) -> list[float]:
    for _ in range(warmup):
        fn()
    return [timed(fn) for _ in range(reps)]


# ---------------------------------------------------------------------------------------------
# Machine facts, pi
# ---------------------------------------------------------------------------------------------
def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {"nproc": os.cpu_count(), "platform": platform.platform(),
                            "python": sys.version.split()[0], "implementation": platform.python_implementation()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    info["mem"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    node = shutil.which("node")
    info["node"] = _run([node, "--version"]) if node else None
    rg = rg_path()
    info["rg"] = _run([rg, "--version"]).splitlines()[0] if rg else None
    try:
        import pisces

        info["pisces"] = pisces.__version__
    except Exception:
        pass
    info["git_commit"] = _run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]) or None
    return info


def rg_path() -> str | None:
    from pisces.core.tools.grep import find_rg

    return find_rg()


def find_pi(log: Callable[[str], None]) -> tuple[str | None, str]:
    """(path of pi's cli.js, "") when node and pi 0.73.1 are usable, else (None, why not). Installs pi with
    the conformance kit's ``install_pi.sh`` the first time (npm, into ~/.cache/pisces-conformance)."""
    if not shutil.which("node"):
        return None, "node is not on PATH"
    env_cli = os.environ.get("PI_CLI")
    if env_cli and os.path.isfile(env_cli):
        return env_cli, ""
    script = CONFORMANCE / "install_pi.sh"
    if not script.is_file():
        return None, f"{script} not found (the conformance kit lives in ../shared beside the repository)"
    log(f"pi: {script} (installs pi {PI_VERSION} from npm the first time)")
    try:
        out = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"install_pi.sh failed: {exc}"
    cli = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    if out.returncode != 0 or not os.path.isfile(cli):
        return None, f"install_pi.sh failed (exit {out.returncode}): {out.stderr.strip()[-300:]}"
    return cli, ""


def as_dict(obj: Any) -> dict[str, Any]:
    return asdict(obj)
