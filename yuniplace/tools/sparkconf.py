"""Spark settings as spark-submit receives them, from the three ways people write them down:

- a properties file (`spark-submit --properties-file F`, also `spark-defaults.conf`), read the way
  Java's `Properties.load` reads it: no shell quoting, so quotes stay part of a value;
- a shell script calling spark-submit with `--conf key=value` options, quoted the shell's way;
- a file of `--conf` lines meant to be pasted into a command line with `$(cat F)`. An unquoted
  `$(...)` splits its output at every space and keeps every quote, so a value with a space or
  quotes reaches spark-submit as something else than what is written: a stray word even becomes
  the application jar, and every option after it the application's arguments.

Each setting keeps its line, and each thing spark-submit would read differently from what its
author meant is a problem naming the line: that, not Spark's own error, is what the author needs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

ROLE_METADATA = re.compile(r"spark\.kubernetes\.(driver|executor)\.(annotation|label)\.(.+)$")
CONF_OPTIONS = ("--conf", "-c")
PROPERTIES_BLANKS = " \t\f"
PROPERTIES_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
MEMORY = re.compile(r"(\d+)([kmgt]?)b?")
MIB_PER_UNIT = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
MIN_OVERHEAD_MIB = 384
PROPERTIES_ADVICE = "write the settings to a properties file and pass it with spark-submit --properties-file"
SHELL_QUOTES_ADVICE = "the shell removes one level of quotes and spark-submit keeps the inner ones: remove them"


@dataclass(frozen=True)
class Setting:
    key: str
    value: str
    line: int


@dataclass
class SparkConf:
    """The settings of one file, in order (the last of a key wins, as in spark-submit), and the
    lines spark-submit would misread."""

    settings: list[Setting] = field(default_factory=list)
    problems: list[tuple[int, str]] = field(default_factory=list)

    def get(self, key: str) -> str | None:
        return next((s.value for s in reversed(self.settings) if s.key == key), None)


@dataclass(frozen=True)
class Word:
    text: str
    line: int


class UnclosedQuote(ValueError):
    def __init__(self, line: int, quote: str) -> None:
        super().__init__(f"the {quote} opened on this line is never closed")
        self.line = line


def pod_memory(memory: str | None, overhead: str | None, factor: float) -> str | None:
    """Spark's pod memory request: the JVM's memory plus its overhead, given or
    max(384Mi, factor × memory)."""
    if not memory:
        return None
    mib = _mib(memory)
    if mib is None:
        return None
    extra = (_mib(overhead) or 0) if overhead else max(MIN_OVERHEAD_MIB, math.floor(mib * factor))
    return f"{int(mib + extra)}Mi"


def _mib(size: str) -> float | None:
    match = MEMORY.fullmatch(size.strip().lower())
    return int(match.group(1)) * MIB_PER_UNIT[match.group(2) or "m"] if match else None


# -- properties files -------------------------------------------------------------------------------


def _continues(line: str) -> bool:
    """A natural line ending in an odd number of backslashes goes on on the next one."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    lines = re.split(r"\r\n|\r|\n", text)
    index = 0
    while index < len(lines):
        number, line = index + 1, lines[index].lstrip(PROPERTIES_BLANKS)
        index += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if index == len(lines):
                break
            line += lines[index].lstrip(PROPERTIES_BLANKS)
            index += 1
        yield number, line


def _unescape(raw: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(raw):
        char = raw[index]
        if char != "\\" or index + 1 == len(raw):
            out.append(char)
            index += 1
            continue
        escaped = raw[index + 1]
        if escaped == "u":
            digits = raw[index + 2 : index + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ValueError(f"malformed \\uxxxx escape: \\u{digits}")
            out.append(chr(int(digits, 16)))
            index += 6
        else:
            out.append(PROPERTIES_ESCAPES.get(escaped, escaped))
            index += 2
    return "".join(out)


def _key_and_value(line: str) -> tuple[str, str]:
    """The key ends at the first unescaped `=`, `:` or blank; one `=` or `:` may follow blanks."""
    end = 0
    while end < len(line) and line[end] not in "=:" + PROPERTIES_BLANKS:
        end += 2 if line[end] == "\\" else 1
    end = min(end, len(line))
    rest = line[end:].lstrip(PROPERTIES_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(PROPERTIES_BLANKS)
    return _unescape(line[:end]), _unescape(rest)


def read_properties(text: str) -> SparkConf:
    """A properties file as `spark-submit --properties-file` reads it (values trimmed, as Spark does)."""
    conf = SparkConf()
    for number, line in _logical_lines(text):
        try:
            key, value = _key_and_value(line)
        except ValueError as error:
            conf.problems.append((number, f"{error}: Java cannot load this file"))
            continue
        if key.startswith("-"):
            problem = (
                f"`{key}` is a command-line option: a properties file holds `key=value` lines, and spark-submit "
                "ignores this one (write it without the option)"
            )
            conf.problems.append((number, problem))
        elif not key.startswith("spark."):
            problem = (
                f"spark-submit ignores `{key}`: it reads only keys that start with `spark.` from a properties file"
            )
            conf.problems.append((number, problem))
        else:
            conf.settings.append(Setting(key, value.strip(), number))
    _check_quotes(conf, "a properties file takes a value as written, quotes included: remove them")
    return conf


# -- shell -----------------------------------------------------------------------------------------


def shell_words(text: str) -> list[Word]:
    """Words as a POSIX shell splits a command line before expanding anything: quotes and
    backslashes removed, `#` at a word's start comments out the rest of the line, a
    backslash-newline joins lines. Each word knows the line it starts on."""
    words: list[Word] = []
    current: list[str] | None = None
    start = line = 1
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and text[index + 1 : index + 2] == "\n":
            line += 1
            index += 2
            continue
        if char in " \t\n":
            if current is not None:
                words.append(Word("".join(current), start))
                current = None
            line += char == "\n"
            index += 1
            continue
        if current is None:
            if char == "#":
                end = text.find("\n", index)
                index = len(text) if end < 0 else end
                continue
            current, start = [], line
        if char == "\\":
            current.append(text[index + 1 : index + 2])
            index += 2
        elif char in "'\"":
            end = _closing_quote(text, index)
            if end < 0:
                raise UnclosedQuote(line, char)
            body = text[index + 1 : end]
            current.append(body if char == "'" else re.sub(r'\\([$`"\\])', r"\1", body.replace("\\\n", "")))
            line += body.count("\n")
            index = end + 1
        else:
            current.append(char)
            index += 1
    if current is not None:
        words.append(Word("".join(current), start))
    return words


def _closing_quote(text: str, opening: int) -> int:
    quote = text[opening]
    index = opening + 1
    while index < len(text):
        if text[index] == quote:
            return index
        index += 2 if quote == '"' and text[index] == "\\" else 1
    return -1


def _conf_options(words: list[Word], conf: SparkConf) -> None:
    """`--conf key=value` (or `-c`, or `--conf=key=value`) options among a command line's words."""
    index = 0
    while index < len(words):
        word = words[index]
        value: Word | None = None
        if word.text in CONF_OPTIONS:
            value = words[index + 1] if index + 1 < len(words) else None
            if value is None:
                conf.problems.append((word.line, f"{word.text} has no value"))
            index += 1
        elif word.text.startswith("--conf="):
            value = Word(word.text.removeprefix("--conf="), word.line)
        if value is not None:
            key, sep, setting = value.text.partition("=")
            if not sep:
                problem = f"`{value.text}` is not key=value: spark-submit stops with \"Spark config without '='\""
                conf.problems.append((value.line, problem))
            elif key.startswith("spark."):
                conf.settings.append(Setting(key, setting, value.line))
        index += 1


def read_script(text: str) -> SparkConf:
    """A shell script's spark-submit `--conf` options, quoted the shell's way."""
    conf = SparkConf()
    try:
        _conf_options(shell_words(text), conf)
    except UnclosedQuote as error:
        conf.problems.append((error.line, str(error)))
    _check_quotes(conf, SHELL_QUOTES_ADVICE)
    return conf


def read_options(text: str) -> SparkConf:
    """A file of spark-submit options, one or more a line, pasted into a command line with an
    unquoted `$(...)`: spark-submit gets each line split at its blanks, quotes kept. Quotes inside a
    value (JSON's) are meant to stay; quotes that group words or wrap a whole value were meant for
    a shell, so such lines are problems, and their settings are read the way their author meant
    them so that the gang checks see the intended values."""
    conf = SparkConf()
    words: list[Word] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#"):
            continue  # grep -v '^#' drops it; a comment further right would be pasted
        try:
            meant = [Word(w.text, number) for w in shell_words(line)]
        except UnclosedQuote as error:
            conf.problems.append((number, str(error)))
            continue
        pasted = line.split()
        if len(pasted) == len(meant):
            words += [Word(text, number) for text in pasted]
            continue
        words += meant
        shown = ", ".join(f"`{word}`" for word in pasted)
        stray = pasted[2] if pasted[0] in CONF_OPTIONS and len(pasted) > 2 else pasted[-1]
        problem = (
            f"an unquoted $(...) splits this line at its blanks into {len(pasted)} arguments ({shown}): "
            f"spark-submit takes `{stray}` for the application jar and hands every later option to the "
            f"application; {PROPERTIES_ADVICE}"
        )
        conf.problems.append((number, problem))
    _conf_options(words, conf)
    _check_quotes(conf, f"an unquoted $(...) keeps quotes; {PROPERTIES_ADVICE}")
    return conf


def _check_quotes(conf: SparkConf, advice: str) -> None:
    """Pod annotations and labels whose value still carries quotes its author meant for a shell; the
    setting keeps the value its author meant, so that one mistake is reported once."""
    for index, setting in enumerate(conf.settings):
        value = setting.value.strip()
        metadata = ROLE_METADATA.match(setting.key)
        if metadata and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            problem = (
                f"the value of {setting.key} is wrapped in {value[0]} quotes that would stay in the pod's "
                f"{metadata.group(2)}; {advice}"
            )
            conf.problems.append((setting.line, problem))
            conf.settings[index] = Setting(setting.key, value[1:-1], setting.line)


def read(text: str, suffix: str) -> SparkConf:
    """Settings of a file by its kind: `.properties`, `.sh`, or `.conf`/`.txt` (a file of `--conf`
    lines when any line is an option, else a properties file such as spark-defaults.conf)."""
    if suffix == ".sh":
        return read_script(text)
    if suffix == ".properties":
        return read_properties(text)
    options = any(line.lstrip().startswith("-") for line in text.splitlines() if not line.lstrip().startswith("#"))
    return read_options(text) if options else read_properties(text)
