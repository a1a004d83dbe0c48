"""How long the docs' sentences are, as a reader meets them: the prose of a Markdown page split into
sentences (code blocks, tables, headings and markup left out), and the words of each counted, so a page
kept to a reader's length stays so. `python -m yuniplace.docsgen.prose [PAGE...]` prints each page's
figures; a unit test holds the guides to PLAIN_MEAN_WORDS and PLAIN_MAX_WORDS."""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from yuniplace.docsgen.references import ROOT

PLAIN_MEAN_WORDS = 30  # a page's sentences, on average
PLAIN_MAX_WORDS = 45  # its longest

FENCE = re.compile(r"^\s*(```|~~~)")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")
SKIPPED_LINE = re.compile(r"^\s*(?:#|\||<|--8<--|!!!|\?\?\?|\*\*\*|---)")
# Abbreviations whose period ends no sentence.
ABBREVIATIONS = re.compile(r"\b(?:e\.g|i\.e|etc|vs|cf)\.", re.IGNORECASE)
# A sentence ends at . ! or ? (a closing bracket or quote may follow) before a blank and a word: the
# docs begin sentences with lower-case names too (yuniplace, kubectl, kwok).
SENTENCE_END = re.compile(r"(?<=[.!?])[)\"']?\s+(?=[A-Za-z0-9\"'(`*\[])")


@dataclass(frozen=True)
class Prose:
    """One page's sentences, each as its words."""

    page: str
    sentences: tuple[tuple[str, ...], ...]

    @property
    def mean_words(self) -> float:
        return statistics.fmean(len(s) for s in self.sentences) if self.sentences else 0.0

    @property
    def longest(self) -> tuple[str, ...]:
        return max(self.sentences, key=len, default=())

    def over(self, words: int) -> list[str]:
        """The sentences longer than `words`, as text."""
        return [" ".join(s) for s in self.sentences if len(s) > words]


def paragraphs(markdown: str) -> Iterator[str]:
    """The page's prose, a paragraph or list item at a time: fenced code, tables, headings, HTML,
    snippets and admonition titles left out."""
    block: list[str] = []
    fenced = False
    for line in re.sub(r"<!--.*?-->", "", markdown, flags=re.DOTALL).splitlines():
        if FENCE.match(line):
            fenced = not fenced
            line = ""
        if fenced or SKIPPED_LINE.match(line) or not line.strip() or LIST_ITEM.match(line):
            if block:
                yield " ".join(block)
            block = []
            if not fenced and LIST_ITEM.match(line):
                block = [LIST_ITEM.sub("", line).strip()]
            continue
        block.append(line.strip())
    if block:
        yield " ".join(block)


def plain_text(paragraph: str) -> str:
    """A paragraph as read: a code span one word, a link its text, emphasis and tags gone."""
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", paragraph)
    text = re.sub(r"`[^`]*`", "CODE", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("**", "").replace("__", "")
    return ABBREVIATIONS.sub(lambda m: m.group(0).replace(".", ""), text)


def sentences(markdown: str) -> list[tuple[str, ...]]:
    found = []
    for paragraph in paragraphs(markdown):
        for sentence in SENTENCE_END.split(plain_text(paragraph)):
            words = tuple(word for word in sentence.split() if re.search(r"\w", word))
            if words:
                found.append(words)
    return found


def measure(path: Path) -> Prose:
    name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    return Prose(name, tuple(sentences(path.read_text())))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m yuniplace.docsgen.prose", description=__doc__)
    parser.add_argument("pages", nargs="*", type=Path, help="Markdown pages (default: every page under docs/)")
    parser.add_argument("--show", action="store_true", help=f"also print the sentences over {PLAIN_MAX_WORDS} words")
    args = parser.parse_args(argv)
    pages = args.pages or sorted((ROOT / "docs").rglob("*.md"))
    print(f"{'page':<48} {'sentences':>9} {'mean':>5} {'max':>4} {f'>{PLAIN_MAX_WORDS}':>4}")
    for path in pages:
        prose = measure(path.resolve())
        over = prose.over(PLAIN_MAX_WORDS)
        print(
            f"{prose.page:<48} {len(prose.sentences):>9} {prose.mean_words:>5.1f} {len(prose.longest):>4} "
            f"{len(over):>4}"
        )
        if args.show:
            for sentence in over:
                print(f"    {len(sentence.split())}: {sentence}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
