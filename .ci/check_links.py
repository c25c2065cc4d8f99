#!/usr/bin/env python3
"""Checks the relative links of the repository's Markdown: README.md, ARCHITECTURE.md and docs/**/*.md.

Every relative link or image must name a file or folder that exists, and every `#anchor` must exist in its target:
a heading's slug or an explicit `id`/`name` attribute. Slugs are GitHub's (lower-case, punctuation removed, spaces
to '-', '-1', '-2', ... for repeated headings); for the pages of the book (docs/), a heading's anchor must also be
the id mdBook gives it, so the link works both on GitHub and in the built book: given the built book
(`--book DIR`), the id must be in the page's HTML; without it, mdBook's rule is applied to the heading. External links (http:, https:,
mailto:) are not followed: CI has no network but the package registries. Also checked: every page of docs/ is in
docs/SUMMARY.md, is linked from README.md, and has at most 300 lines of source.

Hand-written, with the standard library only, because no maintained checker does this job: mdbook-linkcheck
0.7.7 fails on mdBook 0.5's render context ("missing field `sections`"; its upstream fix is unreleased), its fork
mdbook-linkcheck2 follows mdBook 0.5 but, like it, checks only the chapters of the book (not README.md or
ARCHITECTURE.md) and does not check #anchors, and either would add a crate tree with an HTTP client to build in CI.

Usage: .ci/check_links.py [--book BUILT_BOOK_DIR] [REPO_ROOT]   (default root: the parent of this script's folder).
Exit 1 on any problem.
"""

import re
import sys
import unicodedata
from pathlib import Path

MAX_PAGE_LINES = 300

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
# [text](target "title") and ![alt](target); the target may be wrapped in <...>.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(\S+)")
HTML_ATTR_LINK = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""")
HTML_ID = re.compile(r"""\b(?:id|name)\s*=\s*["']([^"']+)["']""")
HTML_TAG = re.compile(r"<[^>]+>")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(text):
    """Yields (line number, line) for lines outside fenced code blocks, with inline code spans blanked."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)[0] * len(match.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            continue
        yield number, line


def heading_text(raw):
    """The text a heading renders as: inline code kept, links reduced to their text, HTML and emphasis removed."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    text = HTML_TAG.sub("", text)
    text = text.replace("`", "")
    text = re.sub(r"(\*{1,3}|_{1,3})(\S(?:.*?\S)?)\1", r"\2", text)
    return text


def github_slug(text):
    kept = []
    for ch in text.lower():
        category = unicodedata.category(ch)
        if category[0] in "LMN" or category == "Pc" or ch == "-":
            kept.append(ch)
        elif ch == " ":
            kept.append("-")
    return "".join(kept)


def mdbook_slug(text):
    kept = []
    for ch in text:
        if ch.isalnum() or ch in "_-":
            kept.append(ch.lower() if ch.isascii() else ch)
        elif ch.isspace():
            kept.append("-")
    return "".join(kept)


def unique(slugs):
    """GitHub's and mdBook's rule for repeated headings: the second gets '-1', the third '-2', ..."""
    seen, out = {}, []
    for slug in slugs:
        if slug in seen:
            seen[slug] += 1
            out.append(f"{slug}-{seen[slug]}")
        else:
            seen[slug] = 0
            out.append(slug)
    return out


class Anchors:
    def __init__(self, path):
        text = path.read_text(encoding="utf-8")
        headings = []
        self.explicit = set()
        for _, line in prose_lines(text):
            match = ATX_HEADING.match(line)
            if match:
                headings.append(heading_text(match.group(2)))
            self.explicit.update(HTML_ID.findall(line))
        self.github = set(unique(github_slug(h) for h in headings))
        self.mdbook = set(unique(mdbook_slug(h) for h in headings))


def links_of(text):
    """Yields (line number, target) for every link and image of a Markdown text, code excluded."""
    for number, line in prose_lines(text):
        prose = INLINE_CODE.sub(lambda m: "x" * len(m.group(0)), line)
        for match in INLINE_LINK.finditer(prose):
            yield number, match.group(1).strip("<>")
        match = REF_DEF.match(prose)
        if match:
            yield number, match.group(1).strip("<>")
        for target in HTML_ATTR_LINK.findall(prose):
            yield number, target


def html_ids(path):
    return set(HTML_ID.findall(path.read_text(encoding="utf-8"))) if path.is_file() else set()


def main():
    args = sys.argv[1:]
    book = None
    if args[:1] == ["--book"]:
        book = Path(args[1]).resolve()
        args = args[2:]
    root = Path(args[0] if args else Path(__file__).resolve().parent.parent).resolve()
    docs = root / "docs"
    pages = sorted(docs.rglob("*.md"))
    sources = [root / "README.md", root / "ARCHITECTURE.md"] + pages
    anchors_cache = {}
    problems = []
    checked = 0

    def anchors(path):
        if path not in anchors_cache:
            anchors_cache[path] = Anchors(path)
        return anchors_cache[path]

    for source in sources:
        if not source.is_file():
            problems.append(f"{source.relative_to(root)}: missing")
            continue
        where = source.relative_to(root)
        for number, target in links_of(source.read_text(encoding="utf-8")):
            if EXTERNAL.match(target) or target.startswith("//"):
                continue
            checked += 1
            path_part, _, fragment = target.partition("#")
            if path_part.startswith("/"):
                problems.append(f"{where}:{number}: {target}: absolute path; use a relative link")
                continue
            resolved = (source.parent / path_part).resolve() if path_part else source
            if root not in resolved.parents and resolved != root:
                problems.append(f"{where}:{number}: {target}: leaves the repository")
                continue
            if not resolved.exists():
                problems.append(f"{where}:{number}: {target}: no such file or folder")
                continue
            if not fragment:
                continue
            if resolved.suffix != ".md":
                if not re.fullmatch(r"L\d+(-L\d+)?", fragment):
                    problems.append(f"{where}:{number}: {target}: an anchor into a file that is not Markdown")
                continue
            found = anchors(resolved)
            if fragment in found.explicit:
                continue
            in_book = docs in resolved.parents
            if fragment not in found.github:
                problems.append(f"{where}:{number}: {target}: no heading or id '{fragment}' in {resolved.relative_to(root)}")
            elif in_book and book is not None:
                page = book / resolved.relative_to(docs).with_suffix(".html")
                if fragment not in html_ids(page):
                    problems.append(f"{where}:{number}: {target}: no id '{fragment}' in the built {page.relative_to(book)}")
            elif in_book and fragment not in found.mdbook:
                problems.append(f"{where}:{number}: {target}: '{fragment}' is GitHub's anchor but not mdBook's")

    summary = docs / "SUMMARY.md"
    readme = root / "README.md"
    if summary.is_file() and readme.is_file():
        listed = {(docs / t.partition("#")[0]).resolve() for _, t in links_of(summary.read_text(encoding="utf-8"))}
        from_readme = {(root / t.partition("#")[0]).resolve() for _, t in links_of(readme.read_text(encoding="utf-8"))
                       if not EXTERNAL.match(t)}
        for page in pages:
            name = page.relative_to(root)
            if page == summary:
                continue
            if page.resolve() not in listed:
                problems.append(f"{name}: not listed in docs/SUMMARY.md")
            if page.resolve() not in from_readme:
                problems.append(f"{name}: not linked from README.md (\"Where to read on\")")
    for page in pages:
        lines = page.read_text(encoding="utf-8").count("\n")
        if lines > MAX_PAGE_LINES:
            problems.append(f"{page.relative_to(root)}: {lines} lines, more than {MAX_PAGE_LINES}; split the page")

    for problem in problems:
        print(f"check_links: {problem}", file=sys.stderr)
    print(f"check_links: {checked} relative links in {len(sources)} files, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
