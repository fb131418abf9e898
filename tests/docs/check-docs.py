#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The documentation check: every page is current, parses and links.

Usage: check-docs.py [--list-rules] SOURCE_ROOT

Pages: every *.rst and *.md under Documentation/ (recursively) and
README.md.  Man pages: man/man[1-8]/*.[1-8] and adapters/*/man/*.[1-8].
Every failure is one line, ``FAIL path:line: rule: text``; the last line
is a summary; the exit status is 1 if anything failed.  Python's standard
library and docutils only.

Rules (``--list-rules`` prints this list):

docutils   every .rst page parses with no docutils WARNING or worse.
groff      every man page passes ``groff -man -ww`` with no warning.
length     no page under Documentation/ is over 600 lines.
date       no date YYYY-MM-DD (optionally with a time) outside a generated
           block; years alone ("2010") are fine, as is a date inside a URL.
issue      no issue reference outside a URL: "issue N", "issues N",
           "issue #N", any case (not the verb, "issues 2 ioctls", nor a
           version, "issues 1.17").
branch     no branch name: "branch 'x'", "branch `x`", "`x` branch",
           "x branch" and "branch x" (x unquoted: only when x is shaped like
           a branch name, with '-', '/', '_' or a digit, and is not a branch
           of code such as "not-taken" or "slow-path"), where x is not main,
           master or an upstream release branch (v1.18.x, v2.1, 1.17.x,
           release-1.2, stable...); and nothing shaped like issueN-... or
           issue-N... (outside a URL).
journal    no journal words: "the brief" (the noun: "the brief says", "from
           the brief."; not "the brief window"), "this session", "(later)",
           "Note 20..".
link       internal links resolve.  rst: `text <path>`_ and __, ".. _x: path",
           :doc:, ".. image::", ".. figure::", ".. include::" and
           ".. literalinclude::" targets (relative to the page; :doc: with a
           leading / relative to Documentation/).  md: [t](path), ![](path)
           and "[t]: path", relative to the page, with #anchor into a .md
           page (or the page itself) checked against GitHub's heading slugs.
           Plain mentions of a .rst/.md file in text (README.md, man pages
           included), e.g. integration-guide.rst or Documentation/vm-rig.rst,
           must name a file that exists relative to the page's directory,
           Documentation/ or the repository root (a bare name also anywhere
           under Documentation/).  A path that is not under Documentation/
           and not ./ or ../ is checked only where its directory is one of
           this tree holding .rst/.md pages (contrib/ucx/README.md is;
           libfabric's man/fi_mr.3.md or UCX's docs/... are another
           project's).  Skipped: http(s) and other URLs, mentions
           inside rst literal (::, code-block) blocks and md fenced code,
           names with a glob or a <placeholder> in them.
generated  every generated block matches its command.  rst:
             .. generated-by: COMMAND
             ...content...
             .. end-generated
           md:
             <!-- generated-by: COMMAND -->
             ...content...
             <!-- end-generated -->
           (marker lines start in column 1; the other syntax, an unclosed,
           nested, stray or malformed marker line fails; prose that quotes
           the markers inside a line is fine).  COMMAND is split with shlex and
           run from the repository root, no shell, 30 s timeout; its stdout
           must equal the lines between the markers exactly, ignoring one
           blank line right after the opening marker and one right before
           the closing marker.  A missing command, a non-zero exit or a
           difference fails (with a short unified diff).  The rules date,
           issue, branch, journal and link do not look inside a block.
version    every place that states the package's version states
           meson.build's project version V: debian/changelog's first entry,
           dkms.conf's PACKAGE_VERSION, the module's UMMUNOT_MODULE_VERSION
           (kmod/ummunot_main.c), and each man page's .TH source field
           ("libummunot V" in man3, "ummunot V" elsewhere).
"""
import bisect
import difflib
import glob
import io
import os
import re
import shlex
import subprocess
import sys

DOC_LIMIT = 600
GEN_TIMEOUT = 30

failures = []


def fail(rel, line, rule, text):
    text = ' '.join(str(text).split())
    if len(text) > 160:
        text = text[:157] + '...'
    failures.append((rel, line, rule, text))
    print('FAIL %s:%d: %s: %s' % (rel, line, rule, text))
    sys.stdout.flush()


class Page:
    """A page's text, its lines, and offset -> line number."""

    def __init__(self, root, path):
        self.root = root
        self.path = path
        self.rel = os.path.relpath(path, root)
        self.dir = os.path.dirname(path)
        self.is_md = path.endswith('.md')
        with open(path, encoding='utf-8') as f:
            self.text = f.read()
        self.lines = self.text.split('\n')
        self.starts = [0]
        for m in re.finditer('\n', self.text):
            self.starts.append(m.end())

    def line_of(self, offset):
        return bisect.bisect_right(self.starts, offset)


def blank_lines(text, first, last):
    """text with lines first..last (1-based, inclusive) blanked out,
    keeping every offset and newline."""
    lines = text.split('\n')
    for i in range(first - 1, min(last, len(lines))):
        lines[i] = ' ' * len(lines[i])
    return '\n'.join(lines)


# --------------------------------------------------------------- generated

RST_OPEN = re.compile(r'^\.\. generated-by: (\S.*?)\s*$')
RST_CLOSE = re.compile(r'^\.\. end-generated\s*$')
MD_OPEN = re.compile(r'^<!-- generated-by: (\S.*?) -->\s*$')
MD_CLOSE = re.compile(r'^<!-- end-generated -->\s*$')


def generated_blocks(page):
    """Parse the markers; report malformed ones.  Returns a list of
    (open_line, close_line, command, content_lines)."""
    op, cl = (MD_OPEN, MD_CLOSE) if page.is_md else (RST_OPEN, RST_CLOSE)
    other_op, other_cl = (RST_OPEN, RST_CLOSE) if page.is_md else (MD_OPEN, MD_CLOSE)
    blocks = []
    cur = None
    for i, line in enumerate(page.lines, 1):
        m = op.match(line)
        if m:
            if cur:
                fail(page.rel, i, 'generated',
                     'opening marker inside the block opened at line %d' % cur[0])
            cur = (i, m.group(1))
            continue
        if cl.match(line):
            if not cur:
                fail(page.rel, i, 'generated', 'closing marker with no opening marker')
            else:
                blocks.append((cur[0], i, cur[1], page.lines[cur[0]:i - 1]))
                cur = None
            continue
        if other_op.match(line) or other_cl.match(line):
            fail(page.rel, i, 'generated', 'marker of the other syntax (%s page): %s'
                 % ('md' if page.is_md else 'rst', line))
        elif re.match(r'^\s*(?:\.\.|<!--)\s*(?:generated-by|end-generated)', line) and not cur:
            fail(page.rel, i, 'generated', 'malformed marker: %s' % line)
    if cur:
        fail(page.rel, cur[0], 'generated', 'no closing marker for: %s' % cur[1])
    return blocks


def check_generated(root, page, blocks):
    for first, last, command, content in blocks:
        if content and content[0].strip() == '':
            content = content[1:]
        if content and content[-1].strip() == '':
            content = content[:-1]
        want = ''.join(l + '\n' for l in content)
        try:
            argv = shlex.split(command)
        except ValueError as e:
            fail(page.rel, first, 'generated', '%s: cannot split: %s' % (command, e))
            continue
        if not argv:
            fail(page.rel, first, 'generated', 'empty command')
            continue
        try:
            r = subprocess.run(argv, cwd=root, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=GEN_TIMEOUT)
        except FileNotFoundError:
            fail(page.rel, first, 'generated', '%s: command not found' % command)
            continue
        except PermissionError:
            fail(page.rel, first, 'generated', '%s: not executable' % command)
            continue
        except subprocess.TimeoutExpired:
            fail(page.rel, first, 'generated', '%s: timed out after %d s'
                 % (command, GEN_TIMEOUT))
            continue
        if r.returncode:
            fail(page.rel, first, 'generated', '%s: exit status %d: %s'
                 % (command, r.returncode, r.stderr.strip()[-200:]))
            continue
        if r.stdout != want:
            fail(page.rel, first, 'generated',
                 '%s: the block (lines %d-%d) differs from its output'
                 % (command, first, last))
            diff = list(difflib.unified_diff(
                want.splitlines(), r.stdout.splitlines(),
                '%s (lines %d-%d)' % (page.rel, first, last),
                'output of: ' + command, n=1, lineterm=''))
            for d in diff[:24]:
                print('    ' + d)
            if len(diff) > 24:
                print('    ... (%d more diff lines)' % (len(diff) - 24))


# --------------------------------------------------------------- text rules

URL_RE = re.compile(r'(?:\b[a-zA-Z][a-zA-Z0-9+.-]*://|\bmailto:|\bwww\.|'
                    r'\b(?:github\.com|gitlab\.com|lore\.kernel\.org)/)[^\s<>`"\')\]]*')


def url_spans(text):
    return [m.span() for m in URL_RE.finditer(text)]


def in_spans(spans, start, end):
    for s, e in spans:
        if start < e and end > s:
            return True
    return False


DATE_RE = re.compile(
    r'(?<![\w.-])(?:19|20)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])'
    r'(?:[T ](?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?'
    r'(?![\w-])')
# "issues 2 ioctls" is the verb; "issues 1.17" a version: neither is a reference
ISSUE_RE = re.compile(r'\bissue\s+#?\d+\b(?!\.\d)|\bissues\s+#?\d+\b(?!\.\d)(?!\s+[a-z]+s\b)'
                      r'|\bissue\s*#\d+\b', re.I)
ISSUE_BRANCH_RE = re.compile(r'\bissue-?\d+[-_/][\w./-]*|\bissue-\d+\w*', re.I)
# a release branch or the trunk: allowed names
ALLOWED_BRANCH = re.compile(
    r'^(?:main|master|trunk|stable|HEAD|'
    r'v?\d+(?:\.\d+)*(?:\.x)?|'
    r'(?:release|stable|rel)[-/_]?v?\d[\w.]*|'
    r'v\d+\.\d+\.x|v\d+\.x|\d+\.\d+\.x)$', re.I)
QUOTED = r'(?:`{1,2}([^`\s]+)`{1,2}|\'([^\'\s]+)\'|"([^"\s]+)"|\u2018([^\u2019\s]+)\u2019)'
BRANCHY = r'(?=[\w./-]*[A-Za-z])([\w.]*[-/_\d][\w./-]*[\w])'
# words that name a branch of code, not of git ("the not-taken branch")
CODE_BRANCH = re.compile(r'(?:taken|path|hot|cold|error|else|likely|fall|through|'
                         r'return|exit|retry|miss|hit|free|less|case|default)', re.I)
BRANCH_RES = [
    re.compile(r'\bbranch(?:es)?\s+' + QUOTED, re.I),           # branch 'x'
    re.compile(QUOTED + r'\s+branch\b(?!-)', re.I),              # `x` branch
    re.compile(r'\bbranch\s+' + BRANCHY + r'(?![\w/-])', re.I),  # branch x-y
    re.compile(r'(?<![\w./-])' + BRANCHY + r'\s+branch\b(?!-)', re.I),  # x-y branch
]
JOURNAL_RES = [
    re.compile(r'\bthe\s+brief\b(?=\s*(?:\Z|[^\w\s])|[ \t]*\n[ \t]*\n|\'s\b|\s+(?:says|said|asks|asked|'
               r'wants|wanted|requires|required|demands|demanded|calls|called|is|was|'
               r'has|had|of|for|to|in|on|that|which)\b)', re.I),
    re.compile(r'\bthis\s+session\b', re.I),
    re.compile(r'\(later\)', re.I),
    re.compile(r'\bNote\s+20\d\d', re.I),
]


def check_text_rules(page, text):
    urls = url_spans(text)

    def report(rule, m):
        fail(page.rel, page.line_of(m.start()), rule, m.group(0))

    for m in DATE_RE.finditer(text):
        if not in_spans(urls, *m.span()):
            report('date', m)
    for m in ISSUE_RE.finditer(text):
        if not in_spans(urls, *m.span()):
            report('issue', m)
    seen = set()
    for m in ISSUE_BRANCH_RE.finditer(text):
        if not in_spans(urls, *m.span()):
            seen.add(m.start())
            report('branch', m)
    for rx in BRANCH_RES:
        for m in rx.finditer(text):
            name = next(g for g in m.groups() if g is not None)
            if ALLOWED_BRANCH.match(name) or in_spans(urls, *m.span()):
                continue
            if rx in BRANCH_RES[2:] and CODE_BRANCH.search(name):
                continue
            if any(m.start() <= s < m.end() for s in seen):
                continue
            seen.add(m.start())
            report('branch', m)
    for rx in JOURNAL_RES:
        for m in rx.finditer(text):
            report('journal', m)


# --------------------------------------------------------------- code regions

def rst_code_lines(page):
    """Line numbers inside rst literal blocks (after ::) and code directives."""
    code = set()
    lines = page.lines
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        s = line.rstrip()
        is_dir = re.match(r'^\s*\.\. (?:code-block|code|sourcecode|parsed-literal|'
                          r'highlight|literalinclude|raw)::', s)
        other_dir = re.match(r'^\s*\.\. [\w-]+::', s) and not is_dir
        if (s.endswith('::') and not other_dir) or is_dir:
            base = len(line) - len(line.lstrip())
            j = i + 1
            # directive options / blank lines
            while j < n and lines[j].strip() == '' or (
                    j < n and is_dir and re.match(r'^\s+:\w[\w-]*:', lines[j])):
                j += 1
            while j < n:
                if lines[j].strip() == '':
                    j += 1
                    continue
                ind = len(lines[j]) - len(lines[j].lstrip())
                if ind <= base:
                    break
                code.add(j + 1)
                j += 1
            i = j if j > i + 1 else i + 1
            continue
        i += 1
    return code


def md_fence_close(line, fence):
    """Does line close a fenced code block opened by fence (``` or ~~~...)?"""
    m = re.match(r'^\s{0,3}(`{3,}|~{3,})\s*$', line)
    return bool(m) and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)


def md_fenced(lines):
    """The 1-based numbers of LINES inside fenced code, fences included."""
    code = set()
    fence = None
    for i, line in enumerate(lines, 1):
        if fence:
            code.add(i)
            if md_fence_close(line, fence):
                fence = None
            continue
        m = re.match(r'^\s{0,3}(`{3,}|~{3,})', line)
        if m:
            fence = m.group(1)
            code.add(i)
    return code


def md_code_lines(page):
    return md_fenced(page.lines)


# --------------------------------------------------------------- links

def md_slugs(path, cache={}):
    if path in cache:
        return cache[path]
    try:
        with open(path, encoding='utf-8') as f:
            text = f.read()
    except OSError:
        cache[path] = set()
        return cache[path]
    lines = text.split('\n')
    code = md_fenced(lines)
    heads = []
    for i, line in enumerate(lines):
        if i + 1 in code:
            continue
        h = re.match(r'^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$', line)
        if h:
            heads.append(h.group(1))
        elif i > 0 and re.match(r'^\s{0,3}(=+|-+)\s*$', line) and lines[i - 1].strip() \
                and not re.match(r'^\s{0,3}([-*_]\s*){3,}$', lines[i - 1]) \
                and not lines[i - 1].lstrip().startswith(('|', '-', '*', '>')):
            heads.append(lines[i - 1].strip())
    slugs = set()
    counts = {}
    for h in heads:
        h = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', h)   # links: their text
        h = re.sub(r'<[^>]+>', '', h)                        # html tags
        h = h.replace('`', '')
        s = re.sub(r'[^\w\- ]', '', h.strip().lower()).replace(' ', '-')
        if s in counts:
            counts[s] += 1
            slugs.add('%s-%d' % (s, counts[s]))
        else:
            counts[s] = 0
            slugs.add(s)
    cache[path] = slugs
    return slugs


def is_url(target):
    return bool(re.match(r'^[a-zA-Z][a-zA-Z0-9+.-]*:', target)) or target.startswith('//')


class LinkChecker:
    def __init__(self, root):
        self.root = root
        self.docdir = os.path.join(root, 'Documentation')
        self.doc_basenames = {}
        for dp, dn, fn in os.walk(self.docdir):
            for f in fn:
                self.doc_basenames.setdefault(f, os.path.join(dp, f))

    def explicit(self, page, lineno, target, kind):
        """A link target: relative to the page's directory."""
        target = target.strip()
        if not target or is_url(target):
            return
        path, _, anchor = target.partition('#')
        if not path:
            if page.is_md and anchor:
                if anchor.lower() not in md_slugs(page.path):
                    fail(page.rel, lineno, 'link', '%s: no heading #%s in this page'
                         % (target, anchor))
            return
        if path.startswith('/'):
            full = os.path.join(self.root, path.lstrip('/'))
        else:
            full = os.path.normpath(os.path.join(page.dir, path))
        if not os.path.exists(full):
            fail(page.rel, lineno, 'link', '%s (%s): %s does not exist'
                 % (target, kind, os.path.relpath(full, self.root)))
            return
        if anchor and full.endswith('.md'):
            if anchor.lower() not in md_slugs(full):
                fail(page.rel, lineno, 'link', '%s: no heading #%s in %s'
                     % (target, anchor, os.path.relpath(full, self.root)))

    def doc(self, page, lineno, target):
        target = target.strip()
        m = re.match(r'^.*<([^<>]+)>$', target, re.S)
        if m:
            target = m.group(1).strip()
        base = self.docdir if target.startswith('/') else page.dir
        full = os.path.normpath(os.path.join(base, target.lstrip('/')))
        if not any(os.path.exists(full + ext) for ext in ('', '.rst', '.md')):
            fail(page.rel, lineno, 'link', ':doc:`%s`: %s.rst does not exist'
                 % (target, os.path.relpath(full, self.root)))

    def holds_pages(self, d):
        try:
            return any(f.endswith(('.rst', '.md')) for f in os.listdir(d))
        except OSError:
            return False

    def mention(self, rel, pagedir, lineno, name):
        name = name.rstrip('.')
        bases = [pagedir, self.docdir, self.root]
        if any(os.path.isfile(os.path.normpath(os.path.join(b, name))) for b in bases):
            return
        if '/' not in name:
            if name in self.doc_basenames or re.search(r'\.\d\w*\.md$', name):
                return  # a page under Documentation/; a man page's source upstream
        elif not name.startswith(('Documentation/', './', '../')):
            # another project's path (UCX's docs/..., libfabric's man/...):
            # checked only where it names a directory of ours with pages
            dirs = [os.path.normpath(os.path.join(b, os.path.dirname(name))) for b in bases]
            if not any(self.holds_pages(d) for d in dirs):
                return
        fail(rel, lineno, 'link', 'mentions %s, which does not exist' % name)


MENTION_RE = re.compile(
    r'(?<![\w./<>*$%{}\\-])((?:\.\.?/)*(?:[\w-][\w.-]*/)*[\w-][\w.-]*\.(?:rst|md))(?![\w/*<>-])')


def check_links(lc, page, text, code_lines):
    explicit_spans = []
    if page.is_md:
        # inline code spans hide links, not mentions
        nocode = re.sub(r'`[^`\n]*`', lambda m: ' ' * len(m.group(0)), text)
        for m in re.finditer(r'!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?'
                             r'(?:\s+"[^"]*")?\s*\)', nocode):
            ln = page.line_of(m.start())
            if ln in code_lines:
                continue
            explicit_spans.append(m.span())
            lc.explicit(page, page.line_of(m.start(1)), m.group(1), 'md link')
        for m in re.finditer(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$',
                             nocode, re.M):
            if page.line_of(m.start()) in code_lines:
                continue
            explicit_spans.append(m.span())
            lc.explicit(page, page.line_of(m.start(1)), m.group(1), 'md reference')
    else:
        for m in re.finditer(r'`[^`<]*?<([^<>`]+)>`__?', text, re.S):
            target = re.sub(r'\s+', '', m.group(1))
            if page.line_of(m.start()) in code_lines:
                continue
            explicit_spans.append(m.span())
            if target.endswith('_'):
                continue  # a reference to a named target
            lc.explicit(page, page.line_of(m.start(1)), target, 'rst link')
        for m in re.finditer(r'^\s*\.\. _[^:]+:\s+(\S+)\s*$', text, re.M):
            if page.line_of(m.start()) in code_lines or m.group(1).endswith('_'):
                continue
            explicit_spans.append(m.span())
            lc.explicit(page, page.line_of(m.start(1)), m.group(1), 'rst target')
        for m in re.finditer(r'^\s*\.\. (image|figure|include|literalinclude)::\s+(\S+)',
                             text, re.M):
            if m.group(2).startswith('<'):
                continue  # standard docutils include like <isonum.txt>
            explicit_spans.append(m.span())
            lc.explicit(page, page.line_of(m.start(2)), m.group(2), m.group(1))
        for m in re.finditer(r':doc:`([^`]+)`', text):
            explicit_spans.append(m.span())
            lc.doc(page, page.line_of(m.start(1)), m.group(1))
    urls = url_spans(text)
    for m in MENTION_RE.finditer(text):
        ln = page.line_of(m.start())
        if ln in code_lines or in_spans(urls, *m.span()) or in_spans(explicit_spans, *m.span()):
            continue
        lc.mention(page.rel, page.dir, ln, m.group(1))


def man_text(line):
    line = re.sub(r'\\f(?:\[[^\]]*\]|\(..|.)', '', line)
    line = line.replace('\\-', '-').replace('\\&', '').replace('\\(hy', '-')
    line = line.replace('\\e', '\\').replace('\\ ', ' ').replace('\\%', '')
    return line


def check_man_mentions(lc, root, path):
    rel = os.path.relpath(path, root)
    with open(path, encoding='utf-8', errors='replace') as f:
        lines = f.read().split('\n')
    text = '\n'.join(man_text(l) if not l.startswith(('.\\"', '\\"')) else '' for l in lines)
    urls = url_spans(text)
    starts = [0] + [m.end() for m in re.finditer('\n', text)]
    for m in MENTION_RE.finditer(text):
        if in_spans(urls, *m.span()):
            continue
        lc.mention(rel, os.path.join(root, 'Documentation'),
                   bisect.bisect_right(starts, m.start()), m.group(1))


# --------------------------------------------------------------- parsers

def check_docutils(page):
    try:
        import docutils.core
        import docutils.utils
    except ImportError:
        fail(page.rel, 1, 'docutils', 'python3-docutils is not installed '
             '(scripts/deps.txt has it)')
        return
    warnings = io.StringIO()
    try:
        docutils.core.publish_doctree(
            page.text, source_path=page.path,
            settings_overrides={'report_level': 2, 'halt_level': 5,
                                'warning_stream': warnings})
    except docutils.utils.SystemMessage as e:
        warnings.write(str(e) + '\n')
    out = warnings.getvalue()
    seen = set()
    entries = re.findall(r'^.*?:(\d+): \((\w+/\d)\) (.*)$', out, re.M)
    for line, level, msg in entries:
        if (line, msg) not in seen:
            seen.add((line, msg))
            fail(page.rel, int(line), 'docutils', level + ' ' + msg)
    if out.strip() and not entries:
        fail(page.rel, 1, 'docutils', out.strip().split('\n')[0])


def check_groff(root, path):
    rel = os.path.relpath(path, root)
    try:
        r = subprocess.run(['groff', '-man', '-ww', '-z', path], capture_output=True,
                           text=True, env=dict(os.environ, LC_ALL='C'))
    except FileNotFoundError:
        fail(rel, 1, 'groff', 'groff is not installed')
        return
    if r.returncode or r.stderr:
        out = r.stderr.strip() or 'exit status %d' % r.returncode
        for l in out.split('\n'):
            m = re.search(r':(\d+): (.*)', l)
            fail(rel, int(m.group(1)) if m else 1, 'groff', m.group(2) if m else l)


# --------------------------------------------------------------- main

def check_versions(root, mans):
    def first(rel, pattern):
        path = os.path.join(root, rel)
        with open(path, encoding='utf-8') as f:
            for n, line in enumerate(f, 1):
                m = re.search(pattern, line)
                if m:
                    return n, m.group(1)
        fail(rel, 1, 'version', 'no line matching %s' % pattern)
        return None, None

    _, v = first('meson.build', r"^\s*version\s*:\s*'([^']+)'")
    if not v:
        return
    for rel, pattern in (('debian/changelog', r'^ummunot \(([^)]+)\)'),
                         ('dkms.conf', r'^PACKAGE_VERSION="([^"]+)"'),
                         ('kmod/ummunot_main.c', r'#define UMMUNOT_MODULE_VERSION\s+"([^"]+)"')):
        n, got = first(rel, pattern)
        if got and got != v:
            fail(rel, n, 'version', 'states %s, meson.build %s' % (got, v))
    for path in mans:
        rel = os.path.relpath(path, root)
        want = ('libummunot ' if rel.startswith(os.path.join('man', 'man3') + os.sep)
                else 'ummunot ') + v
        with open(path, encoding='utf-8') as f:
            for n, line in enumerate(f, 1):
                if line.startswith('.TH '):
                    words = shlex.split(line)
                    got = words[4] if len(words) > 4 else ''
                    if got != want:
                        fail(rel, n, 'version', '.TH source "%s", want "%s"' % (got, want))
                    break


def pages_of(root):
    found = []
    for dp, dn, fn in os.walk(os.path.join(root, 'Documentation')):
        dn.sort()
        for f in sorted(fn):
            if f.endswith(('.rst', '.md')):
                found.append(os.path.join(dp, f))
    readme = os.path.join(root, 'README.md')
    if os.path.exists(readme):
        found.append(readme)
    return found


def main(argv):
    args = argv[1:]
    if '--list-rules' in args:
        doc = __doc__
        print(doc[doc.index('Rules'):].rstrip())
        return 0
    if len(args) != 1 or args[0].startswith('-'):
        print('usage: check-docs.py [--list-rules] SOURCE_ROOT')
        return 2
    root = os.path.abspath(args[0])
    pages = pages_of(root)
    mans = sorted(glob.glob(os.path.join(root, 'man', 'man[1-8]', '*.[1-8]'))
                  + glob.glob(os.path.join(root, 'adapters', '*', 'man', '*.[1-8]')))
    lc = LinkChecker(root)
    nblocks = 0
    for path in pages:
        page = Page(root, path)
        under_doc = page.rel.startswith('Documentation' + os.sep)
        if under_doc and len(page.lines) - (page.lines[-1] == '') > DOC_LIMIT:
            fail(page.rel, DOC_LIMIT + 1, 'length', '%d lines (at most %d)'
                 % (len(page.lines) - (page.lines[-1] == ''), DOC_LIMIT))
        if not page.is_md:
            check_docutils(page)
        blocks = generated_blocks(page)
        nblocks += len(blocks)
        text = page.text
        for first, last, _, _ in blocks:
            text = blank_lines(text, first, last)
        check_text_rules(page, text)
        code = md_code_lines(page) if page.is_md else rst_code_lines(page)
        check_links(lc, page, text, code)
        check_generated(root, page, blocks)
    for path in mans:
        check_groff(root, path)
        check_man_mentions(lc, root, path)
    check_versions(root, mans)

    bad_files = len({f[0] for f in failures})
    print('check-docs: %d pages, %d man pages, %d generated blocks: %d failures in %d files'
          % (len(pages), len(mans), nblocks, len(failures), bad_files))
    if not pages or not mans:
        print('check-docs: found no pages: wrong SOURCE_ROOT?')
        return 1
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
