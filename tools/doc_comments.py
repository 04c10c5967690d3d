#!/usr/bin/env python3
"""Doxygen comments in weft's headers: the comment block right above a declaration at
namespace or class scope is its documentation, written `///`; a comment after a member on
its line (`int n = 0;  // ...`) is `///<`; each header's opening comment is its `@file`
description. Comments inside function bodies stay `//`.

  tools/doc_comments.py [ROOT]           rewrite the headers under ROOT/include/weft
  tools/doc_comments.py --check [ROOT]   exit 1, naming each, where a header would change
  tools/doc_comments.py --self-test

Scopes are found by counting braces: a brace whose statement starts with `namespace`,
`class`, `struct`, `union`, `enum` or `extern "C"` (after any `template <...>`) opens a
scope whose members are documented; any other brace (a function's body, an initializer, a
lambda) opens one whose comments are left alone. String and character literals and
comments are skipped when counting.
"""
import pathlib, re, sys

TYPE_SCOPE = re.compile(r'^\s*(template\s*<.*>\s*)?(namespace|class|struct|union|enum|extern\s+"C")\b')
COMMENT = re.compile(r'^(\s*)//(?![/!])\s?(.*)$')
DOC = re.compile(r'^(\s*)///(?![/<])\s?(.*)$')  # a line of a Doxygen comment
TRAILING = re.compile(r'^(.*?[;,])(\s+)//(?![/!<])(?!\s*NOLINT)\s?(.*)$')
# A member function defined on one line, then a comment: `int size() const { return n_; }  // ...`.
TRAILING_BODY = re.compile(r'^(\s*[^}\s/#].*\{.*\})(\s+)//(?![/!<])(?!\s*NOLINT)\s?(.*)$')
ACCESS = re.compile(r'^\s*(public|private|protected)\s*:')
# A raw string literal's start: R"delim( not preceded by an identifier character (DIR" is not one).
RAW = re.compile(r'(?<![A-Za-z0-9_])(?:u8|u|U|L)?R"[^()\\\s"]{0,16}\(')
# A whole line that invokes a macro with no `;` after it (WEFT_DETAIL_OP_TYPE(Add, math)):
# at namespace or class scope it is a complete declaration, so the statement ends with it.
MACRO_CALL = re.compile(r'^[A-Z][A-Z0-9_]*\(.*\)$')


def code_of(line):
    """The line without comments and literals (their text blanked), and whether a /* is left open."""
    out, i, n = [], 0, len(line)
    while i < n:
        c = line[i]
        if line.startswith('//', i):
            break
        if c in '"\'':
            q = c
            j = i + 1
            while j < n and line[j] != q:
                j += 2 if line[j] == '\\' else 1
            out.append(q + ' ' * max(0, min(j, n) - i - 1) + q)
            i = j + 1
            continue
        raw = RAW.match(line, i)
        if raw and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] == '_')):  # skipped to its end on this line
            end = line.find(')"', raw.end())
            i = n if end < 0 else end + 2
            continue
        out.append(c)
        i += 1
    return ''.join(out)


def rewrite(text):
    lines = text.split('\n')
    out = []
    stack = []        # 'type' or 'code' per open brace
    statement = ''    # the code since the last ; { or }
    block = []        # a pending comment block (indices into out)
    in_raw = False
    in_macro = False  # in a #define continued by backslashes
    first_block = True
    for idx, line in enumerate(lines):
        stripped = line.strip()
        at_type_scope = all(s == 'type' for s in stack)
        m = COMMENT.match(line) or DOC.match(line)
        if m and not in_raw and stripped != '/// @file':
            out.append(line)
            block.append(len(out) - 1)
            continue
        if stripped == '/// @file':  # the opening block's marker: written again below
            continue
        # The comment block above this line documents it when this line starts a declaration
        # at namespace or class scope (not within one, as a constructor's initializer list);
        # any other block is a plain comment.
        if block:
            opening = first_block and block[0] == 0
            documents = (at_type_scope and not statement.strip() and stripped and not stripped.startswith('#')
                         and not stripped.startswith('}') and not ACCESS.match(stripped)
                         and not stripped.startswith('static_assert') and not stripped.startswith('using namespace'))
            for i in block:
                cm = COMMENT.match(out[i]) or DOC.match(out[i])
                out[i] = f'{cm.group(1)}{"///" if opening or documents else "//"} {cm.group(2)}'.rstrip()
            if opening:
                out.insert(block[0], '/// @file')
            block = []
        first_block = False
        if at_type_scope and not in_raw:
            t = TRAILING.match(line) or TRAILING_BODY.match(line)
            if t and not line.lstrip().startswith('//') and '"' not in t.group(1):
                line = f'{t.group(1)}{t.group(2)}///< {t.group(3)}'.rstrip()
        out.append(line)
        # Braces of this line (a preprocessor line, continued or not, has none that count, and
        # ends a statement).
        if stripped.startswith('#') or in_macro:
            in_macro = line.endswith('\\')
            statement = ''
            continue
        code = code_of(line)
        raw = RAW.search(line)
        if raw and ')"' not in line[raw.end():]:
            in_raw = True
        elif in_raw and ')"' in line:
            in_raw = False
            continue
        if in_raw:
            continue
        for ch in code:
            if ch == '{':
                stack.append('type' if TYPE_SCOPE.match(statement) else 'code')
                statement = ''
            elif ch == '}':
                if stack:
                    stack.pop()
                statement = ''
            elif ch == ';':
                statement = ''
            else:
                statement += ch
        statement += ' '
        if MACRO_CALL.match(code.strip()) and code.count('(') == code.count(')') and all(s == 'type' for s in stack):
            statement = ''
        if ACCESS.match(code) and all(s == 'type' for s in stack):
            statement = ''  # `public:` ends nothing but itself: the member after it is a declaration
    return '\n'.join(out)


def headers(root):
    base = pathlib.Path(root) / 'include' / 'weft'
    return sorted(p for p in base.rglob('*.hpp'))


def self_test():
    src = '''// The file.
#pragma once

namespace weft {

// A point.
struct point {
  int x = 0;  // across
  int size() const { return x; }  // on its line
  // The length.
  double length() const {
    // inside a body: left alone
    return 0;
  }

 private:
  // Right after an access specifier.
  int y_ = 0;
};

// Twice.
inline int twice(int v) {
  // left alone
  return 2 * v;
}

WEFT_DETAIL_OP_TYPE(Add, math)
// After a macro invocation with no semicolon.
struct after_macro {
  // Its member.
  static void define() {}
};

}  // namespace weft
'''
    got = rewrite(src)
    want = '''/// @file
/// The file.
#pragma once

namespace weft {

/// A point.
struct point {
  int x = 0;  ///< across
  int size() const { return x; }  ///< on its line
  /// The length.
  double length() const {
    // inside a body: left alone
    return 0;
  }

 private:
  /// Right after an access specifier.
  int y_ = 0;
};

/// Twice.
inline int twice(int v) {
  // left alone
  return 2 * v;
}

WEFT_DETAIL_OP_TYPE(Add, math)
/// After a macro invocation with no semicolon.
struct after_macro {
  /// Its member.
  static void define() {}
};

}  // namespace weft
'''
    if got != want:
        print(got)
        raise SystemExit('doc_comments self-test failed')
    if rewrite(got) != got:
        raise SystemExit('doc_comments self-test: not idempotent')
    print('doc_comments self-test: ok')


def main(argv):
    if argv[1:2] == ['--self-test']:
        return self_test()
    check = argv[1:2] == ['--check']
    rest = argv[2:] if check else argv[1:]
    root = rest[0] if rest else str(pathlib.Path(__file__).resolve().parent.parent)
    changed = []
    for p in headers(root):
        text = p.read_text()
        new = rewrite(text)
        if new != text:
            changed.append(p)
            if not check:
                p.write_text(new)
    if check and changed:
        for p in changed:
            print(f'{p}: comments not in Doxygen form (run tools/doc_comments.py)')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv) or 0)
