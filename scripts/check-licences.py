#!/usr/bin/env python3
"""Checks that every package the workspace builds (all of them, not only direct dependencies,
for every target platform, normal, build and dev edges) can be used under a GPLv2-compatible
permissive licence, since the provider is loaded into MariaDB (GPLv2).

The packages come from `cargo tree`, which applies feature resolution. `cargo metadata` also
lists optional dependencies that are locked but never enabled: Cargo.lock keeps the target of a
weak feature such as rustls-webpki's `ring?/alloc` (cargo issue #10801), so `ring` is locked
although nothing compiles it. Those are reported, not judged.

A crate's SPDX `license` expression passes if it allows such a choice: OR is any-of, AND is
all-of, parentheses group, `X WITH exception` counts as X. Unicode-3.0 / Unicode-DFS-2016 pass
only inside an AND with a permissive licence (as in unicode-ident's data tables). Exits non-zero
listing the offenders.
"""
import json
import re
import subprocess
import sys

PERMISSIVE = {
    "MIT", "BSD-2-Clause", "BSD-3-Clause", "ISC", "Zlib", "0BSD", "Unlicense", "CC0-1.0",
}
# Acceptable only next to (AND) a permissive licence, never on their own.
ONLY_WITH_PERMISSIVE = {"Unicode-3.0", "Unicode-DFS-2016"}


def tokenize(expression):
    # Old crates write "MIT/Apache-2.0", which means OR.
    return re.findall(r"\(|\)|[A-Za-z0-9.+-]+", expression.replace("/", " OR "))


class Parser:
    """Recursive descent over: or := and (OR and)*; and := term (AND term)*;
    term := '(' or ')' | id [WITH id]. Each node evaluates to one of
    'ok' (permissive), 'companion' (Unicode: fine next to a permissive one) or 'no'."""

    def __init__(self, tokens):
        self.tokens = tokens
        self.position = 0

    def peek(self):
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self):
        token = self.peek()
        if token is None:
            raise ValueError("unexpected end of expression")
        self.position += 1
        return token

    def parse(self):
        verdict = self.parse_or()
        if self.peek() is not None:
            raise ValueError(f"unexpected {self.peek()!r}")
        return verdict

    def parse_or(self):
        verdicts = [self.parse_and()]
        while self.peek() == "OR":
            self.take()
            verdicts.append(self.parse_and())
        for wanted in ("ok", "companion"):
            if wanted in verdicts:
                return wanted
        return "no"

    def parse_and(self):
        verdicts = [self.parse_term()]
        while self.peek() == "AND":
            self.take()
            verdicts.append(self.parse_term())
        if "no" in verdicts:
            return "no"
        return "ok" if "ok" in verdicts else "companion"

    def parse_term(self):
        token = self.take()
        if token == "(":
            verdict = self.parse_or()
            if self.take() != ")":
                raise ValueError("missing )")
            return verdict
        if token in (")", "AND", "OR", "WITH"):
            raise ValueError(f"unexpected {token!r}")
        if self.peek() == "WITH":
            self.take()
            self.take()
        if token in PERMISSIVE:
            return "ok"
        if token in ONLY_WITH_PERMISSIVE:
            return "companion"
        return "no"


def allowed(expression):
    try:
        return Parser(tokenize(expression)).parse() == "ok"
    except ValueError:
        return False


def self_test():
    cases = {
        "MIT": True,
        "MIT OR Apache-2.0": True,
        "Apache-2.0": False,
        "MPL-2.0": False,
        "Apache-2.0 OR BSL-1.0": False,
        "(MIT OR Apache-2.0) AND Unicode-3.0": True,
        "Unicode-3.0": False,
        "Apache-2.0 AND Unicode-3.0": False,
        "Apache-2.0 WITH LLVM-exception OR Apache-2.0 OR MIT": True,
        "MIT/Apache-2.0": True,
        "MIT AND (": False,
    }
    for expression, expected in cases.items():
        assert allowed(expression) == expected, expression


def cargo(*args):
    return subprocess.run(["cargo", *args], check=True, capture_output=True, text=True).stdout


def built_packages():
    """(name version, licence) of every package some build of the workspace compiles."""
    lines = cargo(
        "tree", "--workspace", "--target", "all", "--edges", "normal,build,dev",
        "--prefix", "none", "--format", "{p}|{l}",
    ).splitlines()
    packages = {}
    for line in lines:
        line = line.strip().removesuffix("(*)").strip()
        if not line:
            continue
        package, _, licence = line.partition("|")
        # Workspace members print their path: "name vX (/path)".
        name_version = " ".join(package.split()[:2])
        packages[name_version] = licence.strip()
    return packages


def main():
    self_test()
    packages = built_packages()
    metadata = json.loads(cargo("metadata", "--format-version", "1"))
    locked_only = sorted(
        f"{p['name']} {p['version']} ({p.get('license')})"
        for p in metadata["packages"]
        if f"{p['name']} v{p['version']}" not in packages
    )
    offenders = []
    for name_version, expression in sorted(packages.items()):
        if not expression:
            offenders.append(f"{name_version}: no SPDX licence")
        elif not allowed(expression):
            offenders.append(f"{name_version}: {expression}")
    if offenders:
        print("licences not allowed (need MIT/BSD/ISC/Zlib or similar, possibly as one choice):")
        for offender in offenders:
            print(f"  {offender}")
        return 1
    print(f"licences: all {len(packages)} packages built for any target allowed")
    if locked_only:
        print(f"locked in Cargo.lock but never built (not judged): {', '.join(locked_only)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
