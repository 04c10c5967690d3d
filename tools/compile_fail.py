#!/usr/bin/env python3
"""Compile-fail cases checked together (tests/compile_fail/CMakeLists.txt).

Each case alone paid about 10 s for <weft/dsl.hpp>; compiled together, each in a namespace
of its own, they pay it once. The compiler's output is then split into one block per
error: the instantiation context printed before it (g++) and the notes printed after it
(clang). A case passes when one block both names the case's file and matches its pattern,
so a case cannot pass on another case's error; its twin (compiled without the error)
shows that nothing else in the file fails.

  compile_fail.py run LOG -- COMPILER ARGS...   writes the output to LOG (atomically);
                                                exits 0 when the compiler failed, 1 when it
                                                compiled (no case failed)
  compile_fail.py check LOG FILE PATTERN        exits 0 when an error's block names FILE
                                                and matches PATTERN (Python re, DOTALL)
  compile_fail.py self-test                     checks the splitting on g++'s and clang's
                                                output
"""
import os
import re
import subprocess
import sys
import tempfile

# Lines that open the context of the next error rather than continue the last one.
CONTEXT = re.compile(r'^(In file included from |\s+from .*[,:]$|[^ ].*: (In instantiation of|In function|'
                     r'In member function|In static member function|In lambda function|In substitution of|'
                     r'In constructor|In destructor|At global scope)|[^ ].*:\d+:\d+:\s+required (from|by) )')
ERROR = re.compile(r'(^|: )(fatal )?error: ')


def blocks(text):
    """One string per error: its context before it and its notes after it."""
    lines = text.splitlines()
    errors = [i for i, line in enumerate(lines) if ERROR.search(line)]
    starts = []
    previous = -1
    for e in errors:
        s = e
        for i in range(previous + 1, e):
            if CONTEXT.match(lines[i]):
                s = i
                break
        starts.append(s)
        previous = e
    out = []
    for k, s in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        out.append('\n'.join(lines[s:end]))
    return out


def matches(text, path, pattern):
    regex = re.compile(pattern, re.DOTALL)
    return any(path in b and regex.search(b) for b in blocks(text))


def run(log, command):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    directory = os.path.dirname(os.path.abspath(log))
    with tempfile.NamedTemporaryFile('w', dir=directory, delete=False) as f:
        f.write(result.stdout)
        temporary = f.name
    os.replace(temporary, log)
    errors = len(blocks(result.stdout))
    print(f'{" ".join(command)}\nexit status {result.returncode}, {errors} errors; output in {log}')
    if result.returncode == 0:
        print('compile_fail.py: the cases compiled, so none of them failed as it should')
        return 1
    return 0


def check(log, path, pattern):
    with open(log, encoding='utf-8', errors='replace') as f:
        text = f.read()
    if matches(text, path, pattern):
        print(f'{path}: an error matches {pattern!r}')
        return 0
    print(f'{path}: no error whose context names this file matches {pattern!r}; the errors naming it:')
    for b in blocks(text):
        if path in b:
            print(b)
    return 1


GXX = """In file included from include/weft/dsl.hpp:14,
                 from batch.cpp:2:
include/weft/dsl/checks.hpp: In instantiation of 'struct weft::check::matmul_inner_dims<784, 256, false>':
include/weft/dsl/ops.hpp:421:47:   required from 'auto weft::matmul(const A&, const B&)'
cases/a.cpp:13:24:   required from here
include/weft/dsl/checks.hpp:19:21: error: static assertion failed: weft::matmul: inner dimensions differ
   19 |     static_assert(A == B, MESSAGE);
      |                   ~~^~~~
include/weft/dsl/checks.hpp:19:21: note: the comparison reduces to '(784 == 256)'
include/weft/dsl/checks.hpp: In instantiation of 'struct weft::check::add_broadcast<4, 5>':
cases/b.cpp:9:24:   required from here
include/weft/dsl/checks.hpp:19:21: error: static assertion failed: weft::add: operand shapes cannot be broadcast
"""
CLANG = """In file included from batch.cpp:2:
include/weft/dsl/checks.hpp:51:1: error: static_assert failed due to requirement '784L == 256L' "weft::matmul: inner dimensions differ"
WEFT_DETAIL_DIM_CHECK(matmul_inner_dims, "weft::matmul: inner dimensions differ");
^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
include/weft/dsl/ops.hpp:421:16: note: in instantiation of template class 'weft::check::matmul_inner_dims<784, 256, false>' requested here
cases/a.cpp:13:18: note: in instantiation of function template specialization 'weft::matmul<...>' requested here
include/weft/dsl/checks.hpp:52:1: error: static_assert failed due to requirement '4L == 5L' "weft::add: operand shapes cannot be broadcast"
include/weft/dsl/ops.hpp:300:16: note: in instantiation of template class 'weft::check::add_broadcast<4, 5>' requested here
cases/b.cpp:9:18: note: in instantiation of function template specialization 'weft::add<...>' requested here
2 errors generated.
"""


def self_test():
    failures = []
    for name, text in (('g++', GXX), ('clang', CLANG)):
        if len(blocks(text)) != 2:
            failures.append(f'{name}: {len(blocks(text))} blocks, expected 2')
        expected = {('cases/a.cpp', r'inner dimensions differ.*matmul_inner_dims<784, 256|matmul_inner_dims<784, 256.*inner dimensions differ'): True,
                    ('cases/b.cpp', r'add_broadcast<4, 5'): True,
                    ('cases/b.cpp', r'inner dimensions differ'): False,  # a's error is not b's
                    ('cases/a.cpp', r'add_broadcast<4, 5'): False,
                    ('cases/c.cpp', r'error'): False}
        for (path, pattern), want in expected.items():
            if matches(text, path, pattern) != want:
                failures.append(f'{name}: {path} against {pattern!r} gave {not want}, expected {want}')
    for f in failures:
        print(f)
    print('compile_fail.py self-test:', 'failed' if failures else 'passed')
    return 1 if failures else 0


def main(argv):
    if len(argv) >= 4 and argv[0] == 'run' and argv[2] == '--':
        return run(argv[1], argv[3:])
    if len(argv) == 4 and argv[0] == 'check':
        return check(argv[1], argv[2], argv[3])
    if argv == ['self-test']:
        return self_test()
    print(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
