#!/usr/bin/env python3
"""Checks the prebuilt library code of include/weft (core/prebuilt.hpp, docs/installing.md).

A function compiled once (WEFT_PREBUILT_RUNTIME) is declared where the header declares it and
defined as `WEFT_DETAIL_RUNTIME_INLINE ...` between `#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY`
and its `#endif`. A definition outside such a block would be `inline` in the files that only
declare it and non-inline in the file that compiles it: an ODR violation the linker does not
report. So this script checks that:
  - every WEFT_DETAIL_RUNTIME_INLINE stands inside such a block (not in its #else);
  - every header that uses it includes <weft/core/prebuilt.hpp>;
  - the file that compiles the library code (tests/support/runtime.cpp) includes, directly or
    through other headers, every header that defines prebuilt functions; else programs built
    with WEFT_PREBUILT_RUNTIME would fail to link the ones it misses.

  check_prebuilt.py [ROOT]     check ROOT (default: this checkout; exit 1 on a finding)
  check_prebuilt.py --self-test
"""
import pathlib
import re
import sys

MACRO = 'WEFT_DETAIL_RUNTIME_INLINE'
GUARD = re.compile(r'^\s*#\s*ifndef\s+WEFT_DETAIL_RUNTIME_DECLARED_ONLY\b')
OPEN = re.compile(r'^\s*#\s*if')
ELSE = re.compile(r'^\s*#\s*(else|elif)')
END = re.compile(r'^\s*#\s*endif')
INCLUDE = re.compile(r'^\s*#\s*include\s*<(weft/[^>]+)>')


def outside_blocks(text):
    """The numbers and text of the lines that use the macro outside a guarded block."""
    stack = []  # per open #if: whether it is the guard, and not in its #else part
    for number, line in enumerate(text.splitlines(), 1):
        if GUARD.match(line):
            stack.append(True)
        elif OPEN.match(line):
            stack.append(False)
        elif ELSE.match(line):
            if stack:
                stack[-1] = False
        elif END.match(line):
            if stack:
                stack.pop()
        elif MACRO in line.split('//', 1)[0] and not any(stack):
            yield number, line.strip()


def includes_of(text):
    return [m.group(1) for m in map(INCLUDE.match, text.splitlines()) if m]


def reachable(include_dir, roots):
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen or not (include_dir / name).is_file():
            continue
        seen.add(name)
        todo.extend(includes_of((include_dir / name).read_text()))
    return seen


def self_test():
    good = '\n'.join(['int f();', '#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY', '#if X', '#endif',
                      'WEFT_DETAIL_RUNTIME_INLINE int f() { return 1; }', '#endif'])
    outside = '\n'.join(['int f();', 'WEFT_DETAIL_RUNTIME_INLINE int f() { return 1; }'])
    in_else = '\n'.join(['#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY', '#else',
                         'WEFT_DETAIL_RUNTIME_INLINE int f() { return 1; }', '#endif'])
    after = '\n'.join(['#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY', '#endif', 'WEFT_DETAIL_RUNTIME_INLINE int g();'])
    ok = (not list(outside_blocks(good)) and list(outside_blocks(outside)) and list(outside_blocks(in_else)) and
          list(outside_blocks(after)) and includes_of('#include <weft/core/prebuilt.hpp>\n#include <vector>') ==
          ['weft/core/prebuilt.hpp'])
    print('self-test', 'passed' if ok else 'FAILED')
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    include_dir = root / 'include'
    implementation = root / 'tests' / 'support' / 'runtime.cpp'
    compiled = reachable(include_dir, includes_of(implementation.read_text()))
    bad = 0
    for path in sorted((include_dir / 'weft').rglob('*.hpp')):
        name = path.relative_to(include_dir).as_posix()
        if name == 'weft/core/prebuilt.hpp':
            continue
        text = path.read_text()
        if MACRO not in text:
            continue
        for number, line in outside_blocks(text):
            print(f'{name}:{number}: {MACRO} outside "#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY": {line}')
            bad += 1
        if 'weft/core/prebuilt.hpp' not in includes_of(text):
            print(f'{name}: uses {MACRO} without including <weft/core/prebuilt.hpp>')
            bad += 1
        if name not in compiled:
            print(f'{name}: defines prebuilt functions, but {implementation.relative_to(root)} does not include it')
            bad += 1
    print(f'check_prebuilt: {bad} finding(s)')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
