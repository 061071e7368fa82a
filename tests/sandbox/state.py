"""Where a sandbox lives, and the record of everything it started.

Every process is recorded with its PID and kernel start time as soon as it is
started, so that ``down`` can end exactly those processes (never by name)
even after the test run that started them crashed.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .proc import start_time

BASE = Path(os.environ.get("PCMKIMG_SANDBOX_BASE", "/var/tmp/pcmkimg-sandbox"))


@dataclass
class Proc:
    pid: int
    start: str | None
    what: str


@dataclass
class State:
    name: str
    procs: list[Proc] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)
    info: dict[str, object] = field(default_factory=dict)

    @property
    def dir(self) -> Path:
        return sandbox_dir(self.name)

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o755)
        path = self.dir / "state.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, path)

    def add_proc(self, pid: int, what: str) -> None:
        self.procs.append(Proc(pid, start_time(pid), what))
        self.save()

    def add_netns(self, name: str) -> None:
        self.netns.append(name)
        self.save()


def valid_name(name: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9]{0,7}", name):
        raise ValueError(f"sandbox name {name!r}: use 1-8 lowercase letters and digits")
    return name


def sandbox_dir(name: str) -> Path:
    return BASE / valid_name(name)


def load(name: str) -> State | None:
    path = sandbox_dir(name) / "state.json"
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return State(
        name=raw["name"],
        procs=[Proc(**p) for p in raw.get("procs", [])],
        netns=list(raw.get("netns", [])),
        info=dict(raw.get("info", {})),
    )


def existing() -> list[str]:
    if not BASE.is_dir():
        return []
    return sorted(p.name for p in BASE.iterdir() if (p / "state.json").exists())
