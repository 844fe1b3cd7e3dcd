#!/usr/bin/env python3
"""Validates the reports of `nnlab check --junit FILE --json FILE` (tests/test_check_cli.cpp).

    python3 tests/validate_check_report.py --junit F --json F --tests N --failures K [--names a,b]

JUnit: the file must parse as XML (python's xml module, as the tools that import it would),
with one <testsuite> root whose tests/failures/errors counts agree with its <testcase>s, one
<testcase> per exercise (name, classname, time), and for each failed exercise a <failure>
with a non-empty message attribute and the output as its text. JSON: it must parse, and its
score and exercise entries must agree with the same counts. Prints what is wrong and exits
1, or prints "ok" and exits 0.
"""
import argparse
import json
import sys
import xml.etree.ElementTree as ET


def check_junit(path, tests, failures, names, problems):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        problems.append(f"{path}: not well-formed XML: {e}")
        return
    if root.tag != "testsuite":
        problems.append(f"{path}: the root is <{root.tag}>, expected one <testsuite>")
        return
    cases = root.findall("testcase")
    if len(cases) != tests:
        problems.append(f"{path}: {len(cases)} <testcase>, expected {tests}")
    for attr, want in (("tests", len(cases)), ("failures", failures), ("errors", 0)):
        if root.get(attr) != str(want):
            problems.append(f"{path}: <testsuite {attr}=\"{root.get(attr)}\">, expected {want}")
    failed = 0
    for case in cases:
        for attr in ("name", "classname", "time"):
            if not case.get(attr):
                problems.append(f"{path}: a <testcase> without {attr}")
        try:
            float(case.get("time", "x"))
        except ValueError:
            problems.append(f"{path}: testcase {case.get('name')}: time is not a number")
        f = case.findall("failure")
        if len(f) > 1:
            problems.append(f"{path}: testcase {case.get('name')}: {len(f)} <failure>, at most 1")
        if f:
            failed += 1
            if not f[0].get("message"):
                problems.append(f"{path}: testcase {case.get('name')}: <failure> has no message")
            if not (f[0].text or "").strip():
                problems.append(f"{path}: testcase {case.get('name')}: <failure> has no output")
    if failed != failures:
        problems.append(f"{path}: {failed} testcases with a <failure>, expected {failures}")
    got_names = [c.get("name") for c in cases]
    if names and got_names != names:
        problems.append(f"{path}: testcases {got_names}, expected {names}")


def check_json(path, tests, failures, names, problems):
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        problems.append(f"{path}: not JSON: {e}")
        return
    score = report.get("score", {})
    if score.get("total") != tests or score.get("passed") != tests - failures:
        problems.append(f"{path}: score {score}, expected {tests - failures}/{tests}")
    entries = report.get("exercises", [])
    if len(entries) != tests:
        problems.append(f"{path}: {len(entries)} exercises, expected {tests}")
    for e in entries:
        for key in ("name", "lesson", "file", "status", "time_s", "failing_tests", "points"):
            if key not in e:
                problems.append(f"{path}: exercise {e.get('name')}: no '{key}'")
        passed = e.get("status") == "passed"
        if e.get("passed") != passed:
            problems.append(f"{path}: exercise {e.get('name')}: 'passed' disagrees with 'status'")
        if e.get("status") == "fails tests" and not e.get("failing_tests"):
            problems.append(f"{path}: exercise {e.get('name')} fails tests but names none")
        seen = [t.get("name") for t in e.get("failing_tests", [])]
        if len(seen) != len(set(seen)):
            problems.append(f"{path}: exercise {e.get('name')}: a failing test named twice: {seen}")
    if names and [e.get("name") for e in entries] != names:
        problems.append(f"{path}: exercises {[e.get('name') for e in entries]}, expected {names}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--junit")
    ap.add_argument("--json")
    ap.add_argument("--tests", type=int, required=True)
    ap.add_argument("--failures", type=int, required=True)
    ap.add_argument("--names", default="")
    args = ap.parse_args()
    names = [n for n in args.names.split(",") if n]
    problems = []
    if args.junit:
        check_junit(args.junit, args.tests, args.failures, names, problems)
    if args.json:
        check_json(args.json, args.tests, args.failures, names, problems)
    for p in problems:
        print(p)
    if not problems:
        print("ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
