// Cron expressions: parsing, and the search for ticks in local civil time
// (see cron.hpp for the syntax and the daylight saving time rules).

#include "actor_worker/config/cron.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <date/date.h>
#include <date/tz.h>

#include "actor_worker/config/defaults.hpp"

namespace aw {

namespace {

using namespace std::chrono_literals;
using local_seconds = date::local_seconds;

/// One field's name, range and value names.
struct field_spec {
  const char* name;
  int min;
  int max;
  /// Names of min, min+1, ... (month: JAN = 1; weekday: SUN = 0), or none.
  std::vector<std::string> names;
};

const field_spec second_field{"second", 0, 59, {}};
const field_spec minute_field{"minute", 0, 59, {}};
const field_spec hour_field{"hour", 0, 23, {}};
const field_spec day_field{"day-of-month", 1, 31, {}};
const field_spec month_field{"month",
                             1,
                             12,
                             {"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL",
                              "AUG", "SEP", "OCT", "NOV", "DEC"}};
const field_spec weekday_field{
  "day-of-week", 0, 7, {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}};

std::string upper(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

[[noreturn]] void field_error(const field_spec& f, const std::string& text,
                              const std::string& why) {
  throw std::invalid_argument("the " + std::string{f.name} + " field \""
                              + text + "\": " + why);
}

/// A number or (where the field has names) a name.
int parse_value(const field_spec& f, const std::string& field_text,
                const std::string& v) {
  if (v.empty())
    field_error(f, field_text, "a value is missing");
  if (std::all_of(v.begin(), v.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    if (v.size() > 4)
      field_error(f, field_text, v + " is out of range " + std::to_string(f.min)
                                   + "-" + std::to_string(f.max));
    int n = std::stoi(v);
    if (n < f.min || n > f.max)
      field_error(f, field_text,
                  v + " is out of range " + std::to_string(f.min) + "-"
                    + std::to_string(f.max));
    return n;
  }
  auto u = upper(v);
  for (size_t i = 0; i < f.names.size(); ++i)
    if (f.names[i] == u)
      return f.min + static_cast<int>(i);
  std::string hint = std::to_string(f.min) + "-" + std::to_string(f.max);
  if (!f.names.empty())
    hint += " or " + f.names.front() + "-" + f.names.back();
  bool quartz_w = u.size() > 1 && u.back() == 'W'
                  && std::all_of(u.begin(), u.end() - 1, [](char c) {
                       return std::isdigit(static_cast<unsigned char>(c))
                              || c == 'L';
                     });
  if (v == "?" || u == "L" || quartz_w || v.find('#') != std::string::npos)
    field_error(f, field_text,
                "'" + v + "' is Quartz syntax, which is not supported (write "
                  + hint + ")");
  field_error(f, field_text, "'" + v + "' is not a value (write " + hint + ")");
}

/// Parses a field into a bit set of its values.
std::bitset<64> parse_field(const field_spec& f, const std::string& text) {
  std::bitset<64> bits;
  if (text.empty())
    field_error(f, text, "empty");
  std::stringstream items(text);
  std::string item;
  size_t count = 0;
  while (std::getline(items, item, ',')) {
    ++count;
    if (item.empty())
      field_error(f, text, "an empty list item");
    auto slash = item.find('/');
    std::string range = item.substr(0, slash);
    int step = 1;
    if (slash != std::string::npos) {
      auto s = item.substr(slash + 1);
      if (s.empty() || s.size() > 4
          || !std::all_of(s.begin(), s.end(), [](char c) {
               return std::isdigit(static_cast<unsigned char>(c));
             }))
        field_error(f, text, "the step after '/' must be a positive number");
      step = std::stoi(s);
      if (step < 1)
        field_error(f, text, "the step must be at least 1");
    }
    int lo = f.min;
    int hi = f.max;
    if (range == "*") {
      // every value
    } else if (auto dash = range.find('-'); dash != std::string::npos) {
      lo = parse_value(f, text, range.substr(0, dash));
      hi = parse_value(f, text, range.substr(dash + 1));
      if (lo > hi)
        field_error(f, text,
                    "the range " + range + " runs backwards (write it as a "
                                           "list of two ranges)");
    } else {
      lo = parse_value(f, text, range);
      hi = slash == std::string::npos ? lo : f.max; // "a/n": a to the max
    }
    for (int v = lo; v <= hi; v += step)
      bits.set(static_cast<size_t>(v));
  }
  if (count == 0 || text.back() == ',')
    field_error(f, text, "an empty list item");
  return bits;
}

template <size_t N>
std::bitset<N> narrow(const std::bitset<64>& b) {
  std::bitset<N> out;
  for (size_t i = 0; i < N; ++i)
    out[i] = b[i];
  return out;
}

std::string expand_macro(const std::string& text) {
  auto u = upper(text);
  if (u == "@YEARLY" || u == "@ANNUALLY")
    return "0 0 1 1 *";
  if (u == "@MONTHLY")
    return "0 0 1 * *";
  if (u == "@WEEKLY")
    return "0 0 * * 0";
  if (u == "@DAILY" || u == "@MIDNIGHT")
    return "0 0 * * *";
  if (u == "@HOURLY")
    return "0 * * * *";
  throw std::invalid_argument(
    "unknown macro \"" + text
    + "\" (known: @yearly, @annually, @monthly, @weekly, @daily, @midnight, "
      "@hourly; @reboot has no meaning for a cluster's schedule)");
}

/// Days in `month` of a leap year (the most it can have).
int max_days(int month) {
  static const int days[] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return days[month];
}

const char* month_name(int month) {
  static const char* names[] = {"",        "January",  "February", "March",
                                "April",   "May",      "June",     "July",
                                "August",  "September", "October", "November",
                                "December"};
  return names[month];
}

template <size_t N>
int next_bit(const std::bitset<N>& b, int from) {
  for (int i = from; i < static_cast<int>(N); ++i)
    if (b[static_cast<size_t>(i)])
      return i;
  return -1;
}

template <size_t N>
int prev_bit(const std::bitset<N>& b, int from) {
  for (int i = from; i >= 0; --i)
    if (b[static_cast<size_t>(i)])
      return i;
  return -1;
}

struct civil {
  date::local_days day;
  date::year_month_day ymd;
  int weekday;
  int hour;
  int minute;
  int second;
};

civil split(local_seconds t) {
  civil c;
  c.day = date::floor<date::days>(t);
  c.ymd = date::year_month_day{c.day};
  c.weekday = static_cast<int>(date::weekday{c.day}.c_encoding());
  auto s = (t - c.day).count();
  c.hour = static_cast<int>(s / 3600);
  c.minute = static_cast<int>(s / 60 % 60);
  c.second = static_cast<int>(s % 60);
  return c;
}

/// The first local time at or after `t` that matches; nothing past
/// `limit` (a year).
std::optional<local_seconds> next_local(const cron_expression& e,
                                        local_seconds t, int limit) {
  while (true) {
    auto c = split(t);
    if (static_cast<int>(c.ymd.year()) > limit)
      return std::nullopt;
    auto month = static_cast<int>(static_cast<unsigned>(c.ymd.month()));
    if (!e.months[static_cast<size_t>(month)]) {
      auto ym = date::year_month{c.ymd.year(), c.ymd.month()} + date::months{1};
      t = local_seconds{date::local_days{ym / 1}};
      continue;
    }
    if (!e.day_matches(static_cast<int>(static_cast<unsigned>(c.ymd.day())),
                       c.weekday)) {
      t = local_seconds{c.day + date::days{1}};
      continue;
    }
    auto h = next_bit(e.hours, c.hour);
    if (h < 0) {
      t = local_seconds{c.day + date::days{1}};
      continue;
    }
    if (h != c.hour) {
      t = c.day + std::chrono::hours{h};
      continue;
    }
    auto m = next_bit(e.minutes, c.minute);
    if (m < 0) {
      t = c.day + std::chrono::hours{h + 1};
      continue;
    }
    if (m != c.minute) {
      t = c.day + std::chrono::hours{h} + std::chrono::minutes{m};
      continue;
    }
    auto s = next_bit(e.seconds, c.second);
    if (s < 0) {
      t = c.day + std::chrono::hours{h} + std::chrono::minutes{m + 1};
      continue;
    }
    return c.day + std::chrono::hours{h} + std::chrono::minutes{m}
           + std::chrono::seconds{s};
  }
}

/// The last local time at or before `t` that matches; nothing before
/// `limit` (a year).
std::optional<local_seconds> prev_local(const cron_expression& e,
                                        local_seconds t, int limit) {
  while (true) {
    auto c = split(t);
    if (static_cast<int>(c.ymd.year()) < limit)
      return std::nullopt;
    auto month = static_cast<int>(static_cast<unsigned>(c.ymd.month()));
    if (!e.months[static_cast<size_t>(month)]) {
      t = local_seconds{date::local_days{c.ymd.year() / c.ymd.month() / 1}}
          - 1s;
      continue;
    }
    if (!e.day_matches(static_cast<int>(static_cast<unsigned>(c.ymd.day())),
                       c.weekday)) {
      t = local_seconds{c.day} - 1s;
      continue;
    }
    auto h = prev_bit(e.hours, c.hour);
    if (h < 0) {
      t = local_seconds{c.day} - 1s;
      continue;
    }
    if (h != c.hour) {
      t = c.day + std::chrono::hours{h + 1} - 1s;
      continue;
    }
    auto m = prev_bit(e.minutes, c.minute);
    if (m < 0) {
      t = c.day + std::chrono::hours{h} - 1s;
      continue;
    }
    if (m != c.minute) {
      t = c.day + std::chrono::hours{h} + std::chrono::minutes{m + 1} - 1s;
      continue;
    }
    auto s = prev_bit(e.seconds, c.second);
    if (s < 0) {
      t = c.day + std::chrono::hours{h} + std::chrono::minutes{m} - 1s;
      continue;
    }
    return c.day + std::chrono::hours{h} + std::chrono::minutes{m}
           + std::chrono::seconds{s};
  }
}

/// The instant a local time names in `zone`: the only one; for a time
/// that occurs twice, the first; for a time in a gap, the first instant
/// after the gap. Non-decreasing in `t`.
cron_time instant_of(const date::time_zone* zone, local_seconds t) {
  auto info = zone->get_info(t);
  switch (info.result) {
    case date::local_info::unique:
    case date::local_info::ambiguous:
      return cron_time{t.time_since_epoch() - info.first.offset};
    case date::local_info::nonexistent:
    default:
      return date::floor<std::chrono::seconds>(info.first.end);
  }
}

int year_of(local_seconds t) {
  return static_cast<int>(
    date::year_month_day{date::floor<date::days>(t)}.year());
}

} // namespace

cron_expression cron_expression::parse(const std::string& text) {
  std::string body = text;
  auto first = body.find_first_not_of(" \t");
  if (first != std::string::npos && body[first] == '@') {
    auto last = body.find_last_not_of(" \t");
    body = expand_macro(body.substr(first, last - first + 1));
  }
  std::vector<std::string> fields;
  std::stringstream in(body);
  for (std::string f; in >> f;)
    fields.push_back(f);
  if (fields.size() != 5 && fields.size() != 6)
    throw std::invalid_argument(
      "expected 5 fields (minute hour day-of-month month day-of-week) or 6 "
      "(a second field first), got "
      + std::to_string(fields.size()));
  if (fields.size() == 5)
    fields.insert(fields.begin(), "0");
  cron_expression e;
  e.text_ = text;
  e.seconds = narrow<60>(parse_field(second_field, fields[0]));
  e.minutes = narrow<60>(parse_field(minute_field, fields[1]));
  e.hours = narrow<24>(parse_field(hour_field, fields[2]));
  e.days = narrow<32>(parse_field(day_field, fields[3]));
  e.months = narrow<13>(parse_field(month_field, fields[4]));
  auto weekdays = parse_field(weekday_field, fields[5]);
  if (weekdays[7])
    weekdays.set(0); // 7 is Sunday too
  e.weekdays = narrow<7>(weekdays);
  e.days_star = fields[3].front() == '*';
  e.weekdays_star = fields[5].front() == '*';
  // A day of the month that no chosen month has (`31 2`): never.
  bool day_decides = e.weekdays_star;
  if (day_decides) {
    bool possible = false;
    int first_day = 0;
    int first_month = 0;
    for (int m = 1; m <= 12; ++m)
      for (int d = 1; d <= 31; ++d)
        if (e.months[static_cast<size_t>(m)] && e.days[static_cast<size_t>(d)]) {
          if (first_day == 0) {
            first_day = d;
            first_month = m;
          }
          possible = possible || d <= max_days(m);
        }
    if (!possible)
      throw std::invalid_argument(
        "never matches: day " + std::to_string(first_day) + " does not occur in "
        + month_name(first_month)
        + (e.months.count() > 1 ? " or the other months given" : ""));
  }
  return e;
}

bool cron_expression::day_matches(int day, int weekday) const {
  bool dom = days[static_cast<size_t>(day)];
  bool dow = weekdays[static_cast<size_t>(weekday)];
  if (days_star || weekdays_star)
    return dom && dow;
  return dom || dow;
}

void check_time_zone(const std::string& name) {
  try {
    date::locate_zone(name);
  } catch (const std::exception&) {
    throw std::invalid_argument(
      "unknown time zone \"" + name
      + "\" (write an IANA name such as \"UTC\", \"Europe/Berlin\" or "
        "\"America/New_York\"; the names come from the system's tz database, "
        "Debian's tzdata package)");
  }
}

cron_schedule::cron_schedule(cron_expression expression,
                             const std::string& time_zone)
  : expression_(std::move(expression)), zone_name_(time_zone) {
  check_time_zone(time_zone);
  zone_ = date::locate_zone(time_zone);
}

std::optional<cron_time> cron_schedule::next_after(cron_time t) const {
  // Start at t's local time: every local time before it names an instant
  // at or before t (instant_of is non-decreasing), so the first match
  // whose instant is after t is the next tick. Local times of a repeated
  // hour come round twice; their instants (the first occurrence's) are
  // then behind t and skipped.
  auto local = zone_->to_local(t);
  auto limit = year_of(local) + defaults::cron_search_years;
  while (true) {
    auto match = next_local(expression_, local, limit);
    if (!match)
      return std::nullopt;
    auto at = instant_of(zone_, *match);
    if (at > t)
      return at;
    local = *match + 1s;
  }
}

std::optional<cron_time>
cron_schedule::next_after(std::chrono::system_clock::time_point t) const {
  return next_after(date::floor<std::chrono::seconds>(t));
}

std::optional<cron_time> cron_schedule::latest_at_or_before(cron_time t) const {
  // A local time later than t plus the largest offset around t names an
  // instant after t: start there and go back to the first match whose
  // instant is at or before t.
  auto offset = std::max({zone_->get_info(t).offset,
                          zone_->get_info(t - date::days{1}).offset,
                          zone_->get_info(t + date::days{1}).offset});
  auto local = local_seconds{t.time_since_epoch() + offset};
  auto limit = year_of(local) - defaults::cron_search_years;
  while (true) {
    auto match = prev_local(expression_, local, limit);
    if (!match)
      return std::nullopt;
    auto at = instant_of(zone_, *match);
    if (at <= t)
      return at;
    local = *match - 1s;
  }
}

std::optional<cron_time> cron_schedule::latest_at_or_before(
  std::chrono::system_clock::time_point t) const {
  return latest_at_or_before(date::floor<std::chrono::seconds>(t));
}

std::string format_utc(cron_time t) {
  return date::format("%FT%TZ", t);
}

} // namespace aw
