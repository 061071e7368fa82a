"""Tests of pcmkimg.adapters.config: the node map, scheme, registries and ssh settings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pcmkimg.adapters.config import LOCAL_URL, Config, RegistrySettings, SshSettings, load, parse
from pcmkimg.adapters.errors import ConfigError, NodeNotConfigured
from pcmkimg.adapters.sshurl import parse_url
from pcmkimg.core.naming import Scheme

EXAMPLE = Path(__file__).resolve().parents[2] / "packaging" / "pcmkimg.conf"
"""The example configuration the RPM installs as /etc/pcmkimg/pcmkimg.conf."""

_EXAMPLE_LINE = re.compile(r"#[ \t]?([^\s=#;]+ = \S.*)")

FULL = """
# a comment
[nodes]
Controller-0 = unix:///run/podman/podman.sock
controller-1 = ssh://root@controller-1.example.com/run/podman/podman.sock
controller-2 = ssh://core@192.0.2.12:2222/run/podman/podman.sock

[scheme]
prefix = pcmk.example.org/images
tag = current
rollback_tag = before

[registries]
127.0.0.1:8787 = tls_verify=false
Registry.Example.com = tls_verify=true

[ssh]
known_hosts = /etc/pcmkimg/known_hosts
identity_file = /etc/pcmkimg/id_ed25519
connect_timeout = 5
"""


def test_full_file_is_read() -> None:
    config = parse(FULL, Path("/x.conf"))
    assert dict(config.nodes) == {
        "Controller-0": "unix:///run/podman/podman.sock",
        "controller-1": "ssh://root@controller-1.example.com/run/podman/podman.sock",
        "controller-2": "ssh://core@192.0.2.12:2222/run/podman/podman.sock",
    }
    assert config.scheme == Scheme("pcmk.example.org/images", "current", "before")
    assert dict(config.registries) == {
        "127.0.0.1:8787": RegistrySettings(tls_verify=False),
        "registry.example.com": RegistrySettings(tls_verify=True),
    }
    assert config.ssh == SshSettings(
        Path("/etc/pcmkimg/known_hosts"), Path("/etc/pcmkimg/id_ed25519"), 5
    )
    assert config.path == Path("/x.conf")


def test_tls_is_verified_unless_that_registry_says_otherwise() -> None:
    config = parse(FULL)
    assert config.tls_verify("127.0.0.1:8787") is False
    assert config.tls_verify("127.0.0.1:8788") is True
    assert config.tls_verify("REGISTRY.example.com") is True
    assert config.tls_verify(None) is True


def test_missing_default_file_gives_defaults_and_the_local_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PCMKIMG_CONF", raising=False)
    config = load(default=tmp_path / "absent.conf")
    assert config == Config()
    assert config.url_for("here", local_node="here") == LOCAL_URL
    with pytest.raises(NodeNotConfigured) as caught:
        config.url_for("elsewhere", local_node="here")
    assert "elsewhere" in caught.value.one_line() and "[nodes]" in caught.value.fix


def test_listed_node_wins_over_the_local_default() -> None:
    config = parse("[nodes]\nhere = unix:///tmp/other.sock\n")
    assert config.url_for("here", local_node="here") == "unix:///tmp/other.sock"


def test_environment_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "p.conf"
    conf.write_text("[nodes]\nn1 = unix:///tmp/n1.sock\n")
    monkeypatch.setenv("PCMKIMG_CONF", str(conf))
    config = load()
    assert config.nodes["n1"] == "unix:///tmp/n1.sock" and config.path == conf


def test_a_named_file_that_is_missing_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    absent = tmp_path / "absent.conf"
    with pytest.raises(ConfigError) as caught:
        load(absent)
    assert str(absent) in caught.value.one_line() and caught.value.fix
    monkeypatch.setenv("PCMKIMG_CONF", str(absent))
    with pytest.raises(ConfigError) as caught:
        load()
    assert str(absent) in caught.value.one_line() and "PCMKIMG_CONF" in caught.value.one_line()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[nodes\nx = y\n", "malformed"),
        ("no section = here\n", "malformed"),
        ("[nodes]\na = 1\na = 2\n", "malformed"),
        ("[node]\na = unix:///x\n", "unknown section [node]"),
        ("[nodes]\nc0 = http://c0:8080\n", "not a podman URL"),
        ("[nodes]\nc0 = ssh://c0\n", "not a podman URL"),
        ("[nodes]\nc0 = ssh://root@-oProxyCommand=x/run/p.sock\n", "[nodes] c0 = "),
        ("[nodes]\nc0 = ssh://root@c0:65536/run/podman/podman.sock\n", "[nodes] c0 = "),
        ("[nodes]\nc0 = ssh://root@c0:0/run/podman/podman.sock\n", "not a podman URL"),
        ("[nodes]\nc0 = ssh://root@[c0]x/run/podman/podman.sock\n", "not a podman URL"),
        ("[nodes]\nc0 = ssh://root@c0/run/p.sock # comment\n", "not a podman URL"),
        ("[scheme]\nprefix = cluster-common-tag\n", "has no '.'"),
        ("[scheme]\nflavour = x\n", "unknown key 'flavour'"),
        ("[registries]\nreg.example.com = insecure\n", "unknown option 'insecure'"),
        ("[registries]\nreg.example.com = tls_verify=maybe\n", "not a boolean"),
        ("[registries]\nreg_x.com = tls_verify=false\n", "invalid registry"),
        ("[ssh]\nconnect_timeout = soon\n", "not 1 to 120"),
        ("[ssh]\nconnect_timeout = 0\n", "not 1 to 120"),
        ("[ssh]\nknown_hosts = known_hosts\n", "not an absolute path"),
    ],
)
def test_malformed_file_is_a_clear_error(text: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(text, Path("/etc/pcmkimg/pcmkimg.conf"))
    line = caught.value.one_line()
    assert words in line and "/etc/pcmkimg/pcmkimg.conf" in line and caught.value.fix


def test_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path)  # a directory


@pytest.mark.parametrize(
    "url",
    [
        "ssh://root@-oProxyCommand=touch$IFS/tmp/x/run/podman/podman.sock",
        "ssh://-host/run/podman/podman.sock",
        "ssh://root@c0:65536/run/podman/podman.sock",
        "ssh://root@c0:99999/run/podman/podman.sock",
        "ssh://root@c0:123456/run/podman/podman.sock",
    ],
)
def test_ssh_url_the_tunnel_refuses_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(f"[nodes]\ncontroller-1 = {url}\n", Path("/etc/pcmkimg/pcmkimg.conf"))
    err = caught.value
    assert "/etc/pcmkimg/pcmkimg.conf: [nodes] controller-1 = " in err.message
    assert "ssh://USER@HOST[:PORT]/" in err.fix and "65535" in err.fix
    assert "/etc/pcmkimg/pcmkimg.conf" in err.fix and "controller-1 = " in err.fix


def test_every_accepted_ssh_url_is_one_the_tunnel_opens() -> None:
    for url in parse(FULL).nodes.values():
        if url.startswith("ssh://"):
            parse_url(url)  # must not raise
    parse("[nodes]\nc = ssh://c:65535/run/podman/podman.sock\n")
    parse("[nodes]\nc = ssh://root@[2001:db8::1]:22/run/podman/podman.sock\n")


def _uncommented(text: str) -> tuple[str, list[str]]:
    lines, examples = [], []
    for line in text.splitlines():
        found = _EXAMPLE_LINE.fullmatch(line)
        if found:
            examples.append(found[1])
            line = found[1]
        lines.append(line)
    return "\n".join(lines) + "\n", examples


def test_shipped_example_means_the_defaults() -> None:
    config = parse(EXAMPLE.read_text(encoding="utf-8"), EXAMPLE)
    assert config == Config(path=EXAMPLE)


def test_every_example_line_of_the_shipped_file_parses() -> None:
    text, examples = _uncommented(EXAMPLE.read_text(encoding="utf-8"))
    # Each section shows at least one example, and all the documented keys of the others.
    assert len(examples) >= 10, examples
    config = parse(text, EXAMPLE)
    assert set(config.nodes) == {"controller-0", "controller-1", "controller-2"}
    assert config.url_for("controller-2").startswith("ssh://")
    assert config.scheme == Scheme()
    assert config.registries
    assert not any(settings.tls_verify for settings in config.registries.values())
    assert config.ssh.known_hosts and config.ssh.identity_file
    assert config.ssh.connect_timeout == 10
