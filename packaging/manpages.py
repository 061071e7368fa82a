"""Generate the man pages at build time, from the one source of each text.

Usage: python3 packaging/manpages.py OUTDIR VERSION

- pcmkimg(8) and one page per command, pcmkimg-update(8), pcmkimg-guard-add(8), ...: help2man
  reads each click command's --help (the help texts in pcmkimg/cli.py); the page's own sections
  (description, failures, EXIT STATUS, EXAMPLES, ...) come from packaging/man/PAGE.md.
- pcmkimg.conf(5): packaging/man/pcmkimg.conf.md alone.
- ocf_pcmkimg_floating-image(7): the agent's meta-data, turned into a DocBook refentry by
  packaging/ocf2refentry.xsl and into roff by the DocBook XSL stylesheets (xsltproc), as
  resource-agents builds its ocf_heartbeat_*(7) pages; then the sections of
  packaging/man/ocf_pcmkimg_floating-image.md (EXIT STATUS, ...) before its SEE ALSO.

Run from the source tree (the spec's %build does); needs help2man, xsltproc and the DocBook
XSL stylesheets (Debian: docbook-xsl; RHEL: docbook-style-xsl), and click and lxml for the
interpreter running it. SOURCE_DATE_EPOCH, when set, dates the pages (reproducible builds).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SRC))

import click  # noqa: E402

from pcmkimg.cli import cli  # noqa: E402

# Resolved through the XML catalog (/etc/xml/catalog) to the local copy; --nonet forbids
# any download.
DOCBOOK_MAN = "http://docbook.sourceforge.net/release/xsl/current/manpages/docbook.xsl"

# A command, as help2man runs it: the click group with the path of words before the
# arguments. Wide help text: help2man and roff do the filling, nothing is cut with "...".
WRAPPER = """#!{python}
import sys
sys.path.insert(0, {src!r})
import click.formatting
click.formatting.FORCED_WIDTH = 10000
from pcmkimg.cli import main
main([*{words!r}, *sys.argv[1:]])
"""


def commands(group: click.Command, words: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path of the CLI, the group itself first: (), ("update",), ("guard", "add")."""
    found = [words]
    if isinstance(group, click.Group):
        for name in sorted(group.commands):
            sub = group.commands[name]
            if not sub.hidden:
                found += commands(sub, (*words, name))
    return found


def command_of(words: tuple[str, ...]) -> click.Command:
    cmd: click.Command = cli
    for word in words:
        assert isinstance(cmd, click.Group)
        cmd = cmd.commands[word]
    return cmd


def page_name(words: tuple[str, ...]) -> str:
    return "-".join(("pcmkimg", *words))


def see_also(words: tuple[str, ...], every: list[tuple[str, ...]]) -> str:
    """The SEE ALSO section, in help2man's include format."""
    if words:
        refs = [page_name(words[:-1])]
        refs += [page_name(w) for w in every if len(w) == len(words) + 1 and w[:-1] == words]
    else:
        refs = [page_name(w) for w in every if w]
    refs = [f"{r}(8)" for r in refs] + [
        "pcmkimg.conf(5)",
        "ocf_pcmkimg_floating-image(7)",
        "pcs(8)",
    ]
    lines = [f".BR {r.split('(')[0].replace('-', chr(92) + '-')} ({r.split('(')[1]}" for r in refs]
    return "[SEE ALSO]\n" + ",\n".join(lines) + "\n"


MAN = SRC / "packaging" / "man"
ITEM = re.compile(r"- |\d+\. ")
"""A list item of the pages' markdown: a bullet or a number."""
LEADERS = (".", "'", "[", "/")
"""What a line must not start with: a roff request, or a section or pattern to help2man's
--include reader. A leading ``\\&`` (zero width) keeps it text."""
BREAK = re.compile(r"- |\d+\. |#|\||```")
"""A line that starts something new rather than going on with the paragraph above."""


def inline(text: str) -> str:
    """One line of the pages' markdown as roff: escapes, `code` and **bold**, *italic*, links."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = re.sub(r"\[([^]]+)\]\([^)]+\)", r"\1", text)
    text = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", text)
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"\\fI\1\\fR", text)
    return "\\&" + text if text[:1] in LEADERS else text


def roff(markdown: str, heading: str) -> str:
    """The pages' markdown (packaging/man/*.md) as roff: ``## SECTION`` headings (as ``heading``
    formats them), paragraphs, ``- `` lists, tables as tagged paragraphs (the first cell the
    tag; the header row is left out) and fenced code blocks. The ``# `` title line is left out."""
    out: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            end = lines.index("```", i + 1)
            code = [c.replace("\\", "\\e").replace("-", "\\-") for c in lines[i + 1 : end]]
            code = [("\\&" + c if c[:1] in LEADERS else c) for c in code]
            out += [".PP", ".RS 4", ".nf", *code, ".fi", ".RE"]
            i = end + 1
            continue
        if line.startswith("## "):
            out.append(heading.format(line[3:].strip()))
        elif line.startswith("# ") or not line.strip():
            pass
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            for row in rows[2:]:
                out += [".TP", inline(row[0]), inline(" ".join(row[1:]))]
            continue
        else:
            item = ITEM.match(line)
            words = [line[item.end() :] if item else line]
            while i + 1 < len(lines) and lines[i + 1].strip() and not BREAK.match(lines[i + 1]):
                i += 1
                words.append(lines[i].strip())
            mark = ".PP" if not item else ".IP \\(bu 2" if item[0] == "- " else f".IP {item[0]}4"
            out += [mark, inline(" ".join(words))]
        i += 1
    return "\n".join(out) + "\n"


def run(argv: list[str], **kw) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kw)  # noqa: S603
    if proc.returncode != 0:
        sys.exit(f"manpages: {argv[0]} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def cli_pages(out: Path, version: str, tmp: Path) -> None:
    every = commands(cli)
    for words in every:
        name = page_name(words)
        wrapper = tmp / name
        wrapper.write_text(WRAPPER.format(python=sys.executable, src=str(SRC), words=list(words)))
        wrapper.chmod(stat.S_IRWXU)
        include = tmp / f"{name}.h2m"
        own = MAN / f"{name}.md"
        extra = (
            roff(own.read_text(), "[{}]").replace("[DESCRIPTION]", "[>DESCRIPTION]")
            if own.is_file()
            else ""
        )
        include.write_text(extra + see_also(words, every))
        summary = command_of(words).get_short_help_str(limit=200).rstrip(".")
        summary = summary[:1].lower() + summary[1:]
        run(
            [
                "help2man",
                "--no-info",
                "--no-discard-stderr",
                "--section=8",
                f"--name={summary}",
                f"--version-string={version}",
                f"--source=pcmkimg {version}",
                "--manual=pcmkimg manual",
                f"--include={include}",
                f"--output={out / f'{name}.8'}",
                str(wrapper),
            ]
        )


def agent_page(out: Path, version: str, tmp: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    meta = run([sys.executable, str(SRC / "agents" / "floating-image"), "meta-data"], env=env)
    (tmp / "meta-data.xml").write_text(meta.stdout)
    refentry = tmp / "refentry.xml"
    run(
        [
            "xsltproc",
            "--nonet",
            "--novalid",
            "--stringparam",
            "version",
            version,
            "--output",
            str(refentry),
            str(SRC / "packaging" / "ocf2refentry.xsl"),
            str(tmp / "meta-data.xml"),
        ]
    )
    run(
        [
            "xsltproc",
            "--nonet",
            "--novalid",
            "--stringparam",
            "man.output.quietly",
            "1",
            "--stringparam",
            "refentry.meta.get.quietly",
            "1",
            "--output",
            f"{out}/",
            DOCBOOK_MAN,
            str(refentry),
        ]
    )
    page = out / "ocf_pcmkimg_floating-image.7"
    if not page.is_file():
        sys.exit("manpages: the DocBook stylesheets wrote no ocf_pcmkimg_floating-image.7")
    # The page's own sections (packaging/man/ocf_pcmkimg_floating-image.md) before SEE ALSO.
    own = roff((MAN / "ocf_pcmkimg_floating-image.md").read_text(), '.SH "{}"')
    text = page.read_text()
    if '.SH "SEE ALSO"' not in text:
        sys.exit("manpages: the agent's page has no SEE ALSO to put its own sections before")
    page.write_text(text.replace('.SH "SEE ALSO"', own + '.SH "SEE ALSO"', 1))


def conf_page(out: Path, version: str) -> None:
    """pcmkimg.conf(5), dated as the other pages (SOURCE_DATE_EPOCH, else today)."""
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    date = time.strftime("%B %Y", time.gmtime(epoch))
    head = f'.TH PCMKIMG.CONF 5 "{date}" "pcmkimg {version}" "pcmkimg manual"\n'
    body = roff((MAN / "pcmkimg.conf.md").read_text(), '.SH "{}"')
    (out / "pcmkimg.conf.5").write_text(head + body)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    out, version = Path(sys.argv[1]), sys.argv[2]
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cli_pages(out, version, Path(tmp))
        conf_page(out, version)
        agent_page(out, version, Path(tmp))


if __name__ == "__main__":
    main()
