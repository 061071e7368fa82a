"""The registry inquiry of ``pcmkimg outdated``: what digest a registry serves now, via skopeo.

``skopeo inspect --raw docker://REF`` fetches the manifest (one request, read-only) the way the
node's podman pulls: skopeo reads the same ``registries.conf`` (mirrors, ``insecure``), the
same certificates (``/etc/containers/certs.d``) and the same credentials (``auth.json``). A
registry listed with ``tls_verify=false`` in pcmkimg.conf gets ``--tls-verify=false``, as
pcmkimg's own pulls do. Each distinct reference is asked once, in parallel; the references of
one registry share its deadline (``timeout`` seconds from the start): a call gets what is left
of it as its subprocess timeout, and a registry that is down costs at most that. No shell,
``LC_ALL=C``. A failure is one line per reference (:class:`pcmkimg.core.outdated.Served` with
an ``error``), never an exception, except for a missing skopeo.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from pcmkimg.adapters.config import Config
from pcmkimg.core import outdated
from pcmkimg.core.outdated import Served, registry_of
from pcmkimg.errors import Unreachable
from pcmkimg.records import dataclass, field

SKOPEO = "skopeo"
WORKERS = 8
"""skopeo processes at a time."""

_GONE = re.compile(r"manifest unknown|name unknown|not found|repository .* does not exist", re.I)
_MSG = re.compile(r'msg="((?:[^"\\]|\\.)*)"')
_PARSING = re.compile(r'^(?:Error parsing image name|error parsing image name) "[^"]*": ')

Run = Callable[..., "subprocess.CompletedProcess[bytes]"]


class SkopeoMissing(Unreachable):
    """skopeo is not installed: no registry can be asked."""


def _why(stderr: bytes) -> str:
    """skopeo's message, on one line (its ``msg="..."`` when it logs one)."""
    text = stderr.decode("utf-8", errors="replace").strip()
    found = _MSG.findall(text)
    if found:
        text = found[-1].replace('\\"', '"')
    text = _PARSING.sub("", text.strip())  # skopeo's wrapper around every failure
    return " ".join(text.split())[-400:] or "no message"


@dataclass
class Skopeo:
    """The registry port over the skopeo command."""

    config: Config = field(default_factory=Config)
    run: Run = subprocess.run
    clock: Callable[[], float] = time.monotonic

    def argv(self, reference: str) -> list[str]:
        argv = [SKOPEO, "inspect", "--raw"]
        if not self.config.tls_verify(registry_of(reference)):
            argv.append("--tls-verify=false")
        return [*argv, f"docker://{reference}"]

    def _ask(self, reference: str, deadline: float, timeout: float = 0.0) -> Served:
        registry = registry_of(reference)
        left = deadline - self.clock()
        if left <= 0:
            return Served(
                reference,
                error=f"the registry {registry} could not be asked in time (deadline passed)",
            )
        env = {**os.environ, "LC_ALL": "C"}
        try:
            proc = self.run(
                self.argv(reference),
                capture_output=True,
                timeout=left,
                env=env,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError as exc:
            raise SkopeoMissing(
                "skopeo is not installed: no registry can be asked",
                "install skopeo (dnf install skopeo; apt-get install skopeo)",
            ) from exc
        except subprocess.TimeoutExpired:
            return Served(
                reference,
                error=f"the registry {registry} could not be asked in time (deadline {timeout:g}s)",
            )
        if proc.returncode == 0:
            return outdated.served(reference, proc.stdout)
        why = _why(proc.stderr)
        if _GONE.search(why):
            return Served(
                reference, error=f"the registry {registry} no longer serves it: {why}", gone=True
            )
        return Served(reference, error=f"the registry {registry} could not be asked: {why}")

    def served(self, references: Sequence[str], timeout: float) -> dict[str, Served]:
        """reference -> what its registry serves now (or why it can't say)."""
        refs = sorted(set(references))
        if not refs:
            return {}
        start = self.clock()
        deadlines = {registry_of(r): start + timeout for r in refs}
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(refs))) as pool:
            futures = {
                r: pool.submit(self._ask, r, deadlines[registry_of(r)], timeout) for r in refs
            }
            return {r: f.result() for r, f in futures.items()}
