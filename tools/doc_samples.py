#!/usr/bin/env python3
"""Extracts the C++ samples of docs/*.md so that CTest can build them.

A block fenced with ```cpp is a program: it is compiled and run, and must exit 0. A block
fenced with ```cpp compile-error MESSAGE must fail to compile with MESSAGE in the output.
Writes OUT/<doc>_<n>.cpp and OUT/samples.cmake (a list of (name, file, expected error))
and leaves unchanged files untouched, so that rebuilding is incremental.
"""
import pathlib
import re
import sys


def samples(text):
    fence = re.compile(r'^```cpp(?:[ \t]+compile-error[ \t]+(.+))?[ \t]*$')
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = fence.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j] != '```':
            j += 1
        yield '\n'.join(lines[i + 1:j]) + '\n', (m.group(1) or '').strip()
        i = j + 1


def write_if_changed(path, text):
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def main(docs, out):
    docs, out = pathlib.Path(docs), pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for doc in sorted(docs.glob('*.md')):
        for n, (code, error) in enumerate(samples(doc.read_text()), 1):
            name = f'{doc.stem}_{n}'
            write_if_changed(out / f'{name}.cpp', f'// Extracted from docs/{doc.name}, sample {n}.\n' + code)
            entries.append(f'  "{name}" "{error}"')
    write_if_changed(out / 'samples.cmake', 'set(WEFT_DOC_SAMPLES\n' + '\n'.join(entries) + ')\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(*sys.argv[1:]))
