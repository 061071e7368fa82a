"""ocf toolkit: metadata rendering, escaping, and validation with the real xmllint."""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ocf import Action, Agent, Parameter, ParamType, escape_attr, escape_text, render_metadata
from tests.sandbox.require import need, need_tools

DTD = Path("/usr/share/resource-agents/ra-api-1.dtd")
RNG_11 = Path("/usr/share/pcs/data/ocf-1.1.rng")
RNG_10 = Path("/usr/share/pcs/data/ocf-1.0.rng")
REPO = Path(__file__).resolve().parents[2]

HOSTILE = "a & b < c > d \"e\" 'f' ]]> <!-- x --> &amp; \x00\x01\x1b\t\n\r\ud800\ufffe é € 😀"


def _noop(ctx) -> int:
    return 0


def _agent(text: str = "plain", name: str = "example") -> Agent:
    return Agent(
        name=name,
        version=text,
        shortdesc=text,
        longdesc=text,
        parameters=[
            Parameter("state", text, text, required=True, unique=True),
            Parameter("port", "Port", type=ParamType.INTEGER, default=8080),
            Parameter("enabled", "On", type=ParamType.BOOLEAN, default=False),
            Parameter("label", text, default=text),
        ],
        actions=[
            Action("start", timeout=20),
            Action("stop", timeout="30s"),
            Action("monitor", timeout=20, interval=10, depth=0),
            Action("monitor", timeout=40, interval="60s", depth=10),
            Action("promote", timeout="2min"),
            Action("demote", timeout=20),
            Action("monitor", timeout=20, interval=11, role="Promoted"),
            Action("notify", timeout=5),
        ],
        handlers={n: _noop for n in ("start", "stop", "monitor", "promote", "demote", "notify")},
    )


def test_structure() -> None:
    xml = render_metadata(_agent())
    lines = xml.splitlines()
    assert lines[0] == '<?xml version="1.0" encoding="UTF-8"?>'
    assert lines[1] == '<!DOCTYPE resource-agent SYSTEM "ra-api-1.dtd">'
    root = ET.fromstring(xml)
    assert root.tag == "resource-agent" and root.get("name") == "example"
    assert [child.tag for child in root] == [
        "version",
        "longdesc",
        "shortdesc",
        "parameters",
        "actions",
    ]
    params = {p.get("name"): p for p in root.iter("parameter")}
    assert params["state"].get("required") == "1" and params["state"].get("unique") == "1"
    assert params["port"].find("content").attrib == {"type": "integer", "default": "8080"}
    assert params["enabled"].find("content").attrib == {"type": "boolean", "default": "false"}
    actions = [a.attrib for a in root.iter("action")]
    assert all("timeout" in a for a in actions)
    assert {"name": "monitor", "timeout": "40s", "interval": "60s", "depth": "10"} in actions
    assert [a["name"] for a in actions][-2:] == ["validate-all", "meta-data"]


def test_hostile_text_is_escaped() -> None:
    xml = render_metadata(_agent(HOSTILE, name=HOSTILE))
    assert xml.isascii()
    root = ET.fromstring(xml)  # well-formed
    # What XML can carry comes back as given; the rest became U+FFFD.
    expected = HOSTILE.replace("\x00", "\ufffd").replace("\x01", "\ufffd").replace("\x1b", "\ufffd")
    expected = expected.replace("\ud800", "\ufffd").replace("\ufffe", "\ufffd")
    assert root.get("name") == expected and root.get("version") == expected
    assert root.find("shortdesc").text == expected
    label = [p for p in root.iter("parameter") if p.get("name") == "label"][0]
    assert label.find("content").get("default") == expected
    assert "<!--" not in xml and "]]>" not in xml


def test_escape_functions() -> None:
    assert escape_text("<a & b>") == "&lt;a &amp; b&gt;"
    assert escape_text('"\n') == "&quot;\n"
    assert escape_attr('"\n\t') == "&quot;&#xA;&#x9;"


def test_minimal_agent_renders() -> None:
    root = ET.fromstring(render_metadata(Agent("m", "minimal")))
    assert root.find("parameters") is not None and len(root.find("parameters")) == 0
    assert root.find("longdesc").text == "minimal"


def _xmllint(tmp_path: Path, xml: str, *options: str) -> subprocess.CompletedProcess[str]:
    need_tools("xmllint")
    need(DTD.exists(), f"needs {DTD} (resource-agents)")
    # As ocf-tester does it: the DTD next to the document, which names it relatively.
    shutil.copy(DTD, tmp_path / DTD.name)
    doc = tmp_path / "metadata.xml"
    doc.write_text(xml)
    return subprocess.run(
        ["xmllint", "--noout", *options, doc.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )


AGENTS = {
    "plain": lambda: _agent(),
    "hostile": lambda: _agent(HOSTILE, name=HOSTILE),
    "minimal": lambda: Agent("m", "minimal"),
    "ocf-1.0": lambda: Agent("m", "old", ocf_version="1.0"),
}


@pytest.mark.parametrize("which", sorted(AGENTS))
def test_valid_against_ra_api_1_dtd(tmp_path: Path, which: str) -> None:
    result = _xmllint(tmp_path, render_metadata(AGENTS[which]()), "--valid")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("which", sorted(AGENTS))
@pytest.mark.parametrize("rng", [RNG_11, RNG_10], ids=["ocf-1.1.rng", "ocf-1.0.rng"])
def test_valid_against_pcs_relaxng(tmp_path: Path, which: str, rng: Path) -> None:
    need(rng.exists(), f"needs {rng} (pcs)")
    result = _xmllint(tmp_path, render_metadata(AGENTS[which]()), "--relaxng", str(rng))
    assert result.returncode == 0, result.stderr


def test_dtd_check_catches_invalid_metadata(tmp_path: Path) -> None:
    """The check itself works: an action without timeout is refused."""
    xml = render_metadata(Agent("m", "minimal")).replace(' timeout="5s"', "")
    assert _xmllint(tmp_path, xml, "--valid").returncode != 0


def test_rendering_imports_nothing_heavy() -> None:
    code = (
        "import sys, io; sys.path.insert(0, sys.argv[1]);"
        "import ocf; a = ocf.Agent('m', 'x', parameters=[ocf.Parameter('p', 'p')]);"
        "ocf.run(a, ['meta-data'], {}, stdout=io.StringIO());"
        "print(' '.join(sorted(sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code, str(REPO)], capture_output=True, text=True, check=True
    ).stdout.split()
    heavy = {"xml", "urllib", "logging", "subprocess", "traceback", "syslog", "email", "ssl"}
    assert not heavy.intersection(loaded)
