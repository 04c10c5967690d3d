#!/usr/bin/env python3
"""Checks the names of the Catch2 test cases under tests/.

catch_discover_tests registers each test case with CTest under its name, and CMake splits a
name at every ';' (a list separator): the case then runs as two names that match no test,
and CTest reports both as failed ("No test cases matched"). So no TEST_CASE name may hold a
';'. (Sessions 50 and 51 each lost a full CI run to one.)

  check_test_names.py [ROOT]     check ROOT (default: this checkout; exit 1 on a finding)
  check_test_names.py --self-test
"""
import pathlib
import re
import sys

NAME = re.compile(r'\b(?:TEST_CASE|TEMPLATE_TEST_CASE|SCENARIO)\s*\(\s*"((?:[^"\\]|\\.)*)"')


def findings(text):
    """(line, name) of each test case whose name holds a ';'."""
    out = []
    for match in NAME.finditer(text):
        if ';' in match.group(1):
            out.append((text.count('\n', 0, match.start()) + 1, match.group(1)))
    return out


def self_test():
    good = 'TEST_CASE("a, b and c") {}\nTEST_CASE("x: \\"quoted\\"", "[tag]") {}\n'
    bad = 'int x;\nTEST_CASE("one; two") {}\n  TEMPLATE_TEST_CASE( "t;", "", int) {}\n'
    assert findings(good) == [], findings(good)
    assert findings(bad) == [(2, 'one; two'), (3, 't;')], findings(bad)
    print('check_test_names: self-test passed')
    return 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    count = 0
    for path in sorted((root / 'tests').rglob('*.cpp')):
        for line, name in findings(path.read_text(encoding='utf-8')):
            print(f'{path.relative_to(root)}:{line}: test case name holds a ";" (CTest would split it): "{name}"')
            count += 1
    print(f'check_test_names: {count} finding(s)')
    return 1 if count else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
