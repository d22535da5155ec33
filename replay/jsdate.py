"""``new Date(text)`` as V8 reads a string (node 20, the runtime of AgentV 4.42), read in UTC.

AgentV's ``field-accuracy`` grader compares dates by what ``new Date`` makes of them, so a port of
Python's own date parsing would grade differently. This is V8's ``DateParser`` (``dateparser-inl.h``)
step by step: first the ES5 ISO form (``[+-yy]yyyy[-MM[-DD]][THH:mm[:ss[.sss]][Z|+hh:mm]]``, a date
alone in UTC), then from where that stops the legacy parser Safari's dates need: numbers are day parts,
``n:`` and ``n.`` time parts, words month names (``marzipan`` is March), zone names (``GMT``, ``EST``,
...), ``am``/``pm`` or ``T``; any other word is allowed only before the first number; parenthesized text
and other characters are skipped. Two or three day parts are month, day, year unless the first is no
day (``2024/3/5``); a year below 50 is 20xx, below 100 19xx. A day past the month's end rolls over
(``2024-02-30`` is 1 March), as ``MakeDay`` does; a time outside ±8.64e15 ms is no date.

Times without a zone are local in JavaScript; here they are UTC (the machine's zone would make a replay
depend on where it runs), so the results equal node's with ``TZ=UTC``.
"""

from __future__ import annotations

from evalstore.replay.jstext import WHITESPACE_UNITS

MS_PER_DAY = 86_400_000
_MAX_TIME = 8_640_000_000_000_000
"""ECMAScript's time range: 10^8 days either side of 1970 (``TimeClip``)."""
_MAX_YEAR = 1_000_000
"""V8's ``MakeDay`` gives NaN for a year beyond this (its ``kMaxYear``)."""
_SMI_MAX = 2**31 - 1
"""V8's largest small integer on 64-bit node (no pointer compression): the largest zone offset in seconds."""
_BLANKS = WHITESPACE_UNITS - {0x2028, 0x2029}
"""What V8's date parser skips as white space: JavaScript's, less U+2028 and U+2029, which are letters there
(so ``2024/3/5\u2028`` is no date)."""
_SIGNIFICANT_DIGITS = 9
"""V8 keeps the first nine significant digits of a number and skips the rest (``kMaxSignificantDigits``)."""

_END, _INVALID, _NUMBER, _SYMBOL, _SPACE, _WORD, _UNKNOWN = range(7)
_MONTH, _ZONE, _TIME_T, _AM_PM, _GARBAGE = range(5)
_KEYWORDS: dict[str, tuple[int, int]] = {
    **{m: (_MONTH, i) for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun"), start=1)},
    **{m: (_MONTH, i) for i, m in enumerate(("jul", "aug", "sep", "oct", "nov", "dec"), start=7)},
    "am": (_AM_PM, 0),
    "pm": (_AM_PM, 12),
    "ut": (_ZONE, 0),
    "utc": (_ZONE, 0),
    "z": (_ZONE, 0),
    "gmt": (_ZONE, 0),
    "cdt": (_ZONE, -5),
    "cst": (_ZONE, -6),
    "edt": (_ZONE, -4),
    "est": (_ZONE, -5),
    "mdt": (_ZONE, -6),
    "mst": (_ZONE, -7),
    "pdt": (_ZONE, -7),
    "pst": (_ZONE, -8),
    "t": (_TIME_T, 0),
}


class _Token:
    __slots__ = ("kind", "length", "value", "word")

    def __init__(self, kind: int, value: int = 0, length: int = 0, word: int = _GARBAGE) -> None:
        self.kind, self.value, self.length, self.word = kind, value, length, word

    def number(self, length: int | None = None) -> bool:
        return self.kind == _NUMBER and (length is None or self.length == length)

    def symbol(self, char: str) -> bool:
        return self.kind == _SYMBOL and self.value == ord(char)

    def sign(self) -> int:
        """+1 or -1 for a ``+`` or ``-``; 0 for anything else."""
        return (self.value == 0x2B) - (self.value == 0x2D) if self.kind == _SYMBOL else 0

    def zone_z(self) -> bool:
        return self.kind == _WORD and self.word == _ZONE and self.length == 1


class _Scanner:
    """V8's ``DateStringTokenizer``: one token looked ahead, over UTF-16 code units; a NUL ends the text."""

    def __init__(self, units: list[int]) -> None:
        self.units, self.at = units, 0
        self.ahead = self._scan()

    def _ch(self) -> int:
        return self.units[self.at] if self.at < len(self.units) else 0

    def peek(self) -> _Token:
        return self.ahead

    def next(self) -> _Token:
        token, self.ahead = self.ahead, self._scan()
        return token

    def skip(self, char: str) -> bool:
        if self.ahead.symbol(char):
            self.next()
            return True
        return False

    def _scan(self) -> _Token:
        start, ch = self.at, self._ch()
        if ch == 0:
            return _Token(_END)
        if 0x30 <= ch <= 0x39:
            while self._ch() == 0x30:
                self.at += 1
            value = digits = 0
            while 0x30 <= (ch := self._ch()) <= 0x39:
                if digits < _SIGNIFICANT_DIGITS:
                    value = value * 10 + ch - 0x30
                digits += 1
                self.at += 1
            return _Token(_NUMBER, value, self.at - start)
        self.at += 1
        if ch in (0x3A, 0x2D, 0x2B, 0x2E, 0x29):  # : - + . )
            return _Token(_SYMBOL, ch)
        if ch >= 0x41 and ch not in _BLANKS:
            prefix = [ch | 0x20]
            while (ch := self._ch()) >= 0x41 and ch not in _BLANKS:
                if len(prefix) < 3:
                    prefix.append(ch | 0x20)
                self.at += 1
            length = self.at - start
            key = "".join(map(chr, prefix))
            kind, value = _KEYWORDS.get(key, (_GARBAGE, 0))
            if length > 3 and kind != _MONTH:  # only a month name may be longer than its keyword
                kind, value = _GARBAGE, 0
            return _Token(_WORD, value, length, kind)
        if ch in _BLANKS:
            return _Token(_SPACE, 0, 1)
        if ch == 0x28:  # (: skipped with what it encloses, nested
            balance = 1
            while balance > 0 and (ch := self._ch()) != 0:
                balance += (ch == 0x28) - (ch == 0x29)
                self.at += 1
        return _Token(_UNKNOWN)


class _Day:
    def __init__(self) -> None:
        self.parts: list[int] = []
        self.named_month: int | None = None
        self.iso = False

    def add(self, n: int) -> bool:
        if len(self.parts) >= 3:
            return False
        self.parts.append(n)
        return True

    def write(self) -> tuple[int, int, int] | None:
        """(year, month 1-12, day 1-31), or None."""
        if not self.parts:
            return None
        first, second, third = [*self.parts, 1, 1][:3]
        if self.named_month is None:
            if self.iso or not 1 <= first <= 31:
                year, month, day = first, second, third
            else:
                month, day, year = first, second, third
        else:
            month = self.named_month
            year, day = (first, second) if not 1 <= first <= 31 else (second, first)
        if not self.iso:
            year += 2000 if 0 <= year <= 49 else 1900 if 50 <= year <= 99 else 0
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return None
        return year, month, day


class _Time:
    def __init__(self) -> None:
        self.parts: list[int] = []
        self.hour_offset: int | None = None

    def expecting(self, n: int) -> bool:
        size = len(self.parts)
        return (size in (1, 2) and 0 <= n <= 59) or (size == 3 and 0 <= n <= 999)

    def add(self, n: int) -> bool:
        if len(self.parts) >= 4:
            return False
        self.parts.append(n)
        return True

    def add_final(self, n: int) -> bool:
        if not self.add(n):
            return False
        self.parts += [0] * (4 - len(self.parts))
        return True

    def write(self) -> int | None:
        """Milliseconds into the day (up to 24:00), or None."""
        hour, minute, second, milli = [*self.parts, 0, 0, 0, 0][:4]
        if self.hour_offset is not None:
            if not 0 <= hour <= 12:
                return None
            hour = hour % 12 + self.hour_offset
        in_day = 0 <= hour <= 23 and 0 <= minute <= 59 and 0 <= second <= 59 and 0 <= milli <= 999
        if not in_day and (hour, minute, second, milli) != (24, 0, 0, 0):
            return None
        return ((hour * 60 + minute) * 60 + second) * 1000 + milli


class _Zone:
    def __init__(self) -> None:
        self.sign: int | None = None
        self.hour: int | None = None
        self.minute: int | None = None

    def set(self, hours: int) -> None:
        self.sign, self.hour, self.minute = (-1 if hours < 0 else 1), abs(hours), 0

    def expecting(self, n: int) -> bool:
        return self.hour is not None and self.minute is None and 0 <= n <= 59

    def utc(self) -> bool:
        return self.hour == 0 and self.minute == 0

    def write(self) -> tuple[bool, int | None]:
        """(whether V8 takes it, the offset in seconds or None for local time)."""
        if self.sign is None:
            return True, None
        # V8 adds in 32-bit unsigned arithmetic before comparing with its largest small integer.
        seconds = ((self.hour or 0) * 3600 + (self.minute or 0) * 60) & 0xFFFFFFFF
        return seconds <= _SMI_MAX, self.sign * seconds


def _milliseconds(token: _Token) -> int:
    """The first three significant digits of a fraction (``ReadMilliseconds``), counting leading zeros by
    the numeral's length."""
    number, length = token.value, token.length
    if length < 3:
        return number * (100 if length == 1 else 10)
    return number // 10 ** (min(length, _SIGNIFICANT_DIGITS) - 3)


def _es5(scanner: _Scanner, day: _Day, time: _Time, zone: _Zone) -> _Token:
    """``ParseES5DateTime``: as much of the ISO form as is there; the first token it does not take (the end
    when it took all), or an invalid token for a broken ISO time."""
    if scanner.peek().sign():
        sign_token = scanner.next()
        if not scanner.peek().number(6):
            return sign_token
        year = scanner.next().value
        if sign_token.sign() < 0 and year == 0:
            return sign_token
        day.add(sign_token.sign() * year)
    elif scanner.peek().number(4):
        day.add(scanner.next().value)
    else:
        return scanner.next()
    if scanner.skip("-"):
        if not scanner.peek().number(2) or not 1 <= scanner.peek().value <= 12:
            return scanner.next()
        day.add(scanner.next().value)
        if scanner.skip("-"):
            if not scanner.peek().number(2) or not 1 <= scanner.peek().value <= 31:
                return scanner.next()
            day.add(scanner.next().value)
    ahead = scanner.peek()
    if not (ahead.kind == _WORD and ahead.word == _TIME_T):
        if ahead.kind != _END:
            return scanner.next()
    else:
        invalid = _Token(_INVALID)
        scanner.next()
        if not scanner.peek().number(2) or not 0 <= scanner.peek().value <= 24:
            return invalid
        hour_24 = scanner.peek().value == 24
        time.add(scanner.next().value)
        if not scanner.skip(":"):
            return invalid
        if not _two_digits(scanner.peek(), 59, hour_24):
            return invalid
        time.add(scanner.next().value)
        if scanner.skip(":"):
            if not _two_digits(scanner.peek(), 59, hour_24):
                return invalid
            time.add(scanner.next().value)
            if scanner.skip("."):
                if not scanner.peek().number() or (hour_24 and scanner.peek().value > 0):
                    return invalid
                time.add(_milliseconds(scanner.next()))
        if scanner.peek().zone_z():
            scanner.next()
            zone.set(0)
        elif sign := scanner.peek().sign():
            scanner.next()
            zone.sign = sign
            if scanner.peek().number(4):
                hours, minutes = divmod(scanner.next().value, 100)
                if not (0 <= hours <= 23 and 0 <= minutes <= 59):
                    return invalid
                zone.hour, zone.minute = hours, minutes
            else:
                if not scanner.peek().number(2) or not 0 <= scanner.peek().value <= 23:
                    return invalid
                zone.hour = scanner.next().value
                if not scanner.skip(":") or not _two_digits(scanner.peek(), 59, False):
                    return invalid
                zone.minute = scanner.next().value
        if scanner.peek().kind != _END:
            return invalid
    # ES2016: a date alone is UTC, a date with a time local.
    if zone.sign is None and not time.parts:
        zone.set(0)
    day.iso = True
    return _Token(_END)


def _two_digits(token: _Token, high: int, zero_only: bool) -> bool:
    return token.number(2) and 0 <= token.value <= high and not (zero_only and token.value > 0)


def _parse(units: list[int]) -> tuple[tuple[int, int, int], int, int | None] | None:
    """V8's ``DateParser::Parse``: ((year, month, day), milliseconds into the day, zone offset in seconds
    or None for local time), or None where ``Date.parse`` gives NaN."""
    scanner, day, time, zone = _Scanner(units), _Day(), _Time(), _Zone()
    token = _es5(scanner, day, time, zone)
    if token.kind == _INVALID:
        return None
    has_number = bool(day.parts)
    while token.kind != _END:
        if token.kind == _NUMBER:
            has_number = True
            n = token.value
            if scanner.skip(":"):
                if scanner.skip(":"):
                    if time.parts:
                        return None
                    time.add(n)
                    time.add(0)
                else:
                    if not time.add(n):
                        return None
                    if scanner.peek().symbol("."):
                        scanner.next()
            elif scanner.skip(".") and time.expecting(n):
                time.add(n)
                if not scanner.peek().number():
                    return None
                time.add_final(_milliseconds(scanner.next()))
            elif zone.expecting(n):
                zone.minute = n
            elif time.expecting(n):
                time.add_final(n)
                ahead = scanner.peek()
                if ahead.kind not in (_END, _SPACE) and not ahead.zone_z() and not ahead.sign():
                    return None
            else:
                if not day.add(n):
                    return None
                scanner.skip("-")
        elif token.kind == _WORD:
            if token.word == _AM_PM and time.parts:
                time.hour_offset = token.value
            elif token.word == _MONTH:
                day.named_month = token.value
                scanner.skip("-")
            elif token.word == _ZONE and has_number:
                zone.set(token.value)
            elif has_number or scanner.peek().number():
                # A word is allowed only before the first number, and apart from it.
                return None
        elif token.sign() and (zone.utc() or time.parts):
            zone.sign = token.sign()
            n = length = 0
            if scanner.peek().number():
                number = scanner.next()
                n, length = number.value, number.length
            has_number = True
            if scanner.peek().symbol(":"):
                zone.hour, zone.minute = n, None
            elif length in (1, 2):
                zone.hour, zone.minute = n, 0
            elif length in (3, 4):
                zone.hour, zone.minute = divmod(n, 100)
            else:
                return None
        elif (token.sign() or token.symbol(")")) and has_number:
            return None
        token = scanner.next()
    ymd, milliseconds, (zone_ok, offset) = day.write(), time.write(), zone.write()
    if ymd is None or milliseconds is None or not zone_ok:
        return None
    return ymd, milliseconds, offset


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a proleptic Gregorian date; a month or day past its range rolls over."""
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    shifted = year - (month <= 2)
    era = shifted // 400
    of_era = shifted - era * 400
    of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5
    of_era_days = of_era * 365 + of_era // 4 - of_era // 100 + of_year
    return era * 146_097 + of_era_days - 719_468 + day - 1


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day number counted from 1970-01-01."""
    days += 719_468
    era = days // 146_097
    of_era = days - era * 146_097
    year_of_era = (of_era - of_era // 1460 + of_era // 36_524 - of_era // 146_096) // 365
    of_year = of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    mp = (5 * of_year + 2) // 153
    day = of_year - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return year_of_era + era * 400 + (month <= 2), month, day


def time_clip(ms: int) -> int | None:
    return ms if abs(ms) <= _MAX_TIME else None


def date_parse(text: str) -> int | None:
    """``Date.parse(text)`` in UTC: milliseconds since 1970, or None for NaN."""
    units = list(memoryview(text.encode("utf-16-le", "surrogatepass")).cast("H"))
    parsed = _parse(units)
    if parsed is None:
        return None
    (year, month, day), milliseconds, offset = parsed
    if abs(year) > _MAX_YEAR:
        return None
    moment = days_from_civil(year, month, day) * MS_PER_DAY + milliseconds
    if offset is None:
        # Local time: V8 first refuses a time more than ten days past the range, then converts it to UTC,
        # which here changes nothing.
        if abs(moment) > _MAX_TIME + 10 * MS_PER_DAY:
            return None
        return time_clip(moment)
    return time_clip(moment - offset * 1000)


def local_date(year: int, month_index: int, day: int) -> int | None:
    """``new Date(year, monthIndex, day)`` in UTC: a year 0-99 is 19xx; months and days roll over."""
    if 0 <= year <= 99:
        year += 1900
    return time_clip(days_from_civil(year, month_index + 1, day) * MS_PER_DAY)


def utc_day(ms: int) -> tuple[int, int, int]:
    """(year, month, day) of a time: ``getFullYear``, ``getMonth() + 1``, ``getDate`` in UTC."""
    return civil_from_days(ms // MS_PER_DAY)


def iso_day(ms: int) -> str:
    """``date.toISOString().split("T")[0]``: a year outside 0-9999 written with a sign and six digits."""
    year, month, day = utc_day(ms)
    written = f"{year:04d}" if 0 <= year <= 9999 else f"{'-' if year < 0 else '+'}{abs(year):06d}"
    return f"{written}-{month:02d}-{day:02d}"
