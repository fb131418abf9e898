#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Self-test of check-docs.py: a temporary tree with one violating page per
rule (each must be caught, at its line, by its rule) and clean pages full of
near misses (none may be reported); the clean tree alone must pass.
Usage: check-docs-selftest.py [PATH/TO/check-docs.py]
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, 'check-docs.py')

GOOD_RST = """\
.. SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

Good page
=========

ummunotify (2010) came first.  UCX's master branch, the v1.18.x branch and
the main branch are upstream names, as are the ``v1.18.x`` branch and
branch v2.1.x; the miss takes the slow branch, the not-taken branch or the
slow-path branch; the brief and bounded wait is closed, as is the brief
window; the library issues 2 ioctls; libfabric issues 1.17 to 2.0 differ;
libfabric's man/fi_mr.3.md and UCX's docs/source/index.rst are theirs;
fi_mr.3.md too.  See
https://github.com/example/project/issues/12 and
https://example.org/list/2013-05-01/msg.html (URLs are not followed).
`The markdown page <good.md>`_, `its heading <good.md#first-section>`_,
`the section`_, :ref:-free text, performance.md, Documentation/good.md,
README.md and ``Documentation/good.rst`` all exist; ``*.rst`` is a glob and
``results/<run>/results.md`` a placeholder.

.. _the section: good.md

Example::

   cat missing-page.rst > out.md

.. code-block:: sh

   scripts/x > another-missing.md

.. image:: pic.png

.. note::

   A note is text: its mentions count, and good.md exists.

.. generated-by: python3 gen.py

Measured 2026-12-05 on issue 12's machine (this session), branch `x-y`.

.. end-generated

Blocks sit between ``.. generated-by: COMMAND`` and ``.. end-generated``
lines (``<!-- generated-by: COMMAND -->`` in markdown).

Done.
"""

GOOD_MD = """\
<!-- SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause -->
# Good markdown

## First section

[the rst page](good.rst), [here](#first-section), [second](#second-one),
[again](#first-section-1), ![pic](pic.png), [web](https://example.org/a.rst),
[ref][r].  Plain mention of good.rst.

[r]: good.rst

```sh
cp nowhere.md out.log
```

## First section

Second `one`
------------

<!-- generated-by: python3 gen.py -->
Measured 2026-12-05 on issue 12's machine (this session), branch `x-y`.
<!-- end-generated -->
"""

GOOD_README = """\
# project

Start at [the docs](Documentation/good.rst) and `Documentation/good.md`;
history in NEWS.
"""

GOOD_MAN = r""".TH GOOD 7 2026-01-01 "ummunot 9.8.7" "Miscellaneous Information Manual"
.SH NAME
good \- a page
.SH SEE ALSO
Documentation/good.rst and
.I integration\-guide.rst
in the source tree.
"""

GEN = 'print("Measured 2026-12-05 on issue 12\'s machine (this session), branch `x-y`.")\n'

HEAD = '.. SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause\n\nPage\n====\n\n'

# path -> (text, [(line, rule), ...]) every one of which must be reported
BAD = {
    'Documentation/bad-length.rst': (HEAD + 'line\n\n' * 300, [(601, 'length')]),
    'Documentation/bad-date.rst': (HEAD + 'Measured on\n2026-12-02 14:05.\n',
                                   [(7, 'date')]),
    'Documentation/bad-issue.rst': (HEAD + 'As Issue #11 asked.\n', [(6, 'issue')]),
    'Documentation/bad-branch.rst': (HEAD + 'Measured on branch `index`, then on\n'
                                     'the issue19-cache work.\n',
                                     [(6, 'branch'), (7, 'branch')]),
    'Documentation/bad-branch.md': ('# T\n\nThe `kmod-hardening` branch.\n\nOn the index-v2 branch,\n'
                                    "on branch 'docs'.\n", [(3, 'branch'), (5, 'branch'), (6, 'branch')]),
    'Documentation/bad-journal.rst': (HEAD + 'Deviations from the\nbrief.  Note\n'
                                      '2026 (later).\n\nAs asked in the brief\n\n'
                                      'In this\nsession.\n',
                                      [(6, 'journal'), (7, 'journal'), (8, 'journal'),
                                       (10, 'journal'), (12, 'journal')]),
    'Documentation/bad-link.rst': (HEAD + '`x <nothere.rst>`_ and other-page.rst.\n\n'
                                   '.. image:: nopic.png\n\n.. note::\n\n   See gone.rst.\n',
                                   [(6, 'link'), (6, 'link'), (8, 'link'), (12, 'link')]),
    'Documentation/sub/bad-link.md': ('# T\n\n[a](../good.md#no-such-heading), '
                                      '[b](../gone.md), [c](#t), [d](#nope)\n',
                                      [(3, 'link'), (3, 'link'), (3, 'link')]),
    'Documentation/bad-generated.rst': (HEAD + '.. generated-by: python3 gen.py\n\n'
                                        'Measured yesterday.\n\n.. end-generated\n',
                                        [(6, 'generated')]),
    'Documentation/bad-generated.md': ('# T\n\n<!-- generated-by: no-such-command-x -->\n'
                                       'x\n<!-- end-generated -->\n'
                                       '<!-- generated-by: python3 -c "import sys; sys.exit(3)" -->\n'
                                       '<!-- end-generated -->\n'
                                       '<!-- generated-by: python3 gen.py -->\n',
                                       [(3, 'generated'), (6, 'generated'), (8, 'generated')]),
    'Documentation/bad-markers.rst': (HEAD + '..  generated-by: python3 gen.py\n\n'
                                      '<!-- end-generated -->\n\n.. end-generated\n',
                                      [(6, 'generated'), (8, 'generated'), (10, 'generated')]),
    'Documentation/bad-docutils.rst': (HEAD + 'A longer title\n======\n\ntext\n', [(7, 'docutils')]),
    'man/man7/bad.7': ('.TH BAD 7 "" "" ""\n.SH NAME\nbad \\- page\n.SH SEE ALSO\n'
                       'Documentation/none\\-such.rst\n.XYZ\n',
                       [(1, 'version'), (5, 'link'), (6, 'groff')]),
    'man/man3/bad_version.3': ('.TH BAD_VERSION 3 2026-01-01 "libummunot 9.8" "libummunot Manual"\n'
                               '.SH NAME\nbad_version \\- page\n', [(1, 'version')]),
    'dkms.conf': ('PACKAGE_NAME="ummunot"\nPACKAGE_VERSION="9.8.6"\n', [(2, 'version')]),
}


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
        f.write(text)


def build(root, bad):
    write(root, 'Documentation/good.rst', GOOD_RST)
    write(root, 'Documentation/good.md', GOOD_MD)
    write(root, 'Documentation/performance.md', '# Performance\n')
    write(root, 'Documentation/pic.png', '')
    write(root, 'Documentation/integration-guide.rst', HEAD + 'Text.\n')
    write(root, 'README.md', GOOD_README)
    write(root, 'man/man7/good.7', GOOD_MAN)
    write(root, 'gen.py', GEN)
    # One version, stated everywhere the version rule looks.
    write(root, 'meson.build', "project('ummunot', 'c',\n  version : '9.8.7',\n)\n")
    write(root, 'debian/changelog', 'ummunot (9.8.7) unstable; urgency=medium\n')
    write(root, 'dkms.conf', 'PACKAGE_NAME="ummunot"\nPACKAGE_VERSION="9.8.7"\n')
    write(root, 'kmod/ummunot_main.c', '#define UMMUNOT_MODULE_VERSION\t"9.8.7"\n')
    if bad:
        for rel, (text, _) in BAD.items():
            write(root, rel, text)


def run(root):
    r = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main():
    errors = []
    with tempfile.TemporaryDirectory() as root:
        build(root, False)
        rc, out = run(root)
        if rc != 0 or 'FAIL' in out:
            errors.append('the clean tree failed (rc %d):\n%s' % (rc, out))
    with tempfile.TemporaryDirectory() as root:
        build(root, True)
        rc, out = run(root)
        if rc != 1:
            errors.append('the tree with violations: rc %d, not 1' % rc)
        got = [m.groups() for m in re.finditer(r'^FAIL (\S+):(\d+): (\w+):', out, re.M)]
        for path, (_, want) in BAD.items():
            mine = [(int(l), r) for p, l, r in got if p == path]
            for item in set(want):
                if mine.count(item) < want.count(item):
                    errors.append('%s: expected %d x "%s" at line %d, got %s'
                                  % (path, want.count(item), item[1], item[0], mine))
            extra = [x for x in mine if x not in want]
            if extra:
                errors.append('%s: unexpected %s' % (path, extra))
        for p, l, r in got:
            if p not in BAD:
                errors.append('false positive: %s:%s: %s' % (p, l, r))
        rules = {r for _, w in BAD.values() for _, r in w}
    if errors:
        print('check-docs-selftest: FAILED\n' + '\n'.join(errors) + '\n--- output:\n' + out)
        return 1
    print('check-docs-selftest: clean tree passes; %d violating pages caught (rules: %s)'
          % (len(BAD), ', '.join(sorted(rules))))
    return 0


if __name__ == '__main__':
    sys.exit(main())
