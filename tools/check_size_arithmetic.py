#!/usr/bin/env python3
"""Keeps raw size arithmetic out of include/weft (issue 23; docs/reliability.md).

A new dimension or byte size made by multiplying or adding is computed with the checked
helpers of core/checked.hpp (checked_mul, checked_add, checked_element_count,
checked_byte_size). This script flags the two forms such code takes:
  - dims built with arithmetic: `dims[i] *= m`, `dims[i] += pad`, `dims.push_back(a * b)`;
  - byte sizes by multiplication with size_of: `n * size_of(t)`.
A flagged line passes when it calls a checked_ helper, or says in a `// within: ...`
comment why its operands cannot overflow (dims of a tensor that already exists, whose
element count and bytes were checked when it was made).

  check_size_arithmetic.py [ROOT]     checks ROOT/include/weft (exit 1 on a finding)
  check_size_arithmetic.py --self-test
"""
import pathlib
import re
import sys

PATTERNS = [
    re.compile(r'\bdims?\w*(\[[^\]]*\])?\s*[*+]='),                       # dims[i] *= m
    re.compile(r'\bdims?\w*\.(push_back|emplace_back)\([^;]*[\w)\]]\s*[*+]\s*[\w(]'),  # dims.push_back(a * b)
    re.compile(r'[\w)\]]\s*\*\s*size_of\(|size_of\([^)]*\)\s*\*'),        # n * size_of(t)
]


def findings(text):
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split('//', 1)[0]
        if any(p.search(code) for p in PATTERNS) and 'checked_' not in code and '// within:' not in line:
            yield number, line.strip()


def self_test():
    # The lines that once gave undersized buffers (issue 23's first class) are flagged...
    bad = ['      dims.push_back(x.shape()[d] * m[static_cast<std::size_t>(d)]);',
           '      dims.push_back(x.shape()[d] + before + after);',
           '                         if (dims[i] >= 0) dims[i] *= (*m)[i];',
           '    std::size_t bytes = static_cast<std::size_t>(shape_.num_elements()) * size_of(type);']
    # ... and their checked forms, and annotated ones, are not.
    good = ['      dims.push_back(checked_mul(x.shape()[d], m[d], "a tiled dim"));',
            '      dims[a] += t.shape()[a];  // within: the inputs exist, so their sum fits',
            '  std::size_t n = rows * cols;']
    ok = all(list(findings(line)) for line in bad) and not any(list(findings(line)) for line in good)
    print('self-test', 'passed' if ok else 'FAILED')
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    bad = 0
    for path in sorted((root / 'include' / 'weft').rglob('*.hpp')):
        if path.name == 'checked.hpp':
            continue
        for number, line in findings(path.read_text()):
            print(f'{path.relative_to(root)}:{number}: size arithmetic without a checked_ helper or a '
                  f'"// within:" reason: {line}')
            bad += 1
    print(f'check_size_arithmetic: {bad} finding(s)')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
