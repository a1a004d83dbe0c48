"""The docs a reader reads through are written in sentences of a reader's length: on each page, 30 words
a sentence on average and none over 45 (python -m yuniplace.docsgen.prose --show prints the figures and
the long ones). The reference pages, made from the code, and the benchmark reports are left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from yuniplace.docsgen import prose

DOCS = Path(__file__).resolve().parents[2] / "docs"
READ_THROUGH = sorted(
    [
        DOCS / "index.md",
        DOCS / "dialects.md",
        *(
            page
            for folder in ("getting-started", "concepts", "guides", "operations", "development")
            for page in (DOCS / folder).glob("*.md")
        ),
    ]
)


@pytest.mark.parametrize("page", READ_THROUGH, ids=lambda page: str(page.relative_to(DOCS)))
def test_sentences_are_of_a_readers_length(page: Path) -> None:
    measured = prose.measure(page)
    over = measured.over(prose.PLAIN_MAX_WORDS)
    assert not over, (
        f"{measured.page}: {len(over)} sentence(s) over {prose.PLAIN_MAX_WORDS} words; split them:\n"
        + "\n".join(f"  ({len(s.split())}) {s}" for s in over)
    )
    assert measured.mean_words <= prose.PLAIN_MEAN_WORDS, (
        f"{measured.page}: {measured.mean_words:.1f} words a sentence on average, over {prose.PLAIN_MEAN_WORDS}"
    )


def test_prose_is_what_a_reader_reads() -> None:
    page = """# A heading is no sentence

The gang starts. It waits for `kubectl get pods` (see [the guide](x.md)), e.g. a Job; yuniplace
counts it.

- A list item ends a sentence
- Another one. With two sentences.

| a table | is not prose |
| --- | --- |

```sh
code is not prose either. Nor this.
```
"""
    assert [" ".join(words) for words in prose.sentences(page)] == [
        "The gang starts.",
        "It waits for CODE (see the guide), eg a Job; yuniplace counts it.",
        "A list item ends a sentence",
        "Another one.",
        "With two sentences.",
    ]


def test_a_long_sentence_is_found(tmp_path: Path) -> None:
    page = tmp_path / "long.md"
    page.write_text(" ".join(["word"] * 50) + ". Short one.\n")
    measured = prose.measure(page)
    assert [len(s.split()) for s in measured.over(45)] == [50]
    assert measured.mean_words == 26.0
