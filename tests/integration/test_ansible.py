"""The Ansible collection ``pcmkimg.cluster`` (issue 21 item 4) with the real ansible-core:
``ansible-galaxy`` builds and installs it, ``ansible-doc`` parses each module's documentation,
and ``ansible-playbook`` runs its modules on localhost against this checkout's pcmkimg
(``status`` and ``check`` offline on a saved CIB; ``update`` in check mode on bad input).

Everything ansible writes (its home, its temporary directories, the built and installed
collection) stays under the test's tmp_path; nothing reaches the network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.sandbox.require import need_tools

ROOT = Path(__file__).resolve().parents[2]
COLLECTION = ROOT / "ansible_collections" / "pcmkimg" / "cluster"
VERSION = "0.1.0"  # galaxy.yml's
SAVED_CIB = ROOT / "tests" / "offline" / "cib" / "shapes-live.xml"
TOOLS = ("ansible-galaxy", "ansible-doc", "ansible-playbook", "crm_mon", "cibadmin")
STICKY = (
    "<rsc_defaults><meta_attributes id='rsc-options'>"
    "<nvpair id='rsc-options-stickiness' name='resource-stickiness' value='INFINITY'/>"
    "</meta_attributes></rsc_defaults>"
)

pytestmark = pytest.mark.timeout(300)


@dataclass(frozen=True)
class Ansible:
    root: Path
    env: dict[str, str]
    collections: Path  # ANSIBLE_COLLECTIONS_PATH: where the built tarball was installed
    tarball: Path
    pcmkimg: Path  # the wrapper that runs this checkout's pcmkimg
    conf: Path  # pcmkimg.conf without nodes: every store is unreachable

    def run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            cwd=self.root,
            check=False,
        )

    def playbook(self, name: str, tasks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Run ``tasks`` on localhost (connection local), each registered as ``r<i>`` with
        ``ignore_errors``; return the registered results by task name, as JSON."""
        plays = [
            {
                "hosts": "localhost",
                "connection": "local",
                "gather_facts": False,
                "tasks": [
                    {**task, "register": f"r{i}", "ignore_errors": True}
                    for i, task in enumerate(tasks)
                ]
                + [
                    {
                        "name": "save the results",
                        "ansible.builtin.copy": {
                            "dest": str(self.root / f"{name}.json"),
                            "content": "{{ {"
                            + ", ".join(f"'{t['name']}': r{i}" for i, t in enumerate(tasks))
                            + "} | to_json }}",
                        },
                    }
                ],
            }
        ]
        book = self.root / f"{name}.yml"
        book.write_text(json.dumps(plays, indent=1))  # JSON is YAML
        proc = self.run("ansible-playbook", "-i", "localhost,", str(book))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads((self.root / f"{name}.json").read_text())


def _clean_env(root: Path) -> dict[str, str]:
    # no PYTHONPATH: ansible finds collections on sys.path too, and the checkout's own
    # ansible_collections would stand in for the installed one
    drop = ("ANSIBLE_", "CIB_", "PCMKIMG_", "CONTAINER_HOST", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    for sub in ("home", "local-tmp", "remote-tmp"):
        (root / sub).mkdir(mode=0o700)
    (root / "ansible.cfg").write_text("[defaults]\n")
    env.update(
        HOME=str(root / "home"),
        ANSIBLE_LOCAL_TEMP=str(root / "local-tmp"),
        ANSIBLE_REMOTE_TEMP=str(root / "remote-tmp"),
        ANSIBLE_CONFIG=str(root / "ansible.cfg"),  # not the machine's ansible.cfg
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="0",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="0",
        LC_ALL="C.UTF-8",
    )
    return env


@pytest.fixture(scope="module")
def ansible(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ansible]:
    """The collection built and installed under a tmp dir, and the wrapper that runs this
    checkout's pcmkimg (what an RPM puts at /usr/bin/pcmkimg)."""
    need_tools(*TOOLS)
    root = tmp_path_factory.mktemp("ansible")
    env = _clean_env(root)
    build = subprocess.run(
        ["ansible-galaxy", "collection", "build", str(COLLECTION), "--output-path", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=root,
        check=False,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    tarball = root / f"pcmkimg-cluster-{VERSION}.tar.gz"
    collections = root / "collections"
    install = subprocess.run(
        ["ansible-galaxy", "collection", "install", str(tarball), "-p", str(collections)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=root,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
    wrapper = root / "pcmkimg"
    wrapper.write_text(
        f"#!/bin/sh\nPYTHONPATH='{ROOT}' exec '{sys.executable}' -m pcmkimg \"$@\"\n"
    )
    wrapper.chmod(0o755)
    conf = root / "pcmkimg.conf"
    conf.write_text("[nodes]\n")
    yield Ansible(root, env, collections, tarball, wrapper, conf)


def _common(a: Ansible) -> dict[str, str]:
    return {"executable": str(a.pcmkimg), "conf": str(a.conf)}


# --------------------------------------------------------------------------- build, docs


def test_the_collection_builds_and_installs(ansible: Ansible) -> None:
    installed = ansible.collections / "ansible_collections" / "pcmkimg" / "cluster"
    manifest = json.loads((installed / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["namespace"] == "pcmkimg"
    assert manifest["collection_info"]["name"] == "cluster"
    assert manifest["collection_info"]["version"] == VERSION
    for module in ("update", "status", "check"):
        assert (installed / "plugins" / "modules" / f"{module}.py").is_file()
    assert (installed / "meta" / "runtime.yml").is_file()
    listed = ansible.run("ansible-galaxy", "collection", "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    found = json.loads(listed.stdout)  # {path: {collection: {"version": ...}}}
    where = {
        path: got["pcmkimg.cluster"] for path, got in found.items() if "pcmkimg.cluster" in got
    }
    assert where == {str(ansible.collections / "ansible_collections"): {"version": VERSION}}
    assert not list(COLLECTION.glob("*.tar.gz"))  # the build wrote into tmp_path only


def test_ansible_doc_parses_each_module(ansible: Ansible) -> None:
    names = [f"pcmkimg.cluster.{m}" for m in ("update", "status", "check")]
    proc = ansible.run("ansible-doc", "--json", "-t", "module", *names)
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(proc.stdout)
    assert sorted(docs) == sorted(names)
    for name, doc in docs.items():
        options = doc["doc"]["options"]
        assert options["executable"]["default"] == "pcmkimg", name  # the doc fragment
        assert options["conf"]["type"] == "path", name
        assert doc["examples"] and doc["return"]["rc"]["type"] == "int", name
        assert doc["doc"]["attributes"]["check_mode"]["support"] == "full", name
    update = docs["pcmkimg.cluster.update"]["doc"]["options"]
    assert {"service", "image", "nodes", "all", "digest", "timeout", "no_restart"} <= set(update)
    assert update["service"]["required"] and update["image"]["required"]
    assert "fail_on_problems" in docs["pcmkimg.cluster.check"]["doc"]["options"]
    text = ansible.run("ansible-doc", "-t", "module", "pcmkimg.cluster.update")  # as read
    assert text.returncode == 0, text.stderr
    assert "pcmkimg.cluster.update" in text.stdout.lower() and "--dry-run" in text.stdout
    assert str(ansible.collections) in text.stdout  # the installed copy, not the checkout's


# --------------------------------------------------------------------------- playbooks


@pytest.fixture(scope="module")
def results(ansible: Ansible) -> dict[str, dict[str, Any]]:
    """One playbook (ansible-playbook's start is the slow part) with every task the tests
    below look at: status and check offline on saved CIBs, update in check mode on bad input."""
    empty = ansible.run("cibadmin", "--empty")
    assert empty.returncode == 0, empty.stderr
    clean = ansible.root / "clean.xml"  # no bundle, stickiness set: check finds nothing
    clean.write_text(empty.stdout.replace("<constraints/>", "<constraints/>" + STICKY, 1))
    assert STICKY in clean.read_text()
    common = _common(ansible)
    saved = {**common, "cib_file": str(SAVED_CIB)}
    update = {**common, "service": "svc", "all": True}
    return ansible.playbook(
        "offline",
        [
            {"name": "status", "pcmkimg.cluster.status": saved},
            {"name": "fact", "ansible.builtin.set_fact": {"seen": "{{ pcmkimg_status }}"}},
            {
                "name": "one",
                "pcmkimg.cluster.status": {**saved, "services": ["pair"]},
                "check_mode": True,
            },
            {"name": "unknown", "pcmkimg.cluster.status": {**saved, "services": ["nosuch"]}},
            {"name": "check", "pcmkimg.cluster.check": saved},
            {"name": "lenient", "pcmkimg.cluster.check": {**saved, "fail_on_problems": False}},
            {"name": "clean", "pcmkimg.cluster.check": {**common, "cib_file": str(clean)}},
            {
                "name": "malformed",
                "pcmkimg.cluster.update": {**update, "image": "BAD IMAGE!!"},
                "check_mode": True,
            },
            {
                "name": "floating",
                "pcmkimg.cluster.update": {
                    **update,
                    "image": "cluster.common.tag/svc:pcmklatest",
                    "digest": "sha256:" + "a" * 64,
                    "timeout": 30,
                    "no_restart": True,
                },
                "check_mode": True,
            },
            {
                "name": "no-nodes",
                "pcmkimg.cluster.update": {**common, "service": "svc", "image": "reg/ns/svc:1"},
                "check_mode": True,
            },
            {
                "name": "missing",
                "pcmkimg.cluster.update": {
                    **update,
                    "image": "reg/ns/svc:1",
                    "executable": "/nope",
                },
            },
        ],
    )


def test_status_returns_the_status_document_as_facts(
    ansible: Ansible, results: dict[str, dict[str, Any]]
) -> None:
    status = results["status"]
    assert not status.get("failed") and status["changed"] is False and status["rc"] == 0
    doc = status["status"]
    assert doc["schema"] == "pcmkimg-status/1"
    assert set(doc["cluster"]) == {"quorum", "dc"}
    assert doc["services"], "the saved CIB has bundles"
    for service in doc["services"]:
        assert {"service", "bundle", "floating", "guard", "interleave", "nodes"} <= set(service)
        for node in service["nodes"]:  # no store is in pcmkimg.conf
            assert node["reachable"] is False and "no podman URL" in node["error"]
            assert {"node", "can_run", "floating", "container", "drift", "role"} <= set(node)
    assert status["ansible_facts"]["pcmkimg_status"] == doc
    assert results["fact"]["ansible_facts"]["seen"] == doc  # a fact later tasks see
    assert status["cmd"][:4] == [str(ansible.pcmkimg), "--json", "--conf", str(ansible.conf)]
    one = results["one"]  # in check mode too: it is read-only
    assert not one.get("failed") and [s["service"] for s in one["status"]["services"]] == ["pair"]
    unknown = results["unknown"]
    assert unknown["failed"] is True and unknown["rc"] == 2
    assert unknown["msg"].startswith("pcmkimg exited 2 (bad input): ")
    assert "nosuch" in unknown["error"] and unknown["error"] in unknown["msg"]


def test_check_fails_as_pcmkimgs_exit_code_says(results: dict[str, dict[str, Any]]) -> None:
    """Exit 3 (every store unreachable): the task fails with the problems, or succeeds with
    them when fail_on_problems is false; exit 0 on a CIB pcmkimg finds nothing wrong with."""
    check = results["check"]
    assert check["failed"] is True and check["rc"] == 3 and check["changed"] is False
    assert "unreachable" in {p["kind"] for p in check["problems"]}
    assert check["msg"].startswith("pcmkimg exited 3 (")
    assert f"{len(check['problems'])} problem(s) found: unreachable: " in check["msg"]
    assert check["report"] == {"ok": False, "problems": check["problems"]}

    lenient = results["lenient"]
    assert not lenient.get("failed") and lenient["ok"] is False
    assert lenient["problems"] == check["problems"] and lenient["rc"] == 3

    clean = results["clean"]
    assert not clean.get("failed"), clean.get("msg")
    assert clean["ok"] is True and clean["problems"] == [] and clean["rc"] == 0


def test_update_in_check_mode_on_bad_input_fails_with_pcmkimgs_line(
    results: dict[str, dict[str, Any]],
) -> None:
    """A malformed image: pcmkimg's exit 2 and its error line (with its fix) in msg, and check
    mode ran --dry-run; a floating name as the image, and neither nodes nor all: pcmkimg's own
    refusals, each option passed through."""
    bad = results["malformed"]
    assert bad["failed"] is True and bad["rc"] == 2 and bad["changed"] is False
    assert bad["msg"].startswith("pcmkimg exited 2 (bad input): invalid reference")
    assert "fix: " in bad["msg"] and bad["error"] in bad["msg"]
    assert f"pcmkimg: error: {bad['error']}" in bad["stderr"]
    assert bad["report"] is None and bad["dry_run"] is True
    cmd = bad["cmd"]
    assert cmd[-1] == "--dry-run" and cmd[cmd.index("--image") + 1] == "BAD IMAGE!!"
    assert "--all" in cmd

    floating = results["floating"]
    assert floating["failed"] is True and floating["rc"] == 2
    assert "is a floating or rollback name" in floating["msg"]
    argv = floating["cmd"]
    assert argv[argv.index("--digest") + 1] == "sha256:" + "a" * 64
    assert argv[argv.index("--timeout") + 1] == "30" and "--no-restart" in argv

    none = results["no-nodes"]
    assert none["failed"] is True and none["rc"] == 2
    assert "give either --node" in none["msg"]

    missing = results["missing"]  # no such executable: Ansible's own failure, not pcmkimg's
    assert missing["failed"] is True and missing.get("rc") != 0
