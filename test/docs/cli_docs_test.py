#!/usr/bin/env python3
"""docs/cli.md documents every command and flag the binary's --help lists
(ctest docs_cli).

  cli_docs_test.py ACTOR_WORKER_BINARY SOURCE_DIR

Walks `actor-worker --help` and each (sub)command's `--help` (CLI11's
"Options:" and "Subcommands:" sections). Every command path must have an
entry in the usage block at the top of docs/cli.md (a line starting with
it; `a|b` alternatives count for each), every flag of a command must be
in one of that command's entries (the line and its indented
continuation lines), and every global option must be on the page.
"""
import re
import subprocess
import sys

BIN, SRC = sys.argv[1], sys.argv[2]
failures = []


def help_of(path):
    out = subprocess.run([BIN, *path, "--help"], capture_output=True, text=True,
                         timeout=60)
    if out.returncode != 0:
        failures.append(f"`actor-worker {' '.join(path)} --help` exited {out.returncode}: "
                        f"{out.stderr.strip()}")
    return out.stdout


def sections(text):
    """{'Options': [lines], 'Subcommands': [lines], ...} of a CLI11 help."""
    result, current = {}, None
    for line in text.split("\n"):
        m = re.match(r"^([A-Z][\w ]*):\s*$", line)
        if m:
            current = m.group(1)
            result[current] = []
        elif current and line.startswith("  ") and line.strip():
            result[current].append(line)
    return result


def option_lines(sections_):
    """The lines of every options section ("Options", "Global options")."""
    return [l for name, lines in sections_.items() if name.endswith("ptions")
            for l in lines]


def flags_of(lines):
    flags = set()
    for line in lines:
        first = line.strip().split()[0]
        for name in first.split(","):
            if name.startswith("--") and name != "--help":
                flags.add(name)
    return flags


def commands_of(lines):
    # A command's line starts two spaces in; a wrapped description is
    # indented further.
    return [line.split()[0] for line in lines if re.match(r"^  \S", line)]


page = open(f"{SRC}/docs/cli.md").read()
usage = re.search(r"```\n(actor-worker .*?)```", page, re.S)
if not usage:
    print("docs/cli.md: no usage block (```actor-worker ...```) at the top")
    sys.exit(1)
# Entries: a line at column 0 and its indented continuation lines.
entries = []
for line in usage.group(1).split("\n")[1:]:
    if line and not line[0].isspace():
        entries.append(line)
    elif entries:
        entries[-1] += "\n" + line


def entries_of(path):
    found = []
    for e in entries:
        words = e.split()
        if len(words) >= len(path) and all(
                p in w.split("|") for p, w in zip(path, words)):
            found.append(e)
    return found


root = sections(help_of([]))
global_flags = flags_of(option_lines(root))
for flag in sorted(global_flags):
    if not re.search(re.escape(flag) + r"\b", page):
        failures.append(f"docs/cli.md: the global option {flag} is not on the page")

todo = [[c] for c in commands_of(root.get("Subcommands", []))]
if not todo:
    failures.append("`actor-worker --help` lists no commands: the parser is out of date")
seen = 0
while todo:
    path = todo.pop(0)
    seen += 1
    h = sections(help_of(path))
    subs = commands_of(h.get("Subcommands", []))
    todo += [path + [s] for s in subs]
    mine = entries_of(path)
    name = " ".join(path)
    if not mine:
        failures.append(f"docs/cli.md: command '{name}' has no entry in the usage block")
        continue
    text = "\n".join(mine)
    for flag in sorted(flags_of(option_lines(h)) - global_flags):
        if not re.search(re.escape(flag) + r"(?![\w-])", text):
            failures.append(f"docs/cli.md: flag {flag} of '{name}' is not in its usage entry")

if not global_flags:
    failures.append("`actor-worker --help` lists no options: the parser is out of date")
if failures:
    print("\n".join(failures))
    print(f"docs_cli: {len(failures)} problem(s)")
    sys.exit(1)
print(f"docs_cli: {seen} commands and their flags documented, {len(global_flags)} global options")
