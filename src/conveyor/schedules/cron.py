"""Cron expressions: ``minute hour day-of-month month day-of-week`` (five fields), or six
with a leading ``second`` field. Each field is ``*``, a number, a range ``a-b``, a list
``a,b,c`` and any of them with a step ``/n``; months and weekdays take names (``jan``,
``mon``); weekday 0 and 7 are Sunday. As in cron, when both day-of-month and day-of-week are
restricted, a day matching either runs. Times are UTC."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from conveyor.errors import ConfigurationError

__all__ = ["Cron"]

_MONTHS = {
    name: i
    for i, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
        start=1,
    )
}
_DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (  # name, low, high, names
    ("second", 0, 59, {}),
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
_LIMIT = timedelta(days=366 * 5)  # an expression that never matches (Feb 30) is refused


def _field(text: str, name: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()

    def number(part: str) -> int:
        value = names.get(part.lower()) if names else None
        if value is None:
            if not part.isdigit():
                raise ValueError(part)
            value = int(part)
        if not low <= value <= high:
            raise ValueError(part)
        return value

    for item in text.split(","):
        body, slash, step_text = item.partition("/")
        step = int(step_text) if slash else 1
        if slash and (not step_text.isdigit() or step < 1):
            raise ValueError(item)
        if body == "*":
            first, last = low, high
        elif "-" in body:
            start, _, end = body.partition("-")
            first, last = number(start), number(end)
            if first > last:
                raise ValueError(item)
        else:
            first = number(body)
            last = high if slash else first
        values.update(range(first, last + 1, step))
    if not values:
        raise ValueError(text)
    return frozenset(values)


@dataclass(frozen=True)
class Cron:
    """A parsed cron expression; :meth:`next_after` gives the next time it fires."""

    text: str
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, text: str) -> Cron:
        """Raises ConfigurationError naming the field that is wrong."""
        if not isinstance(text, str):
            raise ConfigurationError(f"a cron expression is text, got {text!r}", "cron")
        parts = text.split()
        if len(parts) == 5:
            parts = ["0", *parts]
        if len(parts) != 6:
            raise ConfigurationError(
                f"cron {text!r} needs 5 fields (minute hour day month weekday) or 6 (with "
                "seconds first)",
                "cron",
            )
        parsed = []
        for part, (name, low, high, names) in zip(parts, _FIELDS, strict=True):
            try:
                parsed.append(_field(part, name, low, high, names))
            except ValueError:
                raise ConfigurationError(
                    f"cron {text!r}: {part!r} is not a {name} ({low}-{high})", "cron"
                ) from None
        seconds, minutes, hours, days, months, weekdays = parsed
        weekdays = frozenset(0 if day == 7 else day for day in weekdays)
        cron = cls(
            text,
            seconds,
            minutes,
            hours,
            days,
            months,
            weekdays,
            # as cron does: a field that starts with * (*/2 too) does not restrict the day
            any_day=parts[3].startswith("*"),
            any_weekday=parts[5].startswith("*"),
        )
        if cron.next_after(datetime(2000, 1, 1, tzinfo=UTC)) is None:
            raise ConfigurationError(f"cron {text!r} never fires", "cron")
        return cron

    def _day_matches(self, moment: datetime) -> bool:
        if moment.month not in self.months:
            return False
        day = moment.day in self.days
        weekday = (moment.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:  # one of them starts with *: both must match
            return day and weekday
        return day or weekday  # both restricted: either (cron's rule)

    def next_after(self, moment: datetime) -> datetime | None:
        """The first time after ``moment`` (an aware datetime) that this expression fires,
        in UTC to the second; ``None`` if none within five years."""
        current = moment.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=1)
        limit = current + _LIMIT
        while current <= limit:
            if not self._day_matches(current):
                current = (current + timedelta(days=1)).replace(hour=0, minute=0, second=0)
                continue
            if current.hour not in self.hours:
                current = (current + timedelta(hours=1)).replace(minute=0, second=0)
                continue
            if current.minute not in self.minutes:
                current = (current + timedelta(minutes=1)).replace(second=0)
                continue
            if current.second not in self.seconds:
                current += timedelta(seconds=1)
                continue
            return current
        return None
