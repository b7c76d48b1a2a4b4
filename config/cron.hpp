#pragma once
// Cron expressions, and the ticks they name in a time zone.
//
// Syntax (crontab(5), Vixie cron's): five fields, `minute hour
// day-of-month month day-of-week`, or six with a leading `second`:
//
//   field          values
//   second         0-59            (only in the six-field form; five
//                                   fields mean second 0)
//   minute         0-59
//   hour           0-23
//   day-of-month   1-31
//   month          1-12 or JAN-DEC
//   day-of-week    0-7 or SUN-SAT  (0 and 7 are Sunday)
//
// Each field is `*`, a value, a range `a-b`, a step `*/n`, `a-b/n` or
// `a/n` (a to the field's maximum), or a comma-separated list of those.
// Names are case-insensitive and work in ranges (`MON-FRI`). A range
// must not run backwards (`FRI-MON` is an error: write `FRI-SAT,SUN,MON`
// or `0,1,5,6`). The macros @yearly (@annually), @monthly, @weekly,
// @daily (@midnight) and @hourly stand for their five-field forms.
// Quartz's `?`, `L`, `W` and `#` are not supported, nor is @reboot.
//
// Day-of-month and day-of-week combine as in Vixie cron: when both are
// restricted (neither field starts with `*`), a day matches when EITHER
// matches (`0 0 13 * FRI` runs on every 13th and every Friday); when one
// starts with `*` (`*`, `*/2`), a day must match both, which makes the
// other field alone decide.
//
// Time zones (IANA names, such as "Europe/Berlin"; the system's tz
// database, Debian's tzdata): the fields are read in local time, and
// across daylight saving time changes:
//
// - a local time that does not exist (the hour skipped when clocks go
//   forward) is MOVED to the first instant after the gap: a daily 02:30
//   in Berlin fires at 03:00 CEST on the last Sunday of March; several
//   ticks in the gap (an every-minute schedule) fire once, at that
//   instant;
// - a local time that occurs twice (the hour repeated when clocks go
//   back) fires ONCE, at its first occurrence: a daily 02:30 fires at
//   02:30 CEST and not again at 02:30 CET. A consequence: a schedule
//   that fires every second or minute in such a zone pauses for the
//   repeated hour. Frequent schedules belong in UTC (the default), which
//   has neither gaps nor repeats.
//
// Ticks are whole seconds. This header carries no dependency on the date
// library; config/cron.cpp uses Howard Hinnant's date/tz (Debian's
// libhowardhinnant-date-dev) over the system's zoneinfo files.

#include <bitset>
#include <chrono>
#include <optional>
#include <string>

namespace date {
class time_zone;
}

namespace aw {

/// An instant in whole seconds: the ticks of a schedule.
using cron_time
  = std::chrono::time_point<std::chrono::system_clock, std::chrono::seconds>;

/// A parsed cron expression: which local civil times it matches.
class cron_expression {
public:
  /// Parses `text` (see the syntax above). Throws std::invalid_argument
  /// naming the field, the text and the problem; an expression that can
  /// never match (`0 0 31 2 *`) is an error too.
  static cron_expression parse(const std::string& text);

  /// The expression as written.
  const std::string& text() const {
    return text_;
  }

  /// Whether a day matches the day-of-month and day-of-week fields, by
  /// Vixie cron's rule (above); `weekday`: 0 = Sunday.
  bool day_matches(int day, int weekday) const;

  /// Seconds 0-59 the expression matches (bit i: second i).
  std::bitset<60> seconds;
  /// Minutes 0-59 the expression matches.
  std::bitset<60> minutes;
  /// Hours 0-23 the expression matches.
  std::bitset<24> hours;
  /// Bits 1-31.
  std::bitset<32> days;
  /// Bits 1-12.
  std::bitset<13> months;
  /// Bits 0-6, 0 = Sunday.
  std::bitset<7> weekdays;
  /// The day-of-month field starts with `*` (Vixie's rule: see above).
  bool days_star = false;
  /// The day-of-week field starts with `*`.
  bool weekdays_star = false;

private:
  std::string text_;
};

/// Throws std::invalid_argument when `name` is not a time zone of the
/// system's tz database (IANA names such as "UTC", "Europe/Berlin").
void check_time_zone(const std::string& name);

/// A cron expression in a time zone: its ticks, as instants.
class cron_schedule {
public:
  /// Throws std::invalid_argument for an unknown time zone (check_time_zone).
  cron_schedule(cron_expression expression, const std::string& time_zone);

  /// The first tick strictly after `t`; nothing when none comes within
  /// defaults::cron_search_years.
  std::optional<cron_time> next_after(cron_time t) const;
  /// next_after() of a system_clock time, read in the schedule's time zone.
  std::optional<cron_time>
  next_after(std::chrono::system_clock::time_point t) const;

  /// The last tick at or before `t`; nothing when none came within
  /// defaults::cron_search_years.
  std::optional<cron_time> latest_at_or_before(cron_time t) const;
  /// latest_at_or_before() of a system_clock time, read in the schedule's time zone.
  std::optional<cron_time>
  latest_at_or_before(std::chrono::system_clock::time_point t) const;

  /// The parsed cron expression.
  const cron_expression& expression() const {
    return expression_;
  }
  /// The IANA name of the time zone the fields are read in ("UTC" by default).
  const std::string& time_zone_name() const {
    return zone_name_;
  }

private:
  cron_expression expression_;
  std::string zone_name_;
  const date::time_zone* zone_ = nullptr;
};

/// "2026-03-29T01:00:00Z".
std::string format_utc(cron_time t);

} // namespace aw
