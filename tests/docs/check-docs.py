#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Every page of the documentation parses cleanly.

Documentation/*.rst through docutils (any WARNING or worse fails: a short
title underline once swallowed a whole section of the integration guide
unnoticed), and every man page in the tree through groff -man -ww (any
warning fails).  Usage: check-docs.py SOURCE_ROOT
"""
import glob
import io
import os
import subprocess
import sys

try:
    import docutils.core
    import docutils.utils
except ImportError:
    print('check-docs: python3-docutils is not installed (scripts/deps.txt has it)')
    sys.exit(1)

root = sys.argv[1]
bad = 0
pages = sorted(glob.glob(os.path.join(root, 'Documentation', '*.rst')))
for path in pages:
    warnings = io.StringIO()
    with open(path, encoding='utf-8') as f:
        text = f.read()
    try:
        docutils.core.publish_doctree(
            text, source_path=path,
            settings_overrides={'report_level': 2, 'halt_level': 5,
                                'warning_stream': warnings})
    except docutils.utils.SystemMessage as e:
        warnings.write(str(e))
    if warnings.getvalue():
        bad += 1
        print('FAIL %s:\n%s' % (os.path.relpath(path, root), warnings.getvalue()))

mans = sorted(glob.glob(os.path.join(root, 'man', 'man[1-8]', '*.[1-8]'))
              + glob.glob(os.path.join(root, 'adapters', '*', 'man', '*.[1-8]')))
for path in mans:
    r = subprocess.run(['groff', '-man', '-ww', '-z', path], capture_output=True,
                       text=True, env=dict(os.environ, LC_ALL='C'))
    if r.returncode or r.stderr:
        bad += 1
        print('FAIL %s:\n%s' % (os.path.relpath(path, root), r.stderr))

print('check-docs: %d rst pages, %d man pages, %d with problems'
      % (len(pages), len(mans), bad))
if not pages or not mans:
    print('check-docs: found no pages: wrong SOURCE_ROOT?')
    sys.exit(1)
sys.exit(1 if bad else 0)
