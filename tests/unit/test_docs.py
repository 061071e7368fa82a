"""The docs stay true to the CLI.

- Every ``pcmkimg ...`` command line in the docs' code names a command of the click group,
  and each of its options belongs to that command or to the group.
- Every command and every option of the CLI is in the docs.
- The exit codes of pcmkimg(8) are the CLI's, and every code a table of the docs gives is one.
- Every internal link resolves, to a file and to a heading of it.
- The README's command lines parse as the CLI takes them (click's make_context, nothing run).

"The docs" are the README, CONTRIBUTING.md, the guides in docs/ and the man pages' own text in
packaging/man/.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from pcmkimg import cli as cli_module
from pcmkimg.cli import cli

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    + list((ROOT / "docs").glob("*.md"))
    + list((ROOT / "packaging" / "man").glob("*.md"))
)
EXIT_NAMES = (
    "OK INTERNAL BAD_INPUT PROBLEMS LEASE_HELD UNREACHABLE UPDATE_FAILED ROLLBACK_FAILED "
    "OUTDATED REGISTRY_UNASKED HANGUP QUIT INTERRUPTED TERMINATED"
).split()
ENDS = {"|", ">", ">>", "&&", ";", "#", "2>&1"}
"""Where a command line ends inside a shell line."""


def commands(cmd: click.Command = cli, words: tuple[str, ...] = ()) -> dict[tuple, click.Command]:  # type: ignore[type-arg]
    found = {words: cmd}
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            found.update(commands(sub, (*words, name)))
    return found


COMMANDS = commands()


def options(cmd: click.Command) -> set[str]:
    return {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts + p.secondary_opts}


def command_lines(text: str) -> list[list[str]]:
    """Each ``pcmkimg ...`` command line in the code of a markdown text, as words, up to its
    end: a line of a fenced block that runs it (after ``$``, ``sudo`` or ``systemd``'s
    ``ExecStart=``), or an inline code span that starts with it."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))
    found = []
    for line in [line for b in blocks for line in b.splitlines()] + spans:
        start = re.match(r"(?:\$ |.*\bsudo |ExecStart=/usr/bin/)?pcmkimg ", line)
        if not start:
            continue
        try:
            words = shlex.split(line[start.end() :])
        except ValueError:
            words = line[start.end() :].split()
        cut = next((i for i, w in enumerate(words) if w in ENDS or w.startswith("#")), len(words))
        found.append(words[:cut])
    return found


def resolve(words: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """The command path of a command line and the option words it gives (group's included)."""
    path: tuple[str, ...] = ()
    given = []
    flags = [p for p in cli.params if isinstance(p, click.Option) and not p.is_flag]
    takes_value = {o for p in flags for o in p.opts}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            given.append(word.split("=")[0])
            if word in takes_value and "=" not in word:
                i += 1
        elif (*path, word) in COMMANDS and isinstance(COMMANDS[path], click.Group):
            path = (*path, word)
        i += 1
    return path, given


def every_command_line() -> list[tuple[str, list[str]]]:
    return [(p.name, w) for p in DOCS for w in command_lines(p.read_text()) if w]


@pytest.mark.parametrize(("doc", "words"), every_command_line())
def test_each_command_line_names_a_command_and_its_options(doc: str, words: list[str]) -> None:
    if all(w.isupper() or w.startswith(("[", "-")) for w in words[:1]):
        return  # a synopsis such as `pcmkimg COMMAND`, or the group's own options
    path, given = resolve(words)
    assert path, f"{doc}: `pcmkimg {' '.join(words)}` names no command"
    allowed = options(COMMANDS[path]) | options(cli)
    unknown = [o for o in given if o not in allowed]
    assert not unknown, f"{doc}: `pcmkimg {' '.join(words)}`: {unknown} are not options of it"


def test_every_command_and_option_is_in_the_docs() -> None:
    """Each command has its page's own text and an example; each option is in that text or in
    an example of that command."""
    lines = [resolve(w) for _, w in every_command_line()]
    shown = {path for path, _ in lines}
    for path, cmd in COMMANDS.items():
        if path and not isinstance(cmd, click.Group):
            assert path in shown, f"no example of `pcmkimg {' '.join(path)}` in the docs"
        page = ROOT / "packaging" / "man" / ("-".join(("pcmkimg", *path)) + ".md")
        assert page.is_file(), f"no man page text for `pcmkimg {' '.join(path)}`: {page}"
        used = {o for p, given in lines if p == path for o in given}
        own = page.read_text()
        for option in sorted(options(cmd) - {"--help", "-h", "--version"}):
            assert option in used or f"`{option}" in own, (
                f"`pcmkimg {' '.join(path)} {option}` is neither in its page's text nor in an "
                "example"
            )


def table_codes(text: str, heading: str) -> set[int]:
    """The codes in the first column of the table under a heading."""
    part = text.split(heading, 1)[1]
    part = part.split("\n#", 1)[0]
    codes: set[int] = set()
    for row in re.findall(r"^\| *([0-9][0-9, ]*) *\|", part, flags=re.M):
        codes.update(int(c) for c in re.findall(r"\d+", row))
    return codes


def test_the_exit_codes_are_the_clis() -> None:
    codes = {getattr(cli_module, name) for name in EXIT_NAMES}
    assert set(cli_module.FAMILY_CODES.values()) | set(cli_module.SIGNAL_CODES.values()) <= codes
    main = (ROOT / "packaging" / "man" / "pcmkimg.md").read_text()
    assert table_codes(main, "## EXIT STATUS") == codes
    assert table_codes((ROOT / "README.md").read_text(), "## When it fails") == codes
    every = table_codes((ROOT / "docs" / "troubleshooting.md").read_text(), "## By exit code")
    assert every == codes - {0}
    for page in (ROOT / "packaging" / "man").glob("*.md"):
        text = page.read_text()
        if "## EXIT STATUS" in text:
            assert table_codes(text, "## EXIT STATUS") <= codes, page.name


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def links() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if not re.match(r"[a-z]+:", target):
                found.append((str(path.relative_to(ROOT)), target))
    return found


@pytest.mark.parametrize(("doc", "target"), links())
def test_each_internal_link_resolves(doc: str, target: str) -> None:
    file, _, anchor = target.partition("#")
    path = (ROOT / doc).parent / file if file else ROOT / doc
    assert path.exists(), f"{doc}: {target}: no such file"
    if anchor:
        assert anchor in anchors(path), f"{doc}: {target}: no such heading"


def test_the_slugs_are_githubs() -> None:
    assert slug("Debian 13: `make test-debian13`") == "debian-13-make-test-debian13"
    assert slug("Faults of the node's world") == "faults-of-the-nodes-world"
    assert slug("A release: the canary pattern") == "a-release-the-canary-pattern"


def readme_lines() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    lines = [line for b in blocks for line in b.splitlines() if line.startswith("pcmkimg ")]
    found = []
    for line in lines:
        words = shlex.split(line, comments=True)[1:]
        cut = next((i for i, w in enumerate(words) if w in ENDS), len(words))
        found.append(words[:cut])
    return found


@pytest.mark.parametrize("words", readme_lines(), ids=" ".join)
def test_the_readme_command_lines_parse(words: list[str]) -> None:
    ctx = cli.make_context("pcmkimg", list(words))
    rest = [*ctx._protected_args, *ctx.args]
    cmd: click.Command = cli
    while isinstance(cmd, click.Group):
        name, sub, rest = cmd.resolve_command(ctx, rest)
        assert sub is not None and name is not None
        ctx = sub.make_context(name, rest, parent=ctx)
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        cmd = sub
    assert not ctx.args, f"words the command does not take: {ctx.args}"


def test_the_readme_has_command_lines_to_parse() -> None:
    assert len(readme_lines()) >= 10


def test_the_conf_page_and_the_shipped_file_document_every_section_and_key() -> None:
    """pcmkimg.conf(5) and the example the RPM installs name every section the configuration
    reads, each key of it and its default."""
    from pcmkimg.adapters import config

    keys = {
        "scheme": config._SCHEME_KEYS,
        "ssh": config._SSH_KEYS,
        "lease": ("period",),
        "metrics": ("textfile_dir",),
        "registries": ("tls_verify",),
    }
    page = (ROOT / "packaging" / "man" / "pcmkimg.conf.md").read_text()
    shipped = (ROOT / "packaging" / "pcmkimg.conf").read_text()
    for section in config._SECTIONS:
        assert f"## [{section}]" in page, section
        assert f"\n[{section}]\n" in shipped, section
        for key in keys.get(section, ()):
            assert f"`{key}`" in page, (section, key)
            assert key in shipped.split(f"\n[{section}]\n")[1].split("\n[")[0], (section, key)
    assert f"period = {config.DEFAULT_PERIOD:g}" in shipped


def test_the_by_hand_guard_recipe_uses_the_codes_colocation_score() -> None:
    """The guard's colocation by hand is the score `guard add` writes (INFINITY would stop a
    guarded promotable bundle's inner instances on Pacemaker 3.0)."""
    from pcmkimg.core.cib.read import GUARD_COLOCATION_SCORE

    recipes = [
        line
        for p in DOCS
        for line in p.read_text().splitlines()
        if line.startswith("pcs constraint colocation add") and "guard" in line
    ]
    assert recipes
    for line in recipes:
        assert line.split()[-1] == str(GUARD_COLOCATION_SCORE), line


def test_the_metrics_table_is_the_families_the_code_exports() -> None:
    """docs/monitoring.md's table lists each metric family `pcmkimg metrics` makes, and no
    other (the names as pcmkimg/core/metrics.py builds them: PREFIX + fam's name)."""
    from pcmkimg.core import metrics

    source = (ROOT / "pcmkimg" / "core" / "metrics.py").read_text()
    made = {metrics.PREFIX + n for n in re.findall(r'\bfam\(\s*"([a-z_]+)"', source)}
    table = (ROOT / "docs" / "monitoring.md").read_text().split("| metric | labels | value |")[1]
    listed = set(re.findall(r"^\| `(pcmkimg_[a-z_]+)` \|", table.split("\n\n")[0], flags=re.M))
    assert len(made) >= 15
    assert listed == made
