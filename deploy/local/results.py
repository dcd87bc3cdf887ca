#!/usr/bin/env python3
"""Reads the Swift Testing results file `swift test --xunit-output X.xml` writes (X-swift-testing.xml).

    results.py failed FILE          prints a --filter pattern per failed test, one per line
    results.py passed FILE NAME...  exits 0 only if each NAME (as `failed` printed it) ran and passed

deploy/local/test.sh uses both to re-run a few failed tests alone and to check that the re-run ran
them: a filter that matches nothing makes a run of 0 tests, which passes.
"""
import re
import sys
import xml.etree.ElementTree as tree


def cases(path):
    """(pattern, failed) per test case; a parameterized test is one case per argument, same name."""
    root = tree.parse(path).getroot()
    for case in root.iter("testcase"):
        suite = case.get("classname", "").split(".")[-1]
        # A test's ID is Module[.Outer].Suite/name()/File.swift:line:column; the pattern matches
        # that suite and name only (not a suite whose name ends the same).
        pattern = "[./]" + re.escape(suite + "/" + case.get("name", ""))
        failed = case.find("failure") is not None or case.find("error") is not None
        yield pattern, failed


def main(argv):
    if len(argv) < 3 or argv[1] not in ("failed", "passed"):
        sys.exit(__doc__)
    try:
        found = list(cases(argv[2]))
    except (OSError, tree.ParseError) as error:
        sys.exit(f"results.py: cannot read {argv[2]}: {error}")
    if argv[1] == "failed":
        print("\n".join(sorted({pattern for pattern, failed in found if failed})))
        return
    outcome = {}
    for pattern, failed in found:
        outcome[pattern] = outcome.get(pattern, False) or failed
    missing = [name for name in argv[3:] if name not in outcome]
    again = [name for name in argv[3:] if outcome.get(name)]
    for name in missing:
        print(f"results.py: {name} did not run", file=sys.stderr)
    for name in again:
        print(f"results.py: {name} failed again", file=sys.stderr)
    sys.exit(1 if missing or again else 0)


if __name__ == "__main__":
    main(sys.argv)
