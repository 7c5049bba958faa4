#!/usr/bin/env python3
"""md2man.py: turns weir's Markdown manual sources into man(7) pages.

Principle: the manuals are written once, in Markdown, next to the code
(docs/weir.8.md, docs/weir.conf.5.md, which includes docs/config.md), and
this converter is the only thing between them and the man pages, so the man
pages cannot drift from the docs.

Why our own converter rather than one from Debian's archive: go-md2man 2.0.2
(bookworm) renders our pipe tables wider than 80 columns (groff warns),
turns links inside table cells into stray rows and folds a code block that
follows a list into the last list item; ronn has no tables; pandoc would do
but is a 170 MB build dependency for two pages. This file needs
only python3 (the tests already need it) and knows exactly the Markdown
subset our docs use:

  # H1 -> .SH (upper-cased), ## and deeper -> .SS
  paragraphs; ``` fenced code ``` (tabs become 4 spaces)
  - bullets and 1. numbered lists, nested by indentation
  term line followed by ":   definition" (pandoc definition lists) -> .TP
  | pipe | tables | -> tbl(1), long columns as wrapping text blocks
  `code` -> bold, **bold**, *italic*, [text](url), [text](#anchor) -> text
  <!-- include FILE -->  inserts FILE (relative to the including file)
                         without its H1 title, every heading one level up
  other <!-- comments --> starting a line are dropped (up to the -->)

Anything else is passed through as text, escaped for roff, never as roff
requests, so a stray "." or "\\" in the docs cannot break a page.

    md2man.py --name weir --section 8 --version 0.1.0 [--date YYYY-MM-DD]
              [--manual TITLE] SOURCE.md > weir.8

The date defaults to $SOURCE_DATE_EPOCH (dpkg-buildpackage sets it from
debian/changelog) so package builds are reproducible, else to the newest
source file's modification time.
"""

import argparse
import datetime
import os
import re
import sys

# ---- reading ---------------------------------------------------------------

INCLUDE_RE = re.compile(r"^<!--\s*include\s+(\S+)\s*-->\s*$")
COMMENT_RE = re.compile(r"^<!--.*-->\s*$")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
ITEM_RE = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$")
FENCE_RE = re.compile(r"^\s*```")


def read_source(path, seen, mtimes):
    """Returns the lines of <path> with its includes expanded (recursively;
    a file including itself is an error). <mtimes> collects the mtimes."""
    path = os.path.normpath(path)
    if path in seen:
        sys.exit("md2man: %s includes itself" % path)
    mtimes.append(os.stat(path).st_mtime)
    with open(path, encoding="utf-8") as f:
        lines = f.read().expandtabs(4).splitlines()
    out = []
    in_fence = in_comment = False
    for line in lines:
        if in_comment:
            in_comment = "-->" not in line
            continue
        if FENCE_RE.match(line):
            in_fence = not in_fence
        if not in_fence and line.startswith("<!--") and "-->" not in line:
            in_comment = True
            continue
        m = INCLUDE_RE.match(line) if not in_fence else None
        if m:
            inc = os.path.join(os.path.dirname(path), m.group(1))
            out.extend(raise_headings(read_source(inc, seen | {path}, mtimes)))
        elif not in_fence and COMMENT_RE.match(line):
            continue
        else:
            out.append(line)
    return out


def raise_headings(lines):
    """An included document: drop its H1 title, move every heading up."""
    out = []
    in_fence = False
    dropped_title = False
    for line in lines:
        if FENCE_RE.match(line):
            in_fence = not in_fence
        m = HEADING_RE.match(line) if not in_fence else None
        if m and len(m.group(1)) == 1 and not dropped_title:
            dropped_title = True
            continue
        if m and len(m.group(1)) > 1:
            line = line[1:]
        out.append(line)
    return out


# ---- inline text -----------------------------------------------------------


def esc(text):
    """Plain text for roff: backslashes and the few risky characters."""
    return text.replace("\\", "\\e")


def code(text, font):
    # literal text: bold, with real minus signs (.nh: never hyphenated)
    return "\\fB" + esc(text).replace("-", "\\-") + "\\f" + font


INLINE_RE = re.compile(
    r"(?P<code>`+)(?P<ctext>.+?)(?P=code)"
    r"|\*\*(?P<bold>\S(?:.*?\S)?)\*\*"
    r"|(?<![\w*])\*(?P<ital>[^\s*](?:[^*]*?[^\s*])?)\*(?![\w*])"
    r"|\[(?P<ltext>[^\]]+)\]\((?P<url>[^)\s]+)\)"
    r"|\\(?P<escaped>[\\`*_{}\[\]()#+\-.!|<>])"
)


def inline(text, font="R"):
    """Markdown inline markup to roff, returning to <font> after each run."""
    out = []
    pos = 0
    for m in INLINE_RE.finditer(text):
        out.append(esc(text[pos:m.start()]))
        pos = m.end()
        if m.group("code"):
            out.append(code(m.group("ctext").strip(), font))
        elif m.group("bold") is not None:
            out.append("\\fB" + inline(m.group("bold"), "B") + "\\f" + font)
        elif m.group("ital") is not None:
            out.append("\\fI" + inline(m.group("ital"), "I") + "\\f" + font)
        elif m.group("ltext") is not None:
            out.append(inline(m.group("ltext"), font))
            url = m.group("url")
            if not url.startswith("#"):
                out.append(" <" + esc(url) + ">")
        else:
            out.append(esc(m.group("escaped")))
    out.append(esc(text[pos:]))
    return "".join(out)


def text_lines(lines, font="R"):
    """Lines of running text: each rendered, none starting a roff request."""
    out = []
    for line in lines:
        line = inline(line.strip(), font)
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return out


def quote_arg(text):
    return '"' + text.replace('"', '\\(dq') + '"'


# ---- blocks ----------------------------------------------------------------


class Converter:
    def __init__(self, lines):
        self.lines = lines
        self.i = 0
        self.out = []
        self.uses_tbl = False
        self.section = ""

    def peek(self):
        return self.lines[self.i] if self.i < len(self.lines) else None

    def run(self):
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if not line.strip():
                self.i += 1
            elif FENCE_RE.match(line):
                self.fence(0)
            elif HEADING_RE.match(line):
                self.heading()
            elif line.lstrip().startswith("|"):
                self.table()
            elif ITEM_RE.match(line):
                self.list_block(len(ITEM_RE.match(line).group(1)))
            elif self.is_term(self.i):
                self.deflist()
            else:
                self.paragraph(".PP")
        return self.out

    def heading(self):
        m = HEADING_RE.match(self.lines[self.i])
        self.i += 1
        title = m.group(2)
        if len(m.group(1)) == 1:
            self.section = title.upper()
            plain = re.sub(r"[`*]", "", title).upper()
            self.out.append(".SH " + quote_arg(inline(plain)))
        else:
            self.out.append(".SS " + quote_arg(inline(title)))

    def paragraph_lines(self, indent=None):
        """Consumes a paragraph: lines up to a blank line or another block."""
        para = []
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if not line.strip() or FENCE_RE.match(line) or HEADING_RE.match(line):
                break
            if line.lstrip().startswith("|") or ITEM_RE.match(line):
                break
            if para and line.lstrip().startswith(":"):
                break
            if indent is not None and para == [] and len(line) - len(line.lstrip()) < indent:
                break
            para.append(line)
            self.i += 1
        return para

    def paragraph(self, macro):
        para = self.paragraph_lines()
        self.out.append(macro)
        if self.section == "NAME":
            # "weir - what it is": lexgrog(1) and whatis want "weir \- ..."
            name, _, what = " ".join(p.strip() for p in para).partition(" - ")
            self.out.append(inline(name) + " \\- " + inline(what))
            return
        self.out.extend(text_lines(para))

    def fence(self, indent):
        self.i += 1  # the opening ```
        body = []
        while self.i < len(self.lines) and not FENCE_RE.match(self.lines[self.i]):
            body.append(self.lines[self.i][indent:] if self.lines[self.i][:indent].isspace() else self.lines[self.i])
            self.i += 1
        self.i += 1  # the closing ```
        self.out += [".PP", ".RS 4", ".nf"]
        for line in body:
            line = esc(line)
            self.out.append("\\&" + line if line.startswith((".", "'")) else line)
        self.out += [".fi", ".RE"]

    # A list is a run of items; an item's text continues on the following
    # lines until a blank line, and after a blank line on lines indented
    # past the item's marker (a second paragraph, or a nested list).
    def list_block(self, indent):
        while True:
            line = self.peek()
            m = ITEM_RE.match(line) if line is not None else None
            if not m or len(m.group(1)) != indent:
                return
            marker = m.group(2)
            tag = "\\(bu" if marker in "-*+" else marker[:-1] + "."
            width = 2 if marker in "-*+" else 4
            content_indent = indent + len(m.group(0)) - len(m.group(1)) - len(m.group(3))
            self.lines[self.i] = " " * content_indent + m.group(3)
            self.out.append(".IP %s %d" % (tag, width))
            self.out.extend(text_lines(self.paragraph_lines()))
            self.item_rest(indent, content_indent)

    def item_rest(self, indent, content_indent):
        while True:
            j = self.i
            while j < len(self.lines) and not self.lines[j].strip():
                j += 1
            if j >= len(self.lines):
                self.i = j
                return
            line = self.lines[j]
            lead = len(line) - len(line.lstrip())
            m = ITEM_RE.match(line)
            if m and lead > indent:
                self.i = j
                self.out.append(".RS")
                self.list_block(lead)
                self.out.append(".RE")
            elif lead >= content_indent and not m:
                self.i = j
                if FENCE_RE.match(line):
                    self.out.append(".RS")
                    self.fence(lead)
                    self.out.append(".RE")
                else:
                    self.out.append(".IP")
                    self.out.extend(text_lines(self.paragraph_lines()))
            else:
                return

    def is_term(self, i):
        return (
            i + 1 < len(self.lines)
            and self.lines[i].strip() != ""
            and not self.lines[i].startswith((" ", ":"))
            and self.lines[i + 1].startswith(":")
        )

    def deflist(self):
        while self.i < len(self.lines) and self.is_term(self.i):
            self.out.append(".TP")
            self.out.extend(text_lines([self.lines[self.i]]))
            self.i += 1
            first = True
            while True:
                line = self.peek()
                if line is not None and line.startswith(":"):
                    self.lines[self.i] = "    " + line[1:].lstrip()
                elif line is None or not line.strip():
                    j = self.i
                    while j < len(self.lines) and not self.lines[j].strip():
                        j += 1
                    if j < len(self.lines) and self.lines[j].startswith("    "):
                        self.i = j
                        continue
                    self.i = j
                    break
                elif not line.startswith("    "):
                    break
                if self.peek().strip().startswith("```"):
                    self.out.append(".RS 0")
                    self.fence(4)
                    self.out.append(".RE")
                    continue
                if ITEM_RE.match(self.peek()):
                    self.list_block(len(ITEM_RE.match(self.peek()).group(1)))
                    continue
                if not first:
                    self.out.append(".IP")
                self.out.extend(text_lines(self.paragraph_lines()))
                first = False

    # Pipe tables become tbl tables. If a table is too wide for 80 columns,
    # its widest columns that can wrap become expanding columns of text
    # blocks, so tbl wraps them to whatever width man renders at; if even
    # that cannot fit (a long unbreakable word), the table is written as a
    # list of records (.TP), which fits any width.
    FITS = 72  # characters a table may take at MANWIDTH=80 (after the indent)

    def table(self):
        rows = []
        while self.i < len(self.lines) and self.lines[self.i].lstrip().startswith("|"):
            rows.append(split_row(self.lines[self.i]))
            self.i += 1
        if len(rows) >= 2 and all(re.fullmatch(r"\s*:?-+:?\s*", c) for c in rows[1]):
            head, body = rows[0], rows[2:]
        else:
            head, body = None, rows
        ncol = max(len(r) for r in rows)
        for r in rows:
            r.extend([""] * (ncol - len(r)))
        cols = [[visible(r[c]).strip() for r in ([head] if head else []) + body] for c in range(ncol)]
        natural = [max(len(t) for t in col) for col in cols]
        minw = [max(len(w) for t in col for w in t.split() or [""]) for col in cols]
        room = self.FITS - (3 * ncol + 1)
        long_col = [False] * ncol
        if sum(natural) > room:
            fits = False
            for c in sorted(range(ncol), key=lambda k: -natural[k]):
                if minw[c] == natural[c]:
                    continue  # cannot wrap
                long_col[c] = True
                fixed = sum(natural[k] for k in range(ncol) if not long_col[k])
                share = (room - fixed) // sum(long_col)
                if all(minw[k] <= share for k in range(ncol) if long_col[k]) and share >= 8:
                    fits = True
                    break
            # a column wider than the share the wrapped ones get wraps too
            for c in sorted(range(ncol), key=lambda k: -natural[k]):
                if fits and not long_col[c] and minw[c] < natural[c]:
                    fixed = sum(natural[k] for k in range(ncol) if not long_col[k])
                    share = (room - fixed) // sum(long_col)
                    if natural[c] > share and minw[c] <= (room - fixed + natural[c]) // (sum(long_col) + 1):
                        long_col[c] = True
            if not fits:
                self.records(head, body, ncol)
                return
        self.uses_tbl = True
        self.out += [".PP", ".TS", "allbox;"]
        if head:
            self.out.append(" ".join("l" for _ in range(ncol)))
        self.out.append(" ".join("lx" if long_col[c] else "l" for c in range(ncol)) + ".")
        if head:
            self.out.append("\t".join("\\fB" + inline(c.strip(), "B") + "\\fR" for c in head))
        for r in body:
            cells = []
            for c in range(ncol):
                t = inline(r[c].strip())
                if t.startswith((".", "'")):
                    t = "\\&" + t
                cells.append("T{\n" + t + "\nT}" if long_col[c] and t else t)
            self.out.append("\t".join(cells))
        self.out += [".TE", ".sp"]

    def records(self, head, body, ncol):
        """A table as records: the first cell as the tag, then "name: value"
        for the other cells, named by the header."""
        names = [h.strip() for h in head] if head else [""] * ncol
        for r in body:
            self.out.append(".TP")
            self.out.extend(text_lines([r[0]]))
            parts = []
            for c in range(1, ncol):
                if r[c].strip():
                    parts.append((names[c] + ": " if names[c] else "") + r[c].strip())
            self.out.extend(text_lines(["; ".join(parts) if parts else ""]))


def visible(cell):
    """Roughly what a table cell shows: its text without Markdown markup."""
    cell = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", cell)
    return re.sub(r"[`*]", "", cell)


def split_row(line):
    """Cells of a pipe-table row; a | inside `code` or escaped as \\| stays."""
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    cells, cur, in_code, k = [], "", False, 0
    while k < len(line):
        ch = line[k]
        if ch == "\\" and k + 1 < len(line) and line[k + 1] == "|":
            cur += "|"
            k += 2
            continue
        if ch == "`":
            in_code = not in_code
        if ch == "|" and not in_code:
            cells.append(cur)
            cur = ""
        else:
            cur += ch
        k += 1
    cells.append(cur)
    return cells


# ---- main ------------------------------------------------------------------

MANUALS = {"1": "User Commands", "5": "File Formats Manual", "8": "System Manager's Manual"}


def main():
    ap = argparse.ArgumentParser(description="Markdown to man(7), for weir's manuals")
    ap.add_argument("--name", required=True)
    ap.add_argument("--section", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--date")
    ap.add_argument("--manual")
    ap.add_argument("source")
    a = ap.parse_args()

    mtimes = []
    lines = read_source(a.source, frozenset(), mtimes)
    body = Converter(lines)
    out = body.run()

    if a.date:
        date = a.date
    else:
        epoch = os.environ.get("SOURCE_DATE_EPOCH")
        stamp = int(epoch) if epoch else int(max(mtimes))
        date = datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).strftime("%Y-%m-%d")
    manual = a.manual or MANUALS.get(a.section, "")
    head = []
    if body.uses_tbl:
        head.append("'\\\" t")
    head.append('.\\" Generated by packaging/md2man.py from %s: edit that, not this.' % a.source)
    head.append(
        ".TH %s %s %s %s %s"
        % (
            quote_arg(a.name.upper()),
            quote_arg(a.section),
            quote_arg(date),
            quote_arg("weir " + a.version),
            quote_arg(manual),
        )
    )
    # left-adjusted and unhyphenated, as most generated pages are: names of
    # keys and paths read better whole, and narrow table cells need no
    # stretching (which groff warns about)
    head += [".nh", ".ad l"]
    sys.stdout.write("\n".join(head + out) + "\n")


if __name__ == "__main__":
    main()
