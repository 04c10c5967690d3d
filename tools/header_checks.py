#!/usr/bin/env python3
"""Plans the per-header checks (tests/CMakeLists.txt): each public header compiles
alone, and with clang a check may start from a hub's precompiled header.

Parsed from scratch, a check pays for the header's whole include closure (weft's own
headers, Eigen, Hana, the standard library): 126 checks took 559 s of CPU on a 2-core CI
machine, mostly for the same few headers again. A few hubs (headers much of weft includes:
core/tensor.hpp, runtime/kernel.hpp, ...) have their check build a precompiled header (PCH)
from scratch instead of only parsing; a header Y that includes a hub P without condition
(directly or through others) is checked with P's PCH loaded first (clang's -include-pch),
so P's closure is read instead of parsed, and the rest of Y's closure and Y are parsed as
before. (Hubs' PCHs are not chained on one another: clang 14 crashed reading chained PCHs.)
The hubs' PCHs are built with -fpch-instantiate-templates (tests/CMakeLists.txt): P's
pending template instantiations are done once, where P ends, instead of again at the end of
every check that loads it (loading runtime/kernel.hpp's PCH: 1.38 s of CPU without, 0.12 s
with).

That check is as strong as compiling Y alone: the headers seen by the end of Y are the same
set (P's closure is part of Y's, and P was shown to compile alone), only their order differs
(P's closure first). Order matters to a header only through macros, so P is not Y's parent
when a header of Y's closure outside P's defines a macro that a header of P's closure tests,
or defines a macro not of weft's own (EIGEN_USE_THREADS before Eigen's Tensor module); only
includes outside any #if count. Of the hubs that qualify, the one with the largest closure
is the parent. A missing include of the standard library or Eigen in Y is caught unless P's
closure has it, as it is when Y is compiled alone (Y's closure then has it too).

    header_checks.py plan INCLUDE_DIR OUT_CMAKE [--hub=HEADER]... HEADER...
        writes WEFT_HEADER_CHECK_PLAN to OUT_CMAKE: for each HEADER (a path under INCLUDE_DIR,
        like weft/core/tensor.hpp), in the order given, three entries: the header, its parent
        (the hub whose PCH its check loads, or "-"), and 1 if it is a hub some check loads
        (its check builds the PCH), else 0. A hub that is not a HEADER is ignored.
    header_checks.py verify INCLUDE_DIR PLAN_CMAKE [--hub=HEADER]... HEADER...
        plans again and exits 1, naming the headers whose plan changed, when PLAN_CMAKE is
        not that plan (a header's includes changed since CMake configured: the checks would
        load a PCH the header may no longer include; CMake's configure plans again).
    header_checks.py --self-test
"""
import contextlib
import io
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*<(weft/[^>]+)>')
CONDITIONAL_OPEN = re.compile(r'^\s*#\s*if(n?def)?\b')
CONDITIONAL_CLOSE = re.compile(r'^\s*#\s*endif\b')
DEFINE = re.compile(r'^\s*#\s*define\s+([A-Za-z_][A-Za-z_0-9]*)')
TESTED = re.compile(r'^\s*#\s*(?:el)?if(?:n?def)?\b(.*)')
IDENTIFIER = re.compile(r'[A-Za-z_][A-Za-z_0-9]*')


class Header:
    """What the plan needs to know of one header: its weft includes, its macros."""

    def __init__(self, text):
        self.includes = []  # every weft include, in order
        self.unconditional = []  # those outside any #if
        self.defines = set()
        self.tested = set()  # identifiers in #if / #ifdef / #elif lines
        depth = 0
        for line in text.splitlines():
            if CONDITIONAL_OPEN.match(line):
                depth += 1
            elif CONDITIONAL_CLOSE.match(line):
                depth = max(depth - 1, 0)
            match = TESTED.match(line)
            if match:
                self.tested.update(IDENTIFIER.findall(match.group(1)))
            match = INCLUDE.match(line)
            if match:
                self.includes.append(match.group(1))
                if depth == 0:
                    self.unconditional.append(match.group(1))
            match = DEFINE.match(line)
            if match:
                self.defines.add(match.group(1))


def load(include_dir, names):
    """Reads every weft header reachable from names; returns {name: Header}."""
    headers = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in headers:
            continue
        path = os.path.join(include_dir, name)
        if not os.path.isfile(path):
            headers[name] = Header('')  # not weft's (or generated): nothing to follow
            continue
        with open(path, encoding='utf-8') as f:
            headers[name] = Header(f.read())
        todo.extend(headers[name].includes)
    return headers


def closure(headers, name, unconditional_only):
    """The header and every weft header it includes, transitively."""
    seen = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        header = headers[current]
        todo.extend(header.unconditional if unconditional_only else header.includes)
    return seen


def parent_is_safe(headers, child, parent):
    """True when child's check can start from parent's PCH (see the module's comment)."""
    inside = closure(headers, parent, False)
    tested = set()
    for name in inside:
        tested |= headers[name].tested
    for name in closure(headers, child, False) - closure(headers, parent, True):
        for macro in headers[name].defines:
            if not macro.startswith('WEFT_') or macro in tested:
                return False
    return True


def plan(include_dir, names, hubs):
    """[(header, parent or None, builds_pch)] for names, in their order: each header's parent
    is the largest of hubs that it includes without condition and that is safe (a hub's
    own check builds its PCH from scratch: clang 14 crashed reading chained PCHs)."""
    headers = load(include_dir, names + list(hubs))
    hubs = {h for h in hubs if h in names}
    size = {hub: len(closure(headers, hub, False)) for hub in hubs}
    parents = {}
    for name in names:
        if name in hubs:
            continue
        candidates = sorted(closure(headers, name, True) & hubs, key=lambda p: (-size[p], p))
        parents[name] = next((p for p in candidates if parent_is_safe(headers, name, p)), None)
    used = {p for p in parents.values() if p}
    return [(name, parents.get(name), name in used) for name in names]


def plan_text(entries):
    lines = ['# Generated by tools/header_checks.py: header, parent ("-": none), builds a PCH.',
             'set(WEFT_HEADER_CHECK_PLAN']
    for name, parent, builds in entries:
        lines.append(f'  {name} {parent or "-"} {int(builds)}')
    lines.append(')')
    return '\n'.join(lines) + '\n'


def read(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding='utf-8') as f:
        return f.read()


def write_plan(entries, out):
    text = plan_text(entries)
    if read(out) != text:  # unchanged: leave the file (and what depends on it) alone
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, 'w', encoding='utf-8') as f:
            f.write(text)


def verify(entries, path):
    """0 when the plan at path is entries' plan; else 1, naming the lines that differ."""
    want = plan_text(entries).splitlines()
    have = (read(path) or '').splitlines()
    if want == have:
        print(f'header_checks.py: {path} is current ({len(entries)} headers)')
        return 0
    print(f'header_checks.py: {path} is stale: a header\'s includes changed since CMake configured; '
          'reconfigure (cmake <build dir>) to plan again. Differing lines, as planned now and as configured:')
    for line in sorted(set(want) ^ set(have)):
        print(('  now:        ' if line in want else '  configured: ') + line.strip())
    return 1


def self_test():
    files = {
        'weft/a.hpp': '#pragma once\n#include <vector>\n',
        'weft/b.hpp': '#pragma once\n#include <weft/a.hpp>\n',
        'weft/c.hpp': '#pragma once\n#include <weft/b.hpp>\n#include <weft/d.hpp>\n',
        'weft/d.hpp': '#pragma once\n#include <weft/a.hpp>\n',
        # e includes b only under a condition: not a parent.
        'weft/e.hpp': '#pragma once\n#if X\n#include <weft/b.hpp>\n#endif\n#include <weft/a.hpp>\n',
        # f defines a macro that g tests: g's PCH is no parent of f's check.
        'weft/f.hpp': '#pragma once\n#define WEFT_F 1\n#include <weft/g.hpp>\n',
        'weft/g.hpp': '#pragma once\n#include <weft/a.hpp>\n#ifdef WEFT_F\n#endif\n',
        # h defines a macro not weft's own before an include: no parent.
        'weft/h.hpp': '#pragma once\n#define EIGEN_USE_THREADS\n#include <weft/b.hpp>\n',
        # i's closure holds h, which is not in the parent's closure: no parent but h.
        'weft/i.hpp': '#pragma once\n#include <weft/c.hpp>\n#include <weft/h.hpp>\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
            with open(os.path.join(root, name), 'w', encoding='utf-8') as f:
                f.write(text)
        names = sorted(files)
        hubs = ['weft/a.hpp', 'weft/b.hpp', 'weft/g.hpp', 'weft/h.hpp', 'weft/z.hpp']
        got = {name: (parent, builds) for name, parent, builds in plan(root, names, hubs)}
        want = {
            'weft/a.hpp': (None, True),
            'weft/b.hpp': (None, True),  # a hub's PCH is built from scratch
            'weft/c.hpp': ('weft/b.hpp', False),  # b's closure is larger than a's
            'weft/d.hpp': ('weft/a.hpp', False),
            'weft/e.hpp': ('weft/a.hpp', False),  # b only under a condition
            'weft/f.hpp': ('weft/a.hpp', False),  # f defines WEFT_F, which g tests
            'weft/g.hpp': (None, False),  # a hub no check starts from
            'weft/h.hpp': (None, True),
            'weft/i.hpp': ('weft/h.hpp', False),  # h's closure is larger than b's
        }
        failures = [f'{n}: got {got[n]}, want {want[n]}' for n in names if got[n] != want[n]]
        if any(parent or builds for _, parent, builds in plan(root, names, [])):
            failures.append('without hubs a header got a parent')
        out = os.path.join(root, 'plan.cmake')
        write_plan(plan(root, names, hubs), out)
        with open(out, encoding='utf-8') as f:
            text = f.read()
            if '  weft/c.hpp weft/b.hpp 0\n' not in text or '  weft/b.hpp - 1\n' not in text:
                failures.append('the written plan lacks b\'s or c\'s line')
        # verify: current, then stale after b no longer includes a.
        with contextlib.redirect_stdout(io.StringIO()):
            if verify(plan(root, names, hubs), out) != 0:
                failures.append('verify found the plan just written stale')
            with open(os.path.join(root, 'weft/b.hpp'), 'w', encoding='utf-8') as f:
                f.write('#pragma once\n')
            if verify(plan(root, names, hubs), out) != 1:
                failures.append('verify found a stale plan current')
    for failure in failures:
        print('header_checks.py self-test:', failure)
    print('header_checks.py self-test:', 'FAILED' if failures else 'passed')
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    if len(argv) < 4 or argv[1] not in ('plan', 'verify'):
        print(__doc__, file=sys.stderr)
        return 2
    include_dir, out, rest = argv[2], argv[3], argv[4:]
    hubs = [a[len('--hub='):] for a in rest if a.startswith('--hub=')]
    names = [a for a in rest if not a.startswith('--hub=')]
    if argv[1] == 'verify':
        return verify(plan(include_dir, names, hubs), out)
    write_plan(plan(include_dir, names, hubs), out)
    return 0

if __name__ == '__main__':
    sys.exit(main(sys.argv))
