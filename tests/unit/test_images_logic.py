"""Pure logic of the podman and tunnel adapters: error classes, backoff, times, ssh argv."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from pcmkimg.adapters import podman
from pcmkimg.adapters.errors import HostKeyRejected, TunnelFailed
from pcmkimg.adapters.sshurl import SshTarget, parse_url
from pcmkimg.adapters.tunnel import ssh_argv
from pcmkimg.core.errors import (
    AuthError,
    ImageNotFound,
    InvalidName,
    NodeUnreachable,
    PullFailed,
    RegistryUnreachable,
    StoreFull,
    TLSError,
)
from pcmkimg.core.images import (
    PullProgress,
    Resolved,
    downtime,
    has_digest,
    image_info,
    parse_created,
)
from pcmkimg.core.pulls import backoff_delays, classify_pull_error
from pcmkimg.core.reference import parse

# Messages as podman 4.3 sends them in the pull stream's "error" key.
PULL_ERRORS = [
    (
        "initializing source docker://127.0.0.1:1/ns1/svc:1.0: pinging container registry "
        '127.0.0.1:1: Get "http://127.0.0.1:1/v2/": dial tcp 127.0.0.1:1: connect: '
        "connection refused",
        RegistryUnreachable,
    ),
    (
        "initializing source docker://r:5000/ns/svc:1: pinging container registry r:5000: "
        'Get "https://r:5000/v2/": http: server gave HTTP response to HTTPS client',
        TLSError,
    ),
    (
        'pinging container registry r.example.com: Get "https://r.example.com/v2/": x509: '
        "certificate signed by unknown authority",
        TLSError,
    ),
    (
        "initializing source docker://r:5000/ns1/svc:nope: reading manifest nope in "
        "r:5000/ns1/svc: manifest unknown: manifest unknown",
        ImageNotFound,
    ),
    ("reading manifest 1 in r/x: name unknown: repository name not known", ImageNotFound),
    (
        "initializing source docker://r/x:1: reading manifest 1 in r/x: unauthorized: "
        "authentication required",
        AuthError,
    ),
    ("requested access to the resource is denied", AuthError),
    (
        "reading manifest 1 in r/x: received unexpected HTTP status: 503 Service Unavailable",
        RegistryUnreachable,
    ),
    ('Get "https://r/v2/": net/http: TLS handshake timeout', RegistryUnreachable),
    ("dial tcp: lookup r.example.com: no such host", RegistryUnreachable),
    ("repository name must be lowercase", InvalidName),
    ("something nobody has seen before", PullFailed),
    # podman 4.3, its pull staging directory full (issue 22 item 6, seen live)
    (
        'writing blob: storing blob to file "/run/fw-tmp/storage253116673/1": write '
        "/run/fw-tmp/storage253116673/1: no space left on device",
        StoreFull,
    ),
]


# podman 5.4's libpod stream ("manifest unknown" once), and its refusals before any stream in
# the Docker-compatible mode (podman-py's default): the HTTP status and the body's message.
PODMAN5_ERRORS = [
    (
        "initializing source docker://127.0.0.1:5988/ns/svc:nope: reading manifest nope in "
        "127.0.0.1:5988/ns/svc: manifest unknown",
        None,
        ImageNotFound,
    ),
    ("manifest unknown: manifest unknown", 404, ImageNotFound),
    ("connection refused", 500, RegistryUnreachable),
    ("http: server gave HTTP response to HTTPS client", 500, TLSError),
    ("x509: certificate signed by unknown authority", 500, TLSError),
    ("something nobody has seen before", 404, ImageNotFound),
    ("something nobody has seen before", 401, AuthError),
    ("something nobody has seen before", 500, PullFailed),
    ("unauthorized: authentication required", 500, AuthError),
    # A port with 401/404/500 in it is no HTTP status (seen: a registry on 127.0.0.1:38401).
    (
        "initializing source docker://127.0.0.1:38401/ns1/svc:nope: reading manifest nope in "
        "127.0.0.1:38401/ns1/svc: manifest unknown",
        None,
        ImageNotFound,
    ),
    ("reading manifest 1 in 127.0.0.1:40404/x: something new", None, PullFailed),
    (
        "reading manifest 1 in r:5000/x: received unexpected HTTP status: 401",
        None,
        AuthError,
    ),
]


@pytest.mark.parametrize(("message", "kind"), PULL_ERRORS)
def test_pull_errors_are_classified(message: str, kind: type) -> None:
    assert classify_pull_error(message) is kind


@pytest.mark.parametrize(("message", "status", "kind"), PODMAN5_ERRORS)
def test_podman5_pull_errors_are_classified(message: str, status: int | None, kind: type) -> None:
    assert classify_pull_error(message, status) is kind


class _Pulls:
    """``client.images`` of a fake podman client: pull() refuses as podman-py does, or streams."""

    def __init__(self, status: int = 200, body: bytes = b"", stream: list | None = None) -> None:
        self.status, self.body, self.stream, self.calls = status, body, stream or [], []

    def pull(self, text: str, **kwargs: object) -> object:
        import requests
        from podman.api.client import APIResponse
        from podman.errors import ImageNotFound

        self.calls.append((text, kwargs))
        response = requests.Response()
        response.status_code, response._content = self.status, self.body
        APIResponse(response).raise_for_status(not_found=ImageNotFound)  # as podman-py does
        return iter(self.stream)


class _Client:
    def __init__(self, pulls: _Pulls) -> None:
        self.images = pulls

    def close(self) -> None:
        pass


def _store(pulls: _Pulls) -> podman.Store:
    return podman.Store("controller-0", "unix:///run/podman/podman.sock", _Client(pulls))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (404, "manifest unknown: manifest unknown", ImageNotFound),
        (500, "connection refused", RegistryUnreachable),
        (500, "http: server gave HTTP response to HTTPS client", TLSError),
    ],
)
def test_a_refusal_before_the_stream_is_the_typed_pull_error(
    status: int, message: str, kind: type
) -> None:
    """podman 5 (Docker-compatible mode) refuses with an HTTP status and {"message": ...}."""
    pulls = _Pulls(status, b'{"message": "%s"}\n' % message.encode())
    with pytest.raises(kind) as caught:
        _store(pulls).pull("r.example.com:5000/ns/svc:1.0", retries=1, backoff=0)
    assert caught.value.detail == f"pull failed: {message}" and caught.value.fix
    assert "r.example.com:5000/ns/svc:1.0" in caught.value.one_line()
    # Only the transient one is retried.
    assert len(pulls.calls) == (2 if kind is RegistryUnreachable else 1)
    # libpod's own stream is asked for, the same on podman 4 and 5.
    assert all(kw.get("compatMode") is False for _, kw in pulls.calls)


# A full disk as podman reports it in the pull stream (issue 22 item 6, seen live on the
# sandbox). podman 4.3: the staging directory (TMPDIR), then the image store with no room for the
# layer's metadata, then with room for half of the layer.
FULL_DISK = [
    (
        'writing blob: storing blob to file "/run/fw-tmp/storage253116673/1": write '
        "/run/fw-tmp/storage253116673/1: no space left on device",
        "its pull staging directory",
    ),
    (
        'writing blob: adding layer with blob "sha256:8b38": write /var/lib/containers/storage/'
        "overlay-layers/.tmp-layers.json2192263604: no space left on device",
        "its image store (/var/lib/containers",
    ),
    (
        'writing blob: adding layer with blob "sha256:8b38": processing tar file(write /pad: no '
        "space left on device): exit status 1",
        "its image store (/var/lib/containers",
    ),
    # podman 5.4: the staging directory, then the image store with room for half of the layer
    (
        'writing blob: storing blob to file "/run/fw-tmp/container_images_storage1915792475/1": '
        "write /run/fw-tmp/container_images_storage1915792475/1: no space left on device",
        "its pull staging directory",
    ),
    (
        'writing blob: adding layer with blob "sha256:9813"/""/"sha256:3b6a": unpacking failed '
        "(error: exit status 1; output: write /pad: no space left on device)",
        "its image store (/var/lib/containers",
    ),
    ("write /somewhere: no space left on device", "its image store (/var/lib/containers"),
]


@pytest.mark.parametrize(("message", "where"), FULL_DISK)
def test_a_full_disk_is_told_where_podman_ran_out_of_space(message: str, where: str) -> None:
    """The fix names the directory that is full when podman's words say which; both else."""
    pulls = _Pulls(stream=[{"error": message}])
    with pytest.raises(StoreFull) as caught:
        _store(pulls).pull("r.example.com:5000/ns/svc:1.0", retries=3, backoff=0)
    assert len(pulls.calls) == 1  # not retried: the disk stays full
    fix = caught.value.fix
    assert fix.startswith("free disk space on the node, in ") and where in fix
    both = "its image store" in fix and "its pull staging directory" in fix
    assert both == message.startswith("write /somewhere")


def test_stream_records_of_both_shapes_are_progress_and_errors() -> None:
    libpod = [
        {"stream": "Trying to pull r/ns/svc:1.0...\n"},
        {"stream": "Copying blob sha256:39f1\n"},
        {"images": ["87ff"], "id": "87ff"},
    ]
    seen: list[PullProgress] = []
    assert (
        _store(_Pulls(stream=libpod))._pull_once(parse("r/ns/svc:1.0"), True, seen.append, 1)
        == "87ff"
    )
    assert [e.text for e in seen] == ["Trying to pull r/ns/svc:1.0...", "Copying blob sha256:39f1"]
    # Docker-style records: a status about a layer (its "id" is no image ID), then an error.
    docker = [
        {"status": "Pulling fs layer", "progressDetail": {}, "id": "39f17ecea68d"},
        {"errorDetail": {"message": "manifest unknown"}, "error": "manifest unknown"},
    ]
    seen.clear()
    with pytest.raises(ImageNotFound):
        _store(_Pulls(stream=docker))._pull_once(parse("r/ns/svc:1.0"), True, seen.append, 1)
    assert [e.text for e in seen] == ["Pulling fs layer 39f17ecea68d"]


def test_backoff_doubles_up_to_the_cap() -> None:
    assert backoff_delays(0) == []
    assert backoff_delays(3) == [1.0, 2.0, 4.0]
    assert backoff_delays(4, base=0.5, cap=1.5) == [0.5, 1.0, 1.5, 1.5]
    assert backoff_delays(-1) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1970-01-01T00:00:00Z", datetime(1970, 1, 1, tzinfo=timezone.utc)),
        (
            "2024-05-01T10:00:00.123456789+02:00",
            datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2))),
        ),
        (
            "2024-05-01 10:00:00.5 +0000 UTC",
            datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=timezone.utc),
        ),
        (0, datetime(1970, 1, 1, tzinfo=timezone.utc)),
        ("yesterday", None),
        (None, None),
    ],
)
def test_creation_times_from_podman(value: object, expected: datetime | None) -> None:
    assert parse_created(value) == expected


def test_image_info_from_inspect_data() -> None:
    info = image_info(
        {
            "Id": "sha256:" + "a" * 64,
            "Digest": "sha256:" + "b" * 64,
            "RepoDigests": ["r:1/ns/svc@sha256:" + "b" * 64],
            "RepoTags": ["r:1/ns/svc:1.0", "cluster.common.tag/svc:pcmklatest"],
            "NamesHistory": ["r:1/ns/svc:1.0"],
            "Created": "1970-01-01T00:00:00Z",
        }
    )
    assert info.id == "a" * 64
    assert has_digest(info, "r:1/ns/svc", "sha256:" + "b" * 64)
    assert not has_digest(info, "r:1/other/svc", "sha256:" + "b" * 64)
    resolved = Resolved("n", "cluster.common.tag/svc:pcmklatest", info)
    assert resolved.other_names == ("r:1/ns/svc:1.0",)
    assert image_info({"Id": "c" * 64, "RepoTags": None}).names == ()


def test_errors_name_node_reference_and_fix() -> None:
    err = ImageNotFound("pull failed: x", "check the tag", node="c-1", ref="r/ns/svc:9")
    assert err.one_line() == "node c-1 (r/ns/svc:9): pull failed: x; fix: check the tag"
    assert isinstance(HostKeyRejected("k", node="n"), NodeUnreachable)


def test_importing_images_does_not_import_podman() -> None:
    code = "import sys, pcmkimg.adapters.podman; print('podman' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_ssh_urls() -> None:
    assert parse_url("ssh://root@h.example:2222/run/podman/podman.sock") == SshTarget(
        "h.example", "/run/podman/podman.sock", "root", 2222
    )
    assert parse_url("ssh://h/run/p.sock") == SshTarget("h", "/run/p.sock")
    for bad in ("ssh://h", "unix:///x", "ssh://-oProxyCommand=x/y", "ssh://h:99999/x"):
        with pytest.raises(TunnelFailed):
            parse_url(bad)


def test_ssh_argv_checks_host_keys_and_uses_given_files() -> None:
    target = SshTarget("h.example", "/run/podman/podman.sock", "root", 2222)
    argv = ssh_argv(
        target, "/tmp/x/l.sock", known_hosts="/k", identity_file="/id", connect_timeout=7
    )
    assert argv[:4] == ["ssh", "-N", "-L", "/tmp/x/l.sock:/run/podman/podman.sock"]
    options = {argv[i + 1] for i, a in enumerate(argv) if a == "-o"}
    assert {
        "BatchMode=yes",
        "StrictHostKeyChecking=yes",
        "ConnectTimeout=7",
        "ExitOnForwardFailure=yes",
        "UserKnownHostsFile=/k",
        "IdentityFile=/id",
        "IdentitiesOnly=yes",
    } <= options
    assert argv[-4:] == ["-p", "2222", "--", "root@h.example"]
    plain = ssh_argv(SshTarget("h", "/s"), "/l")
    assert not any("KnownHosts" in a or "Identity" in a for a in plain)


def test_downtime_is_from_the_old_containers_death_to_the_new_ones_start() -> None:
    events = [(9.0, "start"), (10.0, "kill"), (10.4, "died"), (10.5, "remove"), (11.6, "start")]
    assert downtime(events, since=9.5) == 1.2
    # A stop without a died event counts from the stop.
    assert downtime([(10.0, "stop"), (10.7, "start")], since=9.5) == 0.7
    # Not both seen: unknown, never a guess.
    assert downtime([(10.0, "died")], since=9.5) is None
    assert downtime([(9.0, "died"), (9.2, "start")], since=9.5) is None
