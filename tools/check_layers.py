#!/usr/bin/env python3
"""Checks weft's headers against the layers of docs/architecture.md.

The document's layer table names, for each layer, the directories (or files) it holds and
the layers it may include; its table of pending breaks names the directory edges that are
still tolerated, each with its reason. Every header under include/weft/ must belong to a
layer; each of its #include <weft/...> must name a header of the same layer or of one it
may include, or be a pending break; only umbrella headers include umbrella headers; the
headers include each other without a cycle; no header includes <immintrin.h> or its
kin (compile cost: docs/benchmarks.md); and a pending break that no longer occurs is an error
too, so the document stays true. Exits 1 with one line per finding.

  tools/check_layers.py [ROOT]     check ROOT (default: this checkout)
  tools/check_layers.py --self-test
"""
import pathlib, re, sys, tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](weft/[^>"]+)[>"]')
# The x86 intrinsics headers (about 53,000 lines with GCC 12): no library header includes them.
HEAVY = re.compile(r'\s*#\s*include\s*<((?:imm|x86|zmm|ymm)intrin\.h)>')
CODE = re.compile(r'`([^`]+)`')


def table_rows(text, heading):
    """The rows (lists of cells) of the first Markdown table after the line `heading`."""
    lines = text.splitlines()
    try:
        i = next(n for n, l in enumerate(lines) if l.strip() == heading)
    except StopIteration:
        raise SystemExit(f'check_layers: docs/architecture.md has no line "{heading}"')
    rows = []
    for l in lines[i + 1:]:
        if not l.strip().startswith('|'):
            if rows:
                break
            continue
        cells = [c.strip() for c in l.strip().strip('|').split('|')]
        if all(set(c) <= set('-: ') for c in cells):
            continue
        rows.append(cells)
    return rows[1:]  # without the header row


def parse_spec(text):
    layers = {}  # name -> (list of path prefixes, set of allowed layer names or None for any)
    umbrellas = set()
    for cells in table_rows(text, '## The layers'):
        name, where, may = cells[0].strip('*'), CODE.findall(cells[1]), cells[2]
        if name == 'umbrellas':
            umbrellas.update(where)
            layers[name] = (where, None)
        else:
            allowed = {m.strip() for m in may.split(',')} - {'', '-', '—', 'nothing'}
            layers[name] = (where, allowed)
    for name, (_, allowed) in layers.items():
        for a in allowed or ():
            if a not in layers:
                raise SystemExit(f'check_layers: layer "{name}" may include "{a}", which is not a layer')
    pending = set()
    for cells in table_rows(text, '## Pending breaks'):
        src, dst = CODE.findall(cells[0]), CODE.findall(cells[1])
        if len(src) != 1 or len(dst) != 1:
            raise SystemExit(f'check_layers: a pending break names one directory on each side: {cells}')
        pending.add((src[0], dst[0]))
    return layers, umbrellas, pending


def layer_of(rel, layers):
    """The layer holding header `rel` (relative to include/weft/): exact file first, then
    the longest directory prefix."""
    best, best_len = None, -1
    for name, (where, _) in layers.items():
        for w in where:
            if w == rel:
                return name
            if w.endswith('/') and rel.startswith(w) and len(w) > best_len:
                best, best_len = name, len(w)
    return best


def directory(rel):
    return rel.rsplit('/', 1)[0] + '/' if '/' in rel else ''


def check(root):
    root = pathlib.Path(root)
    layers, umbrellas, pending = parse_spec((root / 'docs' / 'architecture.md').read_text())
    base = root / 'include' / 'weft'
    headers = {p.relative_to(base).as_posix(): p for p in sorted(base.rglob('*.hpp'))}
    findings, used_pending, graph = [], set(), {}
    for rel, path in headers.items():
        layer = layer_of(rel, layers)
        if layer is None:
            findings.append(f'include/weft/{rel}: belongs to no layer of docs/architecture.md')
            continue
        graph[rel] = []
        for n, line in enumerate(path.read_text().splitlines(), 1):
            heavy = HEAVY.match(line)
            if heavy:
                findings.append(f'include/weft/{rel}:{n}: includes <{heavy.group(1)}>, which every program that includes '
                                'this header parses (a quarter of a minimal program\'s lines): use the compilers\' '
                                'vector types and builtins, as kernels/cpu/sgemm.hpp does')
                continue
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)[len('weft/'):]
            where = f'include/weft/{rel}:{n}: includes <weft/{target}>'
            if target not in headers:
                findings.append(f'{where}, which does not exist')
                continue
            graph[rel].append(target)
            if target in umbrellas and rel not in umbrellas:
                findings.append(f'{where}, an umbrella header: include the headers it needs')
                continue
            to = layer_of(target, layers)
            allowed = layers[layer][1]
            if to is None or allowed is None or to == layer or to in allowed:
                continue
            edge = (directory(rel), directory(target))
            if edge in pending:
                used_pending.add(edge)
                continue
            findings.append(f'{where}: layer "{layer}" may not include layer "{to}"')
    for src, dst in sorted(pending - used_pending):
        findings.append(f'docs/architecture.md: the pending break `{src}` -> `{dst}` no longer occurs: remove it')
    # Cycles, by depth-first search over the include graph.
    state, stack = {}, []

    def visit(h):
        state[h] = 1
        stack.append(h)
        for t in graph.get(h, ()):
            if state.get(t) == 1:
                cycle = stack[stack.index(t):] + [t]
                findings.append('include cycle: ' + ' -> '.join(cycle))
            elif t not in state:
                visit(t)
        stack.pop()
        state[h] = 2

    for h in sorted(graph):
        if h not in state:
            visit(h)
    return findings


SPEC = """# Architecture
## The layers
| Layer | Holds | May include |
|---|---|---|
| core | `core/` | — |
| ops | `ops/` | core |
| graph | `graph/` | core, ops |
| dsl | `dsl/` | core, graph |
| umbrellas | `all.hpp` | anything |

## Pending breaks
| From | To | Why |
|---|---|---|
| `dsl/` | `ops/` | PENDING |
"""


def self_test():
    def run(files, spec=SPEC):
        with tempfile.TemporaryDirectory() as d:
            root = pathlib.Path(d)
            (root / 'docs').mkdir()
            (root / 'docs' / 'architecture.md').write_text(spec)
            for rel, text in files.items():
                p = root / 'include' / 'weft' / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text)
            return check(root)

    inc = lambda *hs: ''.join(f'#include <weft/{h}>\n' for h in hs)
    good = {'core/a.hpp': '', 'ops/b.hpp': inc('core/a.hpp'), 'graph/c.hpp': inc('ops/b.hpp', 'core/a.hpp'),
            'dsl/d.hpp': inc('graph/c.hpp', 'ops/b.hpp'), 'all.hpp': inc('dsl/d.hpp')}
    cases = [
        ({}, []),
        ({'core/a.hpp': inc('ops/b.hpp')}, ['layer "core" may not include layer "ops"', 'include cycle']),
        ({'ops/e.hpp': inc('graph/c.hpp')}, ['layer "ops" may not include layer "graph"']),
        ({'graph/e.hpp': inc('all.hpp')}, ['an umbrella header']),
        ({'tools/x.hpp': ''}, ['belongs to no layer']),
        ({'graph/e.hpp': inc('graph/f.hpp'), 'graph/f.hpp': inc('graph/e.hpp')}, ['include cycle: graph/e.hpp -> graph/f.hpp -> graph/e.hpp']),
        ({'graph/e.hpp': inc('core/missing.hpp')}, ['does not exist']),
        ({'core/e.hpp': '#include <immintrin.h>\n'}, ['includes <immintrin.h>']),
    ]
    failures = 0
    for extra, expected in cases:
        got = run({**good, **extra})
        ok = all(any(e in g for g in got) for e in expected) and (expected or not got) and len(got) >= len(expected)
        if not ok:
            failures += 1
            print(f'self-test: with {sorted(extra)} expected {expected}, got {got}')
    # The good tree uses the pending break dsl -> ops; without the break it is reported, and
    # a pending break that no longer occurs is reported too.
    if not any('layer "dsl" may not include layer "ops"' in f for f in run(good, SPEC.replace('| `dsl/` | `ops/` | PENDING |\n', ''))):
        failures += 1
        print('self-test: a forbidden edge with no pending entry was accepted')
    if not any('`dsl/` -> `ops/` no longer occurs' in f for f in run({**good, 'dsl/d.hpp': inc('graph/c.hpp')})):
        failures += 1
        print('self-test: a stale pending break was not reported')
    print('check_layers self-test:', 'ok' if not failures else f'{failures} failure(s)')
    return 1 if failures else 0


def main(argv):
    if argv[1:2] == ['--self-test']:
        return self_test()
    root = argv[1] if len(argv) > 1 else pathlib.Path(__file__).resolve().parent.parent
    findings = check(root)
    for f in findings:
        print(f)
    print(f'check_layers: {len(findings)} finding(s)')
    return 1 if findings else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
