"""The man pages, generated as the RPM build does (packaging/manpages.py), render cleanly.

Every click command has its page (pcmkimg(8), pcmkimg-update(8), pcmkimg-guard-add(8), ...),
the agent has ocf_pcmkimg_floating-image(7), and ``man -l`` renders each without a warning.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from pcmkimg import __version__
from pcmkimg.cli import cli
from tests.sandbox.require import need, need_tools

REPO = Path(__file__).resolve().parents[2]
DOCBOOK = "/usr/share/xml/docbook/stylesheet/docbook-xsl/manpages/docbook.xsl"


def command_paths(cmd: click.Command, words: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [words]
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            found += command_paths(sub, (*words, name))
    return found


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> Path:
    need_tools("help2man", "xsltproc", "man")
    need(os.path.isfile(DOCBOOK), "needs the DocBook XSL stylesheets (apt-get install docbook-xsl)")
    out = tmp_path_factory.mktemp("man")
    subprocess.run(
        [sys.executable, str(REPO / "packaging" / "manpages.py"), str(out), __version__],
        env={**os.environ, "SOURCE_DATE_EPOCH": "1796117344"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out


def every_page() -> list[str]:
    names = ["-".join(("pcmkimg", *w)) + ".8" for w in command_paths(cli)]
    return [*names, "pcmkimg.conf.5", "ocf_pcmkimg_floating-image.7"]


def test_every_command_has_a_page(pages):
    assert "pcmkimg-update.8" in every_page() and "pcmkimg-guard-add.8" in every_page()
    assert sorted(p.name for p in pages.iterdir()) == sorted(every_page())


@pytest.mark.parametrize("name", every_page())
def test_the_page_renders_without_warnings(pages, name):
    proc = subprocess.run(
        ["man", "-l", "--warnings", str(pages / name)],
        env={
            **os.environ,
            "MANWIDTH": "80",
            "MANPAGER": "cat",
            "PAGER": "cat",
            "LC_ALL": "C.UTF-8",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    title, section = name.rsplit(".", 1)
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"{title.upper()[:20]}"), first
    assert f"({section})" in first
    assert "NAME" in proc.stdout and f"pcmkimg {__version__}" in proc.stdout


def test_the_update_page_has_the_help_text(pages):
    text = (pages / "pcmkimg-update.8").read_text()
    for option in cli.commands["update"].params:
        if isinstance(option, click.Option):
            assert option.opts[0].replace("-", r"\-") in text, option.opts[0]
    # Nothing cut short: help2man gets the whole help line, roff does the filling.
    main = (pages / "pcmkimg.8").read_text()
    commands = main.split('.SS "Commands:"')[1].split(".SH")[0]
    assert "..." not in commands and "restart that replica" in commands


def test_each_command_page_has_exit_status_and_examples(pages):
    for words in command_paths(cli):
        text = (pages / ("-".join(("pcmkimg", *words)) + ".8")).read_text()
        assert '.SH "EXIT STATUS"' in text and ".SH EXAMPLES" in text, words
    main = (pages / "pcmkimg.8").read_text()
    assert "Stopped by SIGTERM" in main and "guard" in main


def test_the_conf_page_has_every_section(pages):
    from pcmkimg.adapters.config import _SECTIONS

    text = (pages / "pcmkimg.conf.5").read_text()
    for section in _SECTIONS:
        assert f'.SH "[{section}]"' in text, section


def test_the_agent_page_has_every_parameter(pages):
    from pcmkimg.agent import AGENT

    text = (pages / "ocf_pcmkimg_floating-image.7").read_text()
    assert '.SH "EXIT STATUS"' in text and text.index("EXIT STATUS") < text.index("SEE ALSO")
    assert AGENT.parameters
    for param in AGENT.parameters:
        assert f"\\fB{param.name}\\fR" in text, param.name


def test_the_pages_markdown_becomes_roff():
    """packaging/man/*.md as roff: sections, paragraphs, lists, tables, code; escapes, and no
    line that roff or help2man's --include reader would take for something else."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("manpages", REPO / "packaging" / "manpages.py")
    assert spec and spec.loader
    manpages = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(manpages)
    text = "\n".join(
        [
            "# title, left out",
            "## EXIT STATUS",
            "A `--flag` and **bold**,",
            "one paragraph.",
            "",
            "- an item",
            "1. a step",
            "| code | meaning |",
            "|---|---|",
            "| 3 | refused |",
            "```",
            "[nodes]",
            ".dot a\\b-c",
            "```",
            "[a link](elsewhere.md)",
        ]
    )
    assert manpages.roff(text, "[{}]").splitlines() == [
        "[EXIT STATUS]",
        ".PP",
        r"A \fB\-\-flag\fR and \fBbold\fR, one paragraph.",
        r".IP \(bu 2",
        "an item",
        ".IP 1. 4",
        "a step",
        ".TP",
        "3",
        "refused",
        ".PP",
        ".RS 4",
        ".nf",
        r"\&[nodes]",
        r"\&.dot a\eb\-c",
        ".fi",
        ".RE",
        ".PP",
        "a link",
    ]
