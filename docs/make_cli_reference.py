#!/usr/bin/python3
"""Writes docs/cli.md, the command-line reference, from the `--help` of an xtrap binary.

    /usr/bin/python3 docs/make_cli_reference.py build/xtrap           rewrite docs/cli.md
    /usr/bin/python3 docs/make_cli_reference.py --check build/xtrap   exit 1 if docs/cli.md differs

The commands are those `xtrap --help` lists, in its order; each gets its `--help` verbatim, so the
page says exactly what the binary says (ctest `cli_reference` runs --check). Standard library only.
"""
import os
import re
import subprocess
import sys

DOCS = os.path.dirname(os.path.abspath(__file__))
PAGE = os.path.join(DOCS, "cli.md")
SOURCE = os.path.dirname(DOCS)


def help_text(xtrap, *command):
    """The --help of xtrap or of one of its commands, as the binary prints it."""
    done = subprocess.run([xtrap, *command, "--help"], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "100"})
    if done.returncode != 0:
        sys.exit(f"{xtrap} {' '.join(command)} --help exited {done.returncode}: {done.stderr.strip()}")
    # CLI11 names the program as it was invoked; the page names it as a user types it.
    text = re.sub(r"^Usage: " + re.escape(xtrap) + r"\b", "Usage: xtrap", done.stdout, flags=re.M)
    # Defaults such as the shipped data directory are absolute paths into the checkout the binary
    # was built from; the page names them relative to the checkout so it reads the same in any clone.
    for source in {SOURCE, os.path.realpath(SOURCE)}:
        text = text.replace(source + os.sep, "<checkout>/")
    return text.rstrip() + "\n"


def commands(top_help):
    """The command names under the SUBCOMMANDS heading of `xtrap --help`, in their order."""
    names, inside = [], False
    for line in top_help.splitlines():
        if re.match(r"^\s*subcommands:?\s*$", line, re.I):
            inside = True
            continue
        if inside:
            m = re.match(r"^\s+([a-z][\w-]*)\b", line)
            if m:
                names.append(m.group(1))
            elif line.strip():
                break
    if not names:
        sys.exit("no commands found in `xtrap --help` (expected a 'Subcommands:' list)")
    return names


def page(xtrap):
    top = help_text(xtrap)
    out = ["# Command-line reference\n",
           "Generated from `xtrap --help` and each command's `--help` by `docs/make_cli_reference.py`;",
           "do not edit by hand (ctest `cli_reference` fails when this page differs from the binary's",
           "help). Every option shows its default; an option that cannot apply to what was asked stops",
           "the command with a one-line error.\n",
           "```", top.rstrip(), "```\n"]
    for name in commands(top):
        out += [f"## xtrap {name}\n", "```", help_text(xtrap, name).rstrip(), "```\n"]
    return "\n".join(out)


def main():
    args = sys.argv[1:]
    check = bool(args) and args[0] == "--check"
    if check:
        args = args[1:]
    if len(args) != 1:
        sys.exit("usage: make_cli_reference.py [--check] PATH/TO/xtrap")
    text = page(args[0])
    if check:
        with open(PAGE) as f:
            if f.read() != text:
                sys.exit("docs/cli.md is out of date with xtrap's --help; run /usr/bin/python3 "
                         "docs/make_cli_reference.py build/xtrap")
        print("docs/cli.md is up to date")
        return
    with open(PAGE, "w") as f:
        f.write(text)
    print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
