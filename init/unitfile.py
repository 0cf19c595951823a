"""Unit-file parser: the text of a ``*.service`` file -> :class:`init.unitconfig.UnitConfig`.

This implements a documented subset of systemd.syntax(7), systemd.unit(5), systemd.service(5),
systemd.exec(5), systemd.kill(5) and systemd.time(7). Everything not listed here is not supported.

Public API
----------
``parse_unit(text, path)``      pure parse (no I/O) -> :class:`LoadResult`
``load_unit(path)``             read + parse one file; never raises
``load_unit_dir(directory)``    every ``*.service`` file directly in ``directory`` (no subdirectories,
                                no dotfiles), sorted by name; raises ``OSError`` only if the
                                directory itself cannot be listed
``parse_timespan(value)``       systemd time span -> float seconds; ``ValueError`` if invalid
``split_exec(value, *, unit_name="", environment=None)``
                                ``ExecStart=`` value -> (argv, prefixes); ``ValueError`` if invalid

A :class:`LoadResult` carries either a ``config`` or an ``error`` (the unit failed to load; init marks
it failed), plus ``warnings`` for assignments that were ignored. ``Diagnostic.line`` is the 1-based
line where the offending assignment started; 0 means "the file as a whole" (e.g. no ``ExecStart=``,
unreadable file).

File syntax
-----------
* Lines end in ``\\n``, ``\\r\\n`` or ``\\r``; a leading UTF-8 BOM is skipped. A NUL character is an error.
* Blank lines and lines whose first non-blank character is ``#`` or ``;`` are comments.
* A line ending in an odd number of backslashes continues on the next line; the final backslash is
  replaced by a space. Comment lines inside a continuation are skipped (as systemd does); a blank
  line ends it.
* ``[Section]`` starts a section; ``Key=Value`` assigns (blanks around key and value are stripped).
* Errors (the unit fails to load): a line that is neither a header nor ``Key=Value``, a header
  without the closing ``]``, an empty key name, an assignment before the first section header.
* ``[Unit]``, ``[Service]`` and ``[Install]`` are known. Other sections get the warning
  ``Unknown section 'X'. Ignoring.`` and their keys are ignored; ``[X-...]`` sections are ignored
  silently.
* An unknown key in a known section: warning ``Unknown key name 'K' in section 'S', ignoring.``
  Keys starting with ``X-`` are ignored silently.
* An invalid value: warning naming the key, the assignment is ignored (the previous value stays).
* An empty assignment (``Key=``) resets the setting to its default (an empty list for list keys).
  List keys accumulate over repeated assignments; for the others the last assignment wins.

Keys
----
[Unit]
  Description=, Documentation= (ignored), After=, Before= (ignored), Requires=, Wants= (list of
  whitespace-separated unit names; a name without a suffix gets ``.service``, duplicates dropped), StartLimitIntervalSec=
  (time span; 0 disables the limit), StartLimitBurst= (unsigned). The legacy ``StartLimitInterval=``
  and ``StartLimitBurst=`` are also accepted in [Service] (kubeadm's kubelet.service uses them).
[Service]
  Type= simple|exec|notify (forking, oneshot, dbus, idle, notify-reload: warning, ignored)
  ExecStart= exactly one command line, see below; missing or invalid: error
  Restart= no|on-success|on-failure|on-abnormal|on-watchdog|on-abort|always
  RestartSec=, RestartMaxDelaySec= (time spans), RestartSteps= (unsigned)
  SuccessExitStatus=, RestartPreventExitStatus= (lists of exit codes 0..255 and signal names such
  as SIGKILL or KILL; a bad entry is warned about and skipped, the others are kept)
  TimeoutStartSec=, TimeoutStopSec=, TimeoutSec= (both): 0 means "no timeout" (math.inf)
  WatchdogSec= (0 = off), WatchdogSignal=, KillSignal= (SIGTERM, TERM, RTMIN+n, or a number)
  KillMode= control-group|mixed|process (none: warning, ignored), SendSIGKILL= (boolean:
  1/yes/y/true/t/on, 0/no/n/false/f/off, any case)
  Environment= ``NAME=value`` words, quoted and escaped like command-line words; NAME must match
  ``[A-Za-z_][A-Za-z0-9_]*``; a later assignment of NAME replaces the value in place
  WorkingDirectory= absolute path or ``~``; a leading ``-`` ("ignore if missing") is stripped
  StandardOutput=, StandardError= inherit|journal (both -> inherit)|null|file:PATH|truncate:PATH
  (-> file)|append:PATH, PATH absolute; others (tty, socket, kmsg, ...): warning, ignored
[Install]
  WantedBy=, RequiredBy=, UpheldBy=, Alias=, Also=, DefaultInstance= are accepted and ignored.

Time spans (systemd.time(7))
  ``infinity``, or one or more ``NUMBER[UNIT]`` parts that add up ("1min 30s", "1min30s", "2.5s").
  A bare number is seconds. Units: us usec µs μs, ms msec, s sec second seconds, m min minute
  minutes, h hr hour hours, d day days, w week weeks, M month months (30.44 d), y year years
  (365.25 d).

Specifiers (expanded in ExecStart=, Environment=, WorkingDirectory=, output paths, dependency
names; NOT in Description=)
  %n full unit name, %N name without the type suffix, %p prefix (before "@"), %i and %I instance
  (after "@", empty for a plain unit; %I is not unescaped), %t ``/run``, %% a literal ``%``.
  A trailing lone ``%`` is kept. Any other specifier is an error.

Command lines (``ExecStart=``, systemd.service(5) "Command lines")
  * Words are separated by blanks. A word that *starts* with ``"`` or ``'`` extends to the matching
    quote, which must be followed by a blank or the end (a quote in the middle of a word is an
    ordinary character). C escapes are decoded inside and outside quotes: ``\\\\ \\" \\' \\a \\b
    \\f \\n \\r \\t \\v``, ``\\s`` (space), ``\\xHH``, ``\\NNN`` (octal), ``\\uHHHH``,
    ``\\UHHHHHHHH``; escapes that would produce NUL and unknown escapes are errors.
  * An unquoted ``;`` word is an error: multiple commands are not supported (``\\;`` is a literal).
  * Prefixes on the first word: ``-`` (exit failure counts as success -> exec_ignore_failure),
    ``:`` (no environment expansion), ``+``, ``!``, ``!!`` (privilege prefixes: accepted, warned
    about, no effect), ``@`` (see deviations). Each at most once; ``+`` and ``!`` exclude each other.
  * The executable is an absolute path or a bare name (kept as is, resolved via PATH at exec).
  * Then specifiers are expanded in every word, then (unless ``:``) environment variables in every
    word except the executable: a word that is exactly ``$NAME`` becomes the value split at blanks
    (zero words if unset or empty); ``${NAME}`` inside a word becomes the value (empty if unset),
    ``${NAME:-default}`` / ``${NAME:+alternate}`` as in systemd ≥ 247, and ``$$`` a literal ``$``.

Deviations from systemd (deliberate)
  * Syntax errors (no ``=``, key before any section) fail the unit; systemd only warns.
  * Environment expansion happens at load time using only the unit's own ``Environment=``
    (no EnvironmentFile=, no manager environment), so e.g. ``$PATH`` expands to nothing.
  * Only one ExecStart= and no Type=oneshot; ``@`` is not supported: the argv[0] word is dropped
    with a warning (the program sees its path as argv[0]), because UnitConfig has no argv0 field.
  * A quote opens a quoted section only at the start of a word, as systemd.syntax(7) documents
    (systemd's implementation also accepts quotes inside words).
  * Dependency names need no type suffix; ``$NAME`` whole-word expansion needs a valid NAME
    (systemd drops e.g. a lone ``$``, here it is kept literally); ``\\xHH`` >= 0x80 yields the code
    point U+00HH, not a raw byte; empty assignments reset every key (systemd: most keys).
  * ``file:PATH`` maps to OutputTarget("file"), which truncates (systemd's ``file:`` does not).
"""
from __future__ import annotations

import math
import os
import re
import signal
import stat
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from init.unitconfig import KillMode, OutputTarget, RestartPolicy, ServiceType, UnitConfig

__all__ = [
    "Diagnostic",
    "LoadResult",
    "parse_unit",
    "load_unit",
    "load_unit_dir",
    "parse_timespan",
    "split_exec",
]

# systemd's WHITESPACE: str.split()/strip() would also eat \v, \f, \x1c.., \xa0, \u2028 ...
_WS = " \t\n\r"
_NEWLINE = re.compile(r"\r\n|\r|\n")
_WS_RUN = re.compile(r"[ \t\n\r]+")
_SUFFIX = ".service"


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class Diagnostic:
    path: str
    line: int  # 1-based; 0 = not tied to one line
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class LoadResult:
    name: str  # unit name, e.g. "kubelet.service" (file basename)
    path: str
    config: UnitConfig | None  # None when the unit failed to load
    warnings: tuple[Diagnostic, ...]
    error: Diagnostic | None  # set when config is None: the unit is marked failed by init


class _LoadError(Exception):
    """Internal: aborts parsing with the diagnostic that makes the unit fail to load."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(str(diagnostic))
        self.diagnostic = diagnostic


# ---------------------------------------------------------------------------------------------
# Time spans


_SECONDS_PER_UNIT = {
    "us": 1e-6, "usec": 1e-6, "µs": 1e-6, "μs": 1e-6,  # micro sign and Greek mu both, as systemd
    "ms": 1e-3, "msec": 1e-3,
    "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
    "M": 2629800.0, "month": 2629800.0, "months": 2629800.0,  # 30.44 days, as systemd
    "y": 31557600.0, "year": 31557600.0, "years": 31557600.0,  # 365.25 days, as systemd
}
# Longest unit first, so that "5ms" is milliseconds and not 5 minutes followed by garbage "s".
_UNIT_ALTERNATION = "|".join(sorted(map(re.escape, _SECONDS_PER_UNIT), key=len, reverse=True))
_TIMESPAN_PART = re.compile(rf"[ \t\n\r]*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)[ \t\n\r]*({_UNIT_ALTERNATION})?")


def parse_timespan(value: str) -> float:
    """systemd time span -> seconds (``math.inf`` for "infinity"). Raises ValueError."""
    text = value.strip(_WS)
    if text == "infinity":
        return math.inf
    if not text:
        raise ValueError("empty time span")
    total, pos = 0.0, 0
    while pos < len(text):
        match = _TIMESPAN_PART.match(text, pos)
        number_end = match.end(1) if match else pos
        # Without a unit the number must end at a blank or the end: rejects "12.34.56", "5x".
        if not match or (match.group(2) is None and number_end < len(text) and text[number_end] not in _WS):
            raise ValueError(
                f"invalid time span {value!r} (expected e.g. '90', '1min 30s', '100ms' or 'infinity')"
            )
        total += float(match.group(1)) * _SECONDS_PER_UNIT.get(match.group(2) or "s", 1.0)
        pos = match.end()
    if not math.isfinite(total):
        raise ValueError(f"time span {value!r} is too large")
    return total


# ---------------------------------------------------------------------------------------------
# Words: quoting, C escapes, specifiers, environment variables


_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", '"': '"', "'": "'", "s": " ",
}
_HEX = "0123456789abcdefABCDEF"
_OCTAL = "01234567"
# escape letter -> (digits alphabet, digit count, base); octal escapes have no letter
_NUMERIC_ESCAPES = {"x": (_HEX, 2, 16), "u": (_HEX, 4, 16), "U": (_HEX, 8, 16)}


def _unescape(text: str, i: int) -> tuple[str, int]:
    """Decode the C escape whose backslash is at text[i]; return (character, index after it)."""
    letter = text[i + 1 : i + 2]
    if letter in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[letter], i + 2
    if letter in _NUMERIC_ESCAPES:
        alphabet, width, base = _NUMERIC_ESCAPES[letter]
        start = i + 2
    elif letter and letter in _OCTAL:
        alphabet, width, base = _OCTAL, 3, 8
        start = i + 1
    elif not letter:
        raise ValueError("trailing backslash")
    else:
        raise ValueError(f"invalid escape sequence {text[i:i + 2]!r}")
    digits = text[start : start + width]
    if len(digits) != width or any(d not in alphabet for d in digits):
        raise ValueError(f"invalid escape sequence {text[i:start + width]!r}")
    code = int(digits, base)
    # NUL cannot be passed in argv/environ; surrogates are not characters; octal is one byte.
    if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF or (base == 8 and code > 0xFF):
        raise ValueError(f"escape sequence {text[i:start + width]!r} is not allowed")
    return chr(code), start + width


def _read_quoted(text: str, i: int) -> tuple[str, int]:
    quote, i = text[i], i + 1
    out: list[str] = []
    while True:
        if i == len(text):
            raise ValueError(f"unterminated {quote} quote")
        char = text[i]
        if char == quote:
            i += 1
            break
        if char == "\\":
            char, i = _unescape(text, i)
        else:
            i += 1
        out.append(char)
    if i < len(text) and text[i] not in _WS:
        raise ValueError(f"closing {quote} quote must be followed by whitespace")
    return "".join(out), i


def _read_bare(text: str, i: int) -> tuple[str, int]:
    out: list[str] = []
    while i < len(text) and text[i] not in _WS:
        if text[i] == "\\":
            char, i = _unescape(text, i)
        else:
            char, i = text[i], i + 1
        out.append(char)
    return "".join(out), i


def _split_words(text: str) -> list[tuple[str, bool]]:
    """Split per systemd quoting rules -> [(word, is_an_unquoted_lone_semicolon)]."""
    words = []
    i = 0
    while True:
        while i < len(text) and text[i] in _WS:
            i += 1
        if i == len(text):
            return words
        start = i
        if _is_lone(text, i, "\\;"):  # systemd's way to pass a literal ";" word
            word, i = ";", i + 2
        else:
            reader = _read_quoted if text[i] in "\"'" else _read_bare
            word, i = reader(text, i)
        words.append((word, text[start:i] == ";"))


def _is_lone(text: str, i: int, token: str) -> bool:
    end = i + len(token)
    return text.startswith(token, i) and (end == len(text) or text[end] in _WS)


def _split_blanks(text: str) -> list[str]:
    return [word for word in _WS_RUN.split(text) if word]


def _specifier_table(unit_name: str) -> dict[str, str]:
    stem, dot, _type = unit_name.rpartition(".")
    without_suffix = stem if dot else unit_name
    prefix, _at, instance = without_suffix.partition("@")
    return {
        "n": unit_name,
        "N": without_suffix,
        "p": prefix,
        "i": instance,
        "I": instance,
        "t": "/run",
        "%": "%",
    }


_SPECIFIER = re.compile(r"%(.?)", re.DOTALL)


def _expand_specifiers(text: str, unit_name: str) -> str:
    if "%" not in text:
        return text
    table = _specifier_table(unit_name)

    def replace(match: re.Match[str]) -> str:
        letter = match.group(1)
        if not letter:  # a lone '%' at the very end is kept, as systemd does
            return "%"
        if letter not in table:
            supported = " ".join("%" + key for key in table)
            raise ValueError(f"unsupported specifier '%{letter}' (supported: {supported})")
        return table[letter]

    return _SPECIFIER.sub(replace, text)


_ENV_NAME = "[A-Za-z_][A-Za-z0-9_]*"
_WHOLE_WORD_VARIABLE = re.compile(rf"\$({_ENV_NAME})")
_IN_WORD_VARIABLE = re.compile(r"\$\$|\$\{([^}]*)\}")
_BRACED_EXPRESSION = re.compile(rf"({_ENV_NAME})(?::([-+])(.*))?", re.DOTALL)


def _braced_value(expression: str, environment: Mapping[str, str]) -> str:
    match = _BRACED_EXPRESSION.fullmatch(expression)
    if not match:  # not a variable name: systemd looks it up, finds nothing -> empty
        return ""
    value = environment.get(match.group(1), "")
    operator, operand = match.group(2), match.group(3)
    if operator == "-":
        return value or operand
    if operator == "+":
        return operand if value else ""
    return value


def _expand_variables(word: str, environment: Mapping[str, str]) -> list[str]:
    """One argv word -> zero or more words, per systemd.service(5) "Command lines"."""
    whole = _WHOLE_WORD_VARIABLE.fullmatch(word)
    if whole:
        return _split_blanks(environment.get(whole.group(1), ""))

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return _braced_value(match.group(1), environment)

    return [_IN_WORD_VARIABLE.sub(replace, word)]


# ---------------------------------------------------------------------------------------------
# Command lines


_PREFIX_CHARS = "-@:+!"


def _strip_prefixes(word: str) -> tuple[set[str], str]:
    prefixes: set[str] = set()
    i = 0
    while i < len(word) and word[i] in _PREFIX_CHARS:
        char = word[i]
        if word.startswith("!!", i) and "!" not in prefixes:
            i += 1  # "!!" is a single prefix (a fallback variant of "!"); same meaning here
        elif char in prefixes:
            raise ValueError(f"prefix {char!r} given twice")
        prefixes.add(char)
        i += 1
    if {"+", "!"} <= prefixes:
        raise ValueError("prefixes '+' and '!' cannot be combined")
    return prefixes, word[i:]


def _check_executable(path: str) -> None:
    if not path:
        raise ValueError("empty executable path")
    if path in (".", "..") or path.endswith("/"):
        raise ValueError(f"executable {path!r} names a directory")
    if "/" in path and not path.startswith("/"):
        raise ValueError(f"executable {path!r} is neither an absolute path nor a bare program name")


def split_exec(
    value: str, *, unit_name: str = "", environment: Mapping[str, str] | None = None
) -> tuple[list[str], set[str]]:
    """Split an ``ExecStart=`` value -> (argv, prefixes), e.g. ({"-"} for ``-/bin/true``).

    ``unit_name`` feeds the %-specifiers, ``environment`` the $-expansion. With the ``@`` prefix
    argv[1] is the requested argv[0] (the caller decides what to do with it). Raises ValueError.
    """
    if "\x00" in value:
        raise ValueError("command line contains a NUL character")
    words = _split_words(value)
    if not words:
        raise ValueError("empty command line")
    if any(lone_semicolon for _word, lone_semicolon in words):
        raise ValueError("';' separates commands: multiple commands are not supported")
    prefixes, executable = _strip_prefixes(words[0][0])
    executable = _expand_specifiers(executable, unit_name)
    _check_executable(executable)
    args = [_expand_specifiers(word, unit_name) for word, _ in words[1:]]
    if "@" in prefixes and not args:
        raise ValueError("prefix '@' needs the argv[0] to use as the second word")
    if ":" not in prefixes:  # the executable itself is never expanded, as in systemd
        env = environment or {}
        args = [expanded for word in args for expanded in _expand_variables(word, env)]
    return [executable, *args], prefixes


# ---------------------------------------------------------------------------------------------
# Value converters: (value, context) -> value, or raise ValueError (-> warning, key ignored).
# Converters of list keys return lists and warn about bad entries themselves, keeping the rest.


@dataclass
class _Context:
    path: str
    unit_name: str
    warnings: list[Diagnostic]
    line: int = 0
    key: str = ""

    def warn(self, message: str) -> None:
        self.warnings.append(Diagnostic(self.path, self.line, message))


_Converter = Callable[[str, _Context], Any]


def _plain(function: Callable[[str], Any]) -> _Converter:
    return lambda value, _ctx: function(value)


def _one_of(enum_type: type, unsupported: tuple[str, ...] = ()) -> _Converter:
    def convert(value: str, _ctx: _Context) -> Any:
        if value in unsupported:
            raise ValueError(f"{value!r} is not supported")
        try:
            return enum_type(value)
        except ValueError:
            allowed = ", ".join(member.value for member in enum_type)
            raise ValueError(f"{value!r} is not one of {allowed}") from None

    return convert


def _timeout(value: str) -> float:
    seconds = parse_timespan(value)
    return math.inf if seconds == 0 else seconds  # systemd: 0 disables the timeout


def _unsigned(value: str) -> int:
    if not re.fullmatch(r"[0-9]{1,10}", value) or int(value) > 0xFFFFFFFF:
        raise ValueError(f"{value!r} is not an unsigned integer")
    return int(value)


_TRUE = {"1", "yes", "y", "true", "t", "on"}
_FALSE = {"0", "no", "n", "false", "f", "off"}


def _boolean(value: str) -> bool:
    lowered = value.lower()
    if lowered in _TRUE | _FALSE:
        return lowered in _TRUE
    raise ValueError(f"{value!r} is not a boolean (yes/no, true/false, on/off, 1/0)")


_REALTIME_SIGNAL = re.compile(r"RTMIN\+([0-9]{1,2})|RTMAX-([0-9]{1,2})")


def _signal_by_name(name: str) -> int:
    bare = name.removeprefix("SIG")
    realtime = _REALTIME_SIGNAL.fullmatch(bare)
    if realtime:
        plus, minus = realtime.groups()
        number = signal.SIGRTMIN + int(plus) if plus else signal.SIGRTMAX - int(minus)
        if signal.SIGRTMIN <= number <= signal.SIGRTMAX:
            return int(number)
    elif bare and ("SIG" + bare) in signal.Signals.__members__:
        return int(signal.Signals["SIG" + bare])
    raise ValueError(f"{name!r} is not a signal name")


def _signal(value: str) -> int:
    if re.fullmatch(r"[0-9]{1,3}", value):
        if 1 <= int(value) < signal.NSIG:
            return int(value)
        raise ValueError(f"signal number {value} is out of range")
    return _signal_by_name(value)


def _exit_statuses(value: str, ctx: _Context) -> tuple[list[int], list[int]]:
    codes: list[int] = []
    signals: list[int] = []
    for word in _split_blanks(value):
        if re.fullmatch(r"[0-9]{1,3}", word) and int(word) <= 255:
            codes.append(int(word))
            continue
        try:
            signals.append(_signal_by_name(word))
        except ValueError:
            ctx.warn(
                f"Invalid {ctx.key}= entry {word!r} (neither an exit status 0..255 nor a signal name), ignoring."
            )
    return codes, signals


def _unit_names(value: str, ctx: _Context) -> list[str]:
    names = []
    for word in _split_blanks(value):
        try:
            name = _expand_specifiers(word, ctx.unit_name)
        except ValueError as exc:
            ctx.warn(f"Invalid unit name {word!r} in {ctx.key}=, ignoring: {exc}")
            continue
        # A bare name means the service (systemctl's habit), so `After=db` matches db.service.
        names.append(name if "." in name else f"{name}.service")
    return names


_ENV_ASSIGNMENT = re.compile(rf"({_ENV_NAME})=(.*)", re.DOTALL)
# Control characters other than tab and newline are refused in values, as systemd does.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _environment(value: str, ctx: _Context) -> list[tuple[str, str]]:
    pairs = []
    for word, _ in _split_words(value):  # a quoting error ignores the whole line (ValueError)
        try:
            assignment = _expand_specifiers(word, ctx.unit_name)
        except ValueError as exc:
            ctx.warn(f"Invalid environment assignment {word!r}, ignoring: {exc}")
            continue
        match = _ENV_ASSIGNMENT.fullmatch(assignment)
        if not match or _CONTROL.search(match.group(2)):
            ctx.warn(f"Invalid environment assignment, ignoring: {word!r}")
            continue
        pairs.append((match.group(1), match.group(2)))
    return pairs


def _absolute(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"path {path!r} is not absolute")
    return path


def _working_directory(value: str, ctx: _Context) -> str:
    # "-" means "not an error if missing"; UnitConfig cannot carry that, so only the path is kept.
    path = _expand_specifiers(value.removeprefix("-"), ctx.unit_name)
    return path if path == "~" else _absolute(path)


_OUTPUT_KEYWORDS = {
    "inherit": OutputTarget("inherit"),
    "journal": OutputTarget("inherit"),  # no journal here: the unit's log file is the journal
    "null": OutputTarget("null"),
}
_OUTPUT_FILE_KINDS = {"file": "file", "truncate": "file", "append": "append"}


def _output(value: str, ctx: _Context) -> OutputTarget:
    if value in _OUTPUT_KEYWORDS:
        return _OUTPUT_KEYWORDS[value]
    kind, colon, path = value.partition(":")
    if colon and kind in _OUTPUT_FILE_KINDS:
        return OutputTarget(_OUTPUT_FILE_KINDS[kind], _absolute(_expand_specifiers(path, ctx.unit_name)))
    raise ValueError(f"{value!r} is not supported (use inherit, journal, null, file:PATH or append:PATH)")


# ---------------------------------------------------------------------------------------------
# The key table


@dataclass(frozen=True)
class _Key:
    fields: tuple[str, ...]  # UnitConfig fields set; () = accepted and ignored
    convert: _Converter | None = None  # result: a value, or a tuple of values if several fields
    accumulate: bool = False  # list key: assignments extend the list


_IGNORED = _Key(())
# ExecStart= is resolved after the whole file is read: expansion needs the final Environment=.
_EXEC_LINES = "_exec_start_lines"

_SERVICE_TYPE = _one_of(ServiceType, unsupported=("forking", "oneshot", "dbus", "idle", "notify-reload"))
_START_LIMIT_INTERVAL = _Key(("start_limit_interval",), _plain(parse_timespan))
_START_LIMIT_BURST = _Key(("start_limit_burst",), _plain(_unsigned))

_KEYS: dict[tuple[str, str], _Key] = {
    ("Unit", "Description"): _Key(("description",), _plain(str)),
    ("Unit", "Documentation"): _IGNORED,
    ("Unit", "Before"): _IGNORED,
    ("Unit", "After"): _Key(("after",), _unit_names, accumulate=True),
    ("Unit", "Requires"): _Key(("requires",), _unit_names, accumulate=True),
    ("Unit", "Wants"): _Key(("wants",), _unit_names, accumulate=True),
    ("Unit", "StartLimitIntervalSec"): _START_LIMIT_INTERVAL,
    ("Unit", "StartLimitInterval"): _START_LIMIT_INTERVAL,  # legacy spelling
    ("Unit", "StartLimitBurst"): _START_LIMIT_BURST,
    ("Service", "StartLimitInterval"): _START_LIMIT_INTERVAL,  # legacy location (kubeadm uses it)
    ("Service", "StartLimitBurst"): _START_LIMIT_BURST,
    ("Service", "Type"): _Key(("type",), _SERVICE_TYPE),
    ("Service", "ExecStart"): _Key((_EXEC_LINES,), lambda value, ctx: [(ctx.line, value)], accumulate=True),
    ("Service", "Restart"): _Key(("restart",), _one_of(RestartPolicy)),
    ("Service", "RestartSec"): _Key(("restart_sec",), _plain(parse_timespan)),
    ("Service", "RestartSteps"): _Key(("restart_steps",), _plain(_unsigned)),
    ("Service", "RestartMaxDelaySec"): _Key(("restart_max_delay",), _plain(parse_timespan)),
    ("Service", "SuccessExitStatus"): _Key(
        ("success_exit_status", "success_signals"), _exit_statuses, accumulate=True
    ),
    ("Service", "RestartPreventExitStatus"): _Key(
        ("restart_prevent_exit_status", "restart_prevent_signals"), _exit_statuses, accumulate=True
    ),
    ("Service", "TimeoutStartSec"): _Key(("timeout_start",), _plain(_timeout)),
    ("Service", "TimeoutStopSec"): _Key(("timeout_stop",), _plain(_timeout)),
    ("Service", "TimeoutSec"): _Key(
        ("timeout_start", "timeout_stop"), lambda value, _ctx: (_timeout(value),) * 2
    ),
    ("Service", "WatchdogSec"): _Key(("watchdog_sec",), _plain(parse_timespan)),
    ("Service", "WatchdogSignal"): _Key(("watchdog_signal",), _plain(_signal)),
    ("Service", "KillMode"): _Key(("kill_mode",), _one_of(KillMode, unsupported=("none",))),
    ("Service", "KillSignal"): _Key(("kill_signal",), _plain(_signal)),
    ("Service", "SendSIGKILL"): _Key(("send_sigkill",), _plain(_boolean)),
    ("Service", "Environment"): _Key(("environment",), _environment, accumulate=True),
    ("Service", "WorkingDirectory"): _Key(("working_directory",), _working_directory),
    ("Service", "StandardOutput"): _Key(("standard_output",), _output),
    ("Service", "StandardError"): _Key(("standard_error",), _output),
    **{
        ("Install", key): _IGNORED
        for key in ("WantedBy", "RequiredBy", "UpheldBy", "Alias", "Also", "DefaultInstance")
    },
}
_SECTIONS = frozenset(section for section, _key in _KEYS)


def _dedupe(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _merge_environment(pairs: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(dict(pairs).items())  # a later value replaces an earlier one in place


# list field (as accumulated while parsing) -> its UnitConfig form
_FINISH = {
    "after": _dedupe,
    "requires": _dedupe,
    "wants": _dedupe,
    "environment": _merge_environment,
    "success_exit_status": frozenset,
    "success_signals": frozenset,
    "restart_prevent_exit_status": frozenset,
    "restart_prevent_signals": frozenset,
}


# ---------------------------------------------------------------------------------------------
# Parsing


@dataclass(frozen=True)
class _Assignment:
    line: int
    section: str
    key: str
    value: str


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1  # "\\\\" at the end is an escaped backslash, not a continuation


def _logical_lines(text: str):
    """Yield (first line number, text) with continuations joined and comment lines dropped."""
    pending: list[str] = []
    start = 0
    for number, line in enumerate(_NEWLINE.split(text), 1):
        if line.lstrip(_WS).startswith(("#", ";")):
            continue  # also inside a continuation, as systemd does
        if not pending:
            start = number
        if _continues(line):
            pending.append(line[:-1] + " ")
            continue
        pending.append(line)
        yield start, "".join(pending)
        pending = []
    if pending:  # file ended inside a continuation
        yield start, "".join(pending)


def _check_no_nul(text: str, path: str) -> None:
    index = text.find("\x00")
    if index >= 0:
        line = len(_NEWLINE.findall(text, 0, index)) + 1
        raise _LoadError(Diagnostic(path, line, "File contains a NUL character, refusing."))


def _read_assignments(text: str, ctx: _Context):
    """Yield the assignments of known sections; raise _LoadError on a syntax error."""
    section: str | None = None
    for number, raw in _logical_lines(text):
        line = raw.strip(_WS)
        ctx.line = number
        if not line:
            continue
        if line.startswith("["):
            if len(line) < 2 or not line.endswith("]"):
                raise _LoadError(Diagnostic(ctx.path, number, f"Invalid section header {line!r}, refusing."))
            section = line[1:-1]
            if section not in _SECTIONS and not section.startswith("X-"):
                ctx.warn(f"Unknown section '{section}'. Ignoring.")
            continue
        key, equals, value = line.partition("=")
        key = key.strip(_WS)
        if not equals or not key:
            expected = "key name before '='" if equals else "'[Section]' or 'Key=Value'"
            raise _LoadError(
                Diagnostic(ctx.path, number, f"Syntax error: expected {expected}, got {line!r}.")
            )
        if section is None:
            raise _LoadError(
                Diagnostic(ctx.path, number, f"Assignment {key}= outside of any section, refusing.")
            )
        if section in _SECTIONS:
            yield _Assignment(number, section, key, value.strip(_WS))


def _apply(assignment: _Assignment, values: dict[str, Any], ctx: _Context) -> None:
    ctx.line, ctx.key = assignment.line, assignment.key
    spec = _KEYS.get((assignment.section, assignment.key))
    if spec is None:
        if not assignment.key.startswith("X-"):  # X- keys are extensions: ignored silently
            ctx.warn(f"Unknown key name '{assignment.key}' in section '{assignment.section}', ignoring.")
        return
    if spec.convert is None:
        return
    if not assignment.value:  # systemd: an empty assignment resets the setting
        for name in spec.fields:
            values.pop(name, None)
        return
    try:
        converted = spec.convert(assignment.value, ctx)
    except ValueError as exc:
        ctx.warn(f"Invalid {assignment.key}= value, ignoring: {exc}")
        return
    results = converted if len(spec.fields) > 1 else (converted,)
    for name, result in zip(spec.fields, results):
        if spec.accumulate:
            values.setdefault(name, []).extend(result)
        else:
            values[name] = result


def _resolve_exec_start(
    entries: list[tuple[int, str]], values: dict[str, Any], ctx: _Context
) -> tuple[str, ...]:
    if not entries:
        raise _LoadError(Diagnostic(ctx.path, 0, "Service has no ExecStart= setting, refusing."))
    if len(entries) > 1:
        raise _LoadError(
            Diagnostic(
                ctx.path,
                entries[1][0],
                "Service has more than one ExecStart= setting, "
                "which is only allowed for Type=oneshot services. Refusing.",
            )
        )
    ctx.line, value = entries[0]
    try:
        environment = dict(values.get("environment", ()))
        argv, prefixes = split_exec(value, unit_name=ctx.unit_name, environment=environment)
    except ValueError as exc:
        message = f"Invalid ExecStart= command line, refusing: {exc}"
        raise _LoadError(Diagnostic(ctx.path, ctx.line, message)) from None
    for prefix in sorted(prefixes & {"+", "!"}):
        ctx.warn(f"ExecStart= prefix '{prefix}' (privileged execution) has no effect here, ignoring.")
    if "@" in prefixes:
        ctx.warn(
            f"ExecStart= prefix '@' is not supported: argv[0] {argv[1]!r} is dropped, "
            "the program sees its own path as argv[0]."
        )
        del argv[1]
    values["exec_ignore_failure"] = "-" in prefixes
    return tuple(argv)


def _build_config(text: str, path: str, name: str, warnings: list[Diagnostic]) -> UnitConfig:
    ctx = _Context(path, name, warnings)
    text = text.removeprefix("\ufeff")
    _check_no_nul(text, path)
    values: dict[str, Any] = {}
    for assignment in _read_assignments(text, ctx):
        _apply(assignment, values, ctx)
    exec_entries = values.pop(_EXEC_LINES, [])
    for field_name, finish in _FINISH.items():
        if field_name in values:
            values[field_name] = finish(values[field_name])
    exec_start = _resolve_exec_start(exec_entries, values, ctx)
    return UnitConfig(name=name, path=path, exec_start=exec_start, **values)


def parse_unit(text: str, path: str) -> LoadResult:
    """Parse unit-file text; ``path`` names the unit (its basename) and the diagnostics. Pure."""
    name = os.path.basename(path)
    warnings: list[Diagnostic] = []
    try:
        config = _build_config(text, path, name, warnings)
        error = None
    except _LoadError as exc:
        config, error = None, exc.diagnostic
    ordered = tuple(sorted(warnings, key=lambda diagnostic: diagnostic.line))  # stable
    return LoadResult(name=name, path=path, config=config, warnings=ordered, error=error)


# ---------------------------------------------------------------------------------------------
# I/O


def _failed(path: str, line: int, message: str) -> LoadResult:
    return LoadResult(os.path.basename(path), path, None, (), Diagnostic(path, line, message))


def _read_bytes(path: str) -> bytes:
    # O_NONBLOCK: opening a FIFO that happens to be named *.service must not hang init.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise OSError(0, "not a regular file")
        return file.read()


def load_unit(path: str) -> LoadResult:
    """Read and parse one unit file. Never raises: problems become an error result."""
    try:
        data = _read_bytes(path)
    except OSError as exc:
        return _failed(path, 0, f"Failed to read unit file: {exc.strerror or exc}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return _failed(path, line, "Unit file is not valid UTF-8, refusing.")
    return parse_unit(text, path)


def load_unit_dir(directory: str) -> dict[str, LoadResult]:
    """Load every ``*.service`` file directly in ``directory`` (no dotfiles, no subdirectories)."""
    with os.scandir(directory) as entries:
        names = sorted(
            entry.name
            for entry in entries
            if entry.name.endswith(_SUFFIX) and not entry.name.startswith(".") and not _is_dir(entry)
        )
    return {name: load_unit(os.path.join(directory, name)) for name in names}


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()  # follows symlinks: a symlink to a directory is skipped too
    except OSError:
        return False  # let load_unit report the problem
