# SPDX-License-Identifier: Apache-2.0
"""What the Python cluster checks share: a failed expectation, the `dtrain: ok:` lines, and a
main that runs one named check (imported, not run; tests/check adds this folder to sys.path).

Bash scripts drive srun and the cluster; these checks read what they captured.
"""
import argparse
import os
import re
import sys


class CheckFailed(Exception):
    pass


def expect(cond, message):
    if not cond:
        raise CheckFailed(message)


def expect_equal(what, actual, expected):
    expect(actual == expected, f"{what} is {actual!r}, expected {expected!r}")
    print(f"dtrain: ok: {what} = {actual}")


def expect_line(what, pattern, text):
    """Some line of text matches the regular expression pattern (^ and $ match at every line's
    start and end, as grep's do)."""
    found = re.search(pattern, text, re.MULTILINE)
    expect(found, f"{what}: no line matches /{pattern}/ in:\n{text}")
    line_start = text.rfind("\n", 0, found.start()) + 1
    print(f"dtrain: ok: {what}: {text[line_start:].splitlines()[0][:160]}")


def node_address(node):
    """The address of a node of the local cluster, from DTRAIN_CLUSTER_NODE_ADDRESSES (env.sh)."""
    entries = os.environ.get("DTRAIN_CLUSTER_NODE_ADDRESSES", "")
    addresses = dict(entry.split("=", 1) for entry in entries.split() if "=" in entry)
    expect(node in addresses, f"no address for {node} in DTRAIN_CLUSTER_NODE_ADDRESSES={entries!r}; "
           "source the cluster's env.sh")
    return addresses[node]


def read_text(path):
    with open(path) as f:
        return f.read()


def run_check(parser, show_on_failure=lambda args: ""):
    """Parses the command line of parser (its subcommands set `check`), runs the check and exits
    1 with `dtrain: check failed: ...` when an expectation does not hold."""
    args = parser.parse_args()
    try:
        args.check(args)
    except CheckFailed as failure:
        print(f"dtrain: check failed: {failure}{show_on_failure(args)}", file=sys.stderr)
        sys.exit(1)


class Parser(argparse.ArgumentParser):
    """argparse with dtrain's error line and exit status 2."""

    def error(self, message):
        self.exit(2, f"dtrain: {self.prog}: {message}; see --help\n")


def new_parser(description):
    """A command line of named checks (subcommands), each with its --help; add them with
    add_check."""
    parser = Parser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser, parser.add_subparsers(required=True, metavar="CHECK")


def arg(*flags, **options):
    """One argument of add_check, as argparse's add_argument takes it."""
    return flags, options


def add_check(checks, name, function, summary, *arguments, **defaults):
    """The check `name` runs function(args) on its arguments (made with arg())."""
    check = checks.add_parser(name, help=summary, description=summary)
    for flags, options in arguments:
        check.add_argument(*flags, **options)
    check.set_defaults(check=function, **defaults)
