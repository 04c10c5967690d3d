#!/usr/bin/env python3
"""Extracts the C++ samples of docs/*.md so that CTest can build them.

A block fenced with ```cpp is a program: it is compiled and run, and must exit 0. A block
fenced with ```cpp compile-error MESSAGE must fail to compile with MESSAGE in the output.
Writes OUT/<doc>_<n>.cpp and OUT/samples.cmake and leaves unchanged files untouched, so
that rebuilding is incremental.

The samples of every page are built as two programs: OUT/doc_pages.cpp, and
OUT/doc_pages_linked.cpp for those that link the test suite's kernel registry. Each
sample sits in a namespace of its own, its includes hoisted to the top, its main()
renamed, and the program runs the sample its argument names. Each program paid about 25 s
of CPU (g++ -O0) for weft's headers before its own code, and compiled again the kernels
the others use: one program per page, 7 of them, took 366 s of user time, the two 173 s
(g++ 12 -O0 beside another build, 2026-11-28). A sample that
cannot sit in a namespace (it opens namespace weft to specialize a template, or has
preprocessor lines other than #include) is built alone from its own file.

samples.cmake sets WEFT_DOC_PROGRAMS, triples of (program, source, samples joined by
',', whether it links the kernel registry), and WEFT_DOC_FAILS, pairs of (sample, expected
error).
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


LINKED = "linked with the test suite's copy"


def separable(code):
    """Whether the sample can sit in a namespace of its own with its includes hoisted."""
    for line in code.splitlines():
        if line.startswith('#') and not line.startswith('#include'):
            return False
        if re.match(r'\s*namespace weft\b', line) or re.match(r'\s*template <>', line):
            return False
    return re.search(r'^int main\(\) \{$', code, re.M) is not None


def merged(names, codes):
    includes, bodies = [], []
    for name, code in zip(names, codes):
        body = []
        for line in code.splitlines():
            if line.startswith('#include'):
                if line not in includes:
                    includes.append(line)
            else:
                body.append(re.sub(r'^int main\(\) \{$', 'int sample_main() {', line))
        bodies.append(f'// {name}\nnamespace doc_{name} {{\n' + '\n'.join(body).strip('\n') + f'\n}}  // namespace doc_{name}\n')
    if '#include <cstring>' not in includes:
        includes.append('#include <cstring>')
    dispatch = ''.join(f'    if (std::strcmp(argv[1], "{n}") == 0) return doc_{n}::sample_main();\n' for n in names)
    return (f'// Extracted from docs/*.md: samples {", ".join(names)},\n'
            f'// each in a namespace of its own, run by name (tools/doc_samples.py).\n' + '\n'.join(includes) + '\n\n' + '\n'.join(bodies) +
            '\nint main(int argc, char** argv) {\n  if (argc == 2) {\n' + dispatch + '  }\n  return 2;\n}\n')


def main(docs, out):
    docs, out = pathlib.Path(docs), pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    programs, fails = [], []
    groups = {}  # links the registry -> [(name, code)], over every page
    for doc in sorted(docs.glob('*.md')):
        for n, (code, error) in enumerate(samples(doc.read_text()), 1):
            name = f'{doc.stem}_{n}'
            write_if_changed(out / f'{name}.cpp', f'// Extracted from docs/{doc.name}, sample {n}.\n' + code)
            links = LINKED in code
            if error:
                fails.append(f'  "{name}" "{error}"')
            elif separable(code):
                groups.setdefault(links, []).append((name, code))
            else:
                programs.append(f'  "doc_{name}" "{name}.cpp" "{name}" "{int(links)}"')
    for links, members in sorted(groups.items()):
        program = 'doc_pages' + ('_linked' if links else '')
        names = [m[0] for m in members]
        write_if_changed(out / f'{program}.cpp', merged(names, [m[1] for m in members]))
        programs.append(f'  "{program}" "{program}.cpp" "{",".join(names)}" "{int(links)}"')
    write_if_changed(out / 'samples.cmake', 'set(WEFT_DOC_PROGRAMS\n' + '\n'.join(programs) + ')\n'
                     'set(WEFT_DOC_FAILS\n' + '\n'.join(fails) + ')\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(*sys.argv[1:]))
