// Cron expressions (config/cron.hpp): the syntax, Vixie cron's
// day-of-month/day-of-week rule, and ticks in time zones across daylight
// saving time changes (gaps move to the first instant after them, repeats
// fire once), month ends and leap days.

#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "actor_worker/config/cron.hpp"

using namespace std::chrono_literals;
using aw::cron_expression;
using aw::cron_schedule;
using aw::cron_time;

namespace {

/// "2026-03-29T01:00:00Z" -> the instant.
cron_time utc(const std::string& text) {
  int y, mo, d, h, mi, s;
  BOOST_REQUIRE(std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%dZ", &y, &mo, &d,
                            &h, &mi, &s)
                == 6);
  // Days from civil (Howard Hinnant's algorithm), to keep the test free
  // of the library under test.
  y -= mo <= 2;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const long days = era * 146097L + static_cast<long>(doe) - 719468L;
  return cron_time{std::chrono::seconds{days * 86400L + h * 3600L + mi * 60L + s}};
}

cron_schedule schedule(const std::string& expr,
                       const std::string& zone = "UTC") {
  return cron_schedule{cron_expression::parse(expr), zone};
}

/// The next `n` ticks after `from`, as text.
std::vector<std::string> ticks(const cron_schedule& s, const std::string& from,
                               int n) {
  std::vector<std::string> out;
  auto t = utc(from);
  for (int i = 0; i < n; ++i) {
    auto next = s.next_after(t);
    BOOST_REQUIRE(next.has_value());
    out.push_back(aw::format_utc(*next));
    t = *next;
  }
  return out;
}

std::string next(const cron_schedule& s, const std::string& from) {
  auto n = s.next_after(utc(from));
  BOOST_REQUIRE(n.has_value());
  return aw::format_utc(*n);
}

std::string latest(const cron_schedule& s, const std::string& at) {
  auto n = s.latest_at_or_before(utc(at));
  BOOST_REQUIRE(n.has_value());
  return aw::format_utc(*n);
}

/// The message of the std::invalid_argument that parsing `expr` throws.
std::string parse_error(const std::string& expr) {
  try {
    cron_expression::parse(expr);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  BOOST_FAIL("\"" + expr + "\" parsed, but it is invalid");
  return {};
}

using strings = std::vector<std::string>;

} // namespace

BOOST_AUTO_TEST_SUITE(cron_test)

BOOST_AUTO_TEST_CASE(five_fields_tick_on_the_minute_strictly_after) {
  auto s = schedule("* * * * *");
  BOOST_TEST(next(s, "2026-12-01T12:00:30Z") == "2026-12-01T12:01:00Z");
  BOOST_TEST(next(s, "2026-12-01T12:01:00Z") == "2026-12-01T12:02:00Z");
  BOOST_TEST(next(s, "2026-12-31T23:59:00Z") == "2027-01-01T00:00:00Z");
}

BOOST_AUTO_TEST_CASE(a_leading_sixth_field_is_seconds) {
  BOOST_TEST(ticks(schedule("* * * * * *"), "2026-12-01T12:00:58Z", 3)
             == (strings{"2026-12-01T12:00:59Z", "2026-12-01T12:01:00Z",
                         "2026-12-01T12:01:01Z"}));
  BOOST_TEST(ticks(schedule("*/15 * * * * *"), "2026-12-01T12:00:00Z", 5)
             == (strings{"2026-12-01T12:00:15Z", "2026-12-01T12:00:30Z",
                         "2026-12-01T12:00:45Z", "2026-12-01T12:01:00Z",
                         "2026-12-01T12:01:15Z"}));
  BOOST_TEST(ticks(schedule("5,10 0 12 * * *"), "2026-12-01T00:00:00Z", 3)
             == (strings{"2026-12-01T12:00:05Z", "2026-12-01T12:00:10Z",
                         "2026-12-02T12:00:05Z"}));
  // Sub-second instants: the tick of the second that already began is
  // not after them.
  auto s = schedule("* * * * * *");
  auto t = std::chrono::system_clock::time_point{utc("2026-12-01T12:00:00Z")}
           + 500ms;
  BOOST_TEST(aw::format_utc(*s.next_after(t)) == "2026-12-01T12:00:01Z");
  BOOST_TEST(aw::format_utc(*s.latest_at_or_before(t))
             == "2026-12-01T12:00:00Z");
}

BOOST_AUTO_TEST_CASE(steps_ranges_and_lists) {
  // Hours 9, 13, 17 on weekdays: from Friday evening to Monday morning.
  BOOST_TEST(ticks(schedule("0 9-17/4 * * MON-FRI"), "2026-12-04T17:30:00Z", 4)
             == (strings{"2026-12-07T09:00:00Z", "2026-12-07T13:00:00Z",
                         "2026-12-07T17:00:00Z", "2026-12-08T09:00:00Z"}));
  // "a/n": from a to the field's maximum.
  BOOST_TEST(ticks(schedule("50/5 * * * *"), "2026-12-01T12:00:00Z", 3)
             == (strings{"2026-12-01T12:50:00Z", "2026-12-01T12:55:00Z",
                         "2026-12-01T13:50:00Z"}));
  BOOST_TEST(ticks(schedule("0,30 1-2,23 * * *"), "2026-12-01T00:00:00Z", 6)
             == (strings{"2026-12-01T01:00:00Z", "2026-12-01T01:30:00Z",
                         "2026-12-01T02:00:00Z", "2026-12-01T02:30:00Z",
                         "2026-12-01T23:00:00Z", "2026-12-01T23:30:00Z"}));
}

BOOST_AUTO_TEST_CASE(month_and_weekday_names_in_any_case) {
  BOOST_TEST(ticks(schedule("0 0 1 jan,Jul *"), "2026-02-01T00:00:00Z", 2)
             == (strings{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}));
  // 7 and SUN are Sunday, as 0 is.
  auto sunday = ticks(schedule("0 0 * * 0"), "2026-12-01T00:00:00Z", 2);
  BOOST_TEST(ticks(schedule("0 0 * * 7"), "2026-12-01T00:00:00Z", 2) == sunday);
  BOOST_TEST(ticks(schedule("0 0 * * sun"), "2026-12-01T00:00:00Z", 2) == sunday);
  BOOST_TEST(sunday == (strings{"2026-12-06T00:00:00Z", "2026-12-13T00:00:00Z"}));
  BOOST_TEST(ticks(schedule("0 0 * * 5-7"), "2026-12-01T00:00:00Z", 3)
             == (strings{"2026-12-04T00:00:00Z", "2026-12-05T00:00:00Z",
                         "2026-12-06T00:00:00Z"}));
}

BOOST_AUTO_TEST_CASE(restricted_day_of_month_and_weekday_combine_with_or) {
  // Every 13th and every Friday (Vixie cron), not only Friday the 13th.
  BOOST_TEST(ticks(schedule("0 0 13 * FRI"), "2026-02-01T00:00:00Z", 4)
             == (strings{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z",
                         "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z"}));
  BOOST_TEST(ticks(schedule("0 0 13 * FRI"), "2026-02-27T00:00:00Z", 2)
             == (strings{"2026-03-06T00:00:00Z", "2026-03-13T00:00:00Z"}));
}

BOOST_AUTO_TEST_CASE(a_day_field_starting_with_a_star_combines_with_and) {
  // Odd days that are Mondays: 2026-11-02 is a Monday (even), 11-09 odd.
  BOOST_TEST(ticks(schedule("0 0 */2 * MON"), "2026-11-01T00:00:00Z", 2)
             == (strings{"2026-11-09T00:00:00Z", "2026-11-23T00:00:00Z"}));
  // `*` in day-of-week: the day of the month alone decides.
  BOOST_TEST(next(schedule("0 0 13 * *"), "2026-02-01T00:00:00Z")
             == "2026-02-13T00:00:00Z");
}

BOOST_AUTO_TEST_CASE(the_31st_skips_shorter_months) {
  BOOST_TEST(ticks(schedule("0 0 31 * *"), "2026-03-31T00:00:00Z", 3)
             == (strings{"2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z",
                         "2026-08-31T00:00:00Z"}));
  BOOST_TEST(next(schedule("0 0 30 * *"), "2026-01-30T00:00:00Z")
             == "2026-03-30T00:00:00Z");
}

BOOST_AUTO_TEST_CASE(a_leap_day_comes_every_four_years_but_not_in_2100) {
  auto s = schedule("0 12 29 2 *");
  BOOST_TEST(next(s, "2026-03-01T00:00:00Z") == "2028-02-29T12:00:00Z");
  BOOST_TEST(next(s, "2096-03-01T00:00:00Z") == "2104-02-29T12:00:00Z");
  BOOST_TEST(latest(s, "2027-06-01T00:00:00Z") == "2024-02-29T12:00:00Z");
}

BOOST_AUTO_TEST_CASE(macros_stand_for_their_five_field_forms) {
  auto at = "2026-12-01T12:34:56Z";
  BOOST_TEST(next(schedule("@daily"), at) == next(schedule("0 0 * * *"), at));
  BOOST_TEST(next(schedule("@midnight"), at) == next(schedule("0 0 * * *"), at));
  BOOST_TEST(next(schedule("@hourly"), at) == "2026-12-01T13:00:00Z");
  BOOST_TEST(next(schedule("@weekly"), at) == "2026-12-06T00:00:00Z");
  BOOST_TEST(next(schedule("@monthly"), at) == "2027-01-01T00:00:00Z");
  BOOST_TEST(next(schedule("@YEARLY"), at) == "2027-01-01T00:00:00Z");
  BOOST_TEST(next(schedule("@annually"), at) == "2027-01-01T00:00:00Z");
}

BOOST_AUTO_TEST_CASE(latest_at_or_before_includes_the_instant_itself) {
  auto s = schedule("*/15 * * * *");
  BOOST_TEST(latest(s, "2026-12-01T12:07:59Z") == "2026-12-01T12:00:00Z");
  BOOST_TEST(latest(s, "2026-12-01T12:15:00Z") == "2026-12-01T12:15:00Z");
  BOOST_TEST(latest(s, "2026-01-01T00:14:59Z") == "2026-01-01T00:00:00Z");
  BOOST_TEST(latest(schedule("0 0 1 1 *"), "2026-12-01T00:00:00Z")
             == "2026-01-01T00:00:00Z");
  BOOST_TEST(latest(schedule("0 9 * * MON-FRI"), "2026-12-06T12:00:00Z")
             == "2026-12-04T09:00:00Z"); // Sunday -> Friday
}

BOOST_AUTO_TEST_CASE(local_time_in_a_zone_without_dst_changes) {
  // 09:00 in Tokyo (UTC+9, no DST) is midnight UTC.
  BOOST_TEST(ticks(schedule("0 9 * * *", "Asia/Tokyo"), "2026-12-01T00:00:00Z", 2)
             == (strings{"2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z"}));
  // Berlin in winter: UTC+1.
  BOOST_TEST(next(schedule("30 2 * * *", "Europe/Berlin"), "2026-12-01T00:00:00Z")
             == "2026-12-01T01:30:00Z");
}

BOOST_AUTO_TEST_CASE(berlin_spring_gap_moves_the_tick_to_the_end_of_the_gap) {
  // 2026-03-29: 02:00 CET (01:00Z) becomes 03:00 CEST. 02:30 does not
  // exist: it fires at 03:00 CEST, then at 02:30 CEST the next day.
  auto s = schedule("30 2 * * *", "Europe/Berlin");
  BOOST_TEST(ticks(s, "2026-03-28T00:00:00Z", 3)
             == (strings{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z",
                         "2026-03-30T00:30:00Z"}));
  BOOST_TEST(latest(s, "2026-03-29T01:00:00Z") == "2026-03-29T01:00:00Z");
  BOOST_TEST(latest(s, "2026-03-29T00:59:59Z") == "2026-03-28T01:30:00Z");
  // Every minute of 02:xx: the whole gap fires once.
  BOOST_TEST(ticks(schedule("* 2 * * *", "Europe/Berlin"), "2026-03-29T00:00:00Z", 2)
             == (strings{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"}));
  // 02:00 and 02:30 fall in the gap, 03:00 is its end: one tick for all
  // three, then 03:30.
  BOOST_TEST(ticks(schedule("*/30 2-3 * * *", "Europe/Berlin"), "2026-03-29T00:00:00Z", 3)
             == (strings{"2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z",
                         "2026-03-30T00:00:00Z"}));
  // Every second across the change: no second is skipped in real time.
  BOOST_TEST(ticks(schedule("* * * * * *", "Europe/Berlin"), "2026-03-29T00:59:58Z", 3)
             == (strings{"2026-03-29T00:59:59Z", "2026-03-29T01:00:00Z",
                         "2026-03-29T01:00:01Z"}));
}

BOOST_AUTO_TEST_CASE(berlin_autumn_repeat_fires_once) {
  // 2026-10-25: 03:00 CEST (01:00Z) becomes 02:00 CET; 02:30 happens at
  // 00:30Z and again at 01:30Z. It fires the first time only.
  auto s = schedule("30 2 * * *", "Europe/Berlin");
  BOOST_TEST(ticks(s, "2026-10-24T12:00:00Z", 2)
             == (strings{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}));
  BOOST_TEST(latest(s, "2026-10-25T01:45:00Z") == "2026-10-25T00:30:00Z");
  // Every minute: 02:59 CEST, then the repeated hour is skipped (its local
  // times already fired), then 03:00 CET.
  BOOST_TEST(ticks(schedule("* * * * *", "Europe/Berlin"), "2026-10-25T00:58:00Z", 2)
             == (strings{"2026-10-25T00:59:00Z", "2026-10-25T02:00:00Z"}));
  BOOST_TEST(latest(schedule("* * * * *", "Europe/Berlin"), "2026-10-25T01:30:00Z")
             == "2026-10-25T00:59:00Z");
  // 03:00 exists once.
  BOOST_TEST(next(schedule("0 3 * * *", "Europe/Berlin"), "2026-10-24T12:00:00Z")
             == "2026-10-25T02:00:00Z");
}

BOOST_AUTO_TEST_CASE(new_york_gap_and_repeat) {
  // 2026-03-08: 02:00 EST (07:00Z) becomes 03:00 EDT.
  BOOST_TEST(ticks(schedule("30 2 * * *", "America/New_York"), "2026-03-07T00:00:00Z", 3)
             == (strings{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z",
                         "2026-03-09T06:30:00Z"}));
  // 2026-11-01: 02:00 EDT (06:00Z) becomes 01:00 EST; 01:30 happens at
  // 05:30Z and 06:30Z, and fires at 05:30Z only.
  BOOST_TEST(ticks(schedule("30 1 * * *", "America/New_York"), "2026-10-31T12:00:00Z", 2)
             == (strings{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}));
  // Hourly: 00:00 EDT, 01:00 EDT, (01:00 EST skipped), 02:00 EST.
  BOOST_TEST(ticks(schedule("0 * * * *", "America/New_York"), "2026-11-01T03:30:00Z", 3)
             == (strings{"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z",
                         "2026-11-01T07:00:00Z"}));
}

BOOST_AUTO_TEST_CASE(invalid_expressions_say_which_field_and_why) {
  auto has = [](const std::string& message, const std::string& part) {
    BOOST_TEST_INFO(message);
    BOOST_TEST(message.find(part) != std::string::npos);
  };
  has(parse_error("* * * *"), "expected 5 fields");
  has(parse_error("* * * * * * *"), "got 7");
  has(parse_error(""), "got 0");
  has(parse_error("60 * * * *"), "minute field \"60\": 60 is out of range 0-59");
  has(parse_error("0 24 * * *"), "hour field");
  has(parse_error("0 0 0 * *"), "day-of-month field \"0\": 0 is out of range 1-31");
  has(parse_error("0 0 * 13 *"), "month field");
  has(parse_error("0 0 * * 8"), "day-of-week field");
  has(parse_error("60 * * * * *"), "second field");
  has(parse_error("5-1 * * * *"), "runs backwards");
  has(parse_error("0 0 * * FRI-MON"), "runs backwards");
  has(parse_error("*/0 * * * *"), "at least 1");
  has(parse_error("*/x * * * *"), "positive number");
  has(parse_error("0 0 * * MON-FOO"), "'FOO' is not a value (write 0-7 or SUN-SAT)");
  has(parse_error("0 0 * FOO *"), "(write 1-12 or JAN-DEC)");
  has(parse_error("0 0 ? * *"), "Quartz");
  has(parse_error("0 0 L * *"), "Quartz");
  has(parse_error("0 0 * * 5#3"), "Quartz");
  has(parse_error(",5 * * * *"), "empty list item");
  has(parse_error("5, * * * *"), "empty list item");
  has(parse_error("0 0 31 2 *"), "never matches: day 31 does not occur in February");
  has(parse_error("0 0 30,31 2 *"), "never matches");
  has(parse_error("@reboot"), "unknown macro");
}

BOOST_AUTO_TEST_CASE(a_restricted_weekday_makes_a_missing_day_possible) {
  // OR: every Monday in February, though Feb 31 never comes.
  BOOST_TEST(next(schedule("0 0 31 2 MON"), "2026-12-01T00:00:00Z")
             == "2027-02-01T00:00:00Z");
}

BOOST_AUTO_TEST_CASE(unknown_time_zones_are_refused) {
  BOOST_CHECK_THROW(aw::check_time_zone("Mars/Olympus_Mons"), std::invalid_argument);
  BOOST_CHECK_THROW(schedule("* * * * *", "Europe/Berlln"), std::invalid_argument);
  BOOST_CHECK_NO_THROW(aw::check_time_zone("UTC"));
  BOOST_CHECK_NO_THROW(aw::check_time_zone("America/New_York"));
  try {
    aw::check_time_zone("CEST");
    BOOST_FAIL("CEST is an abbreviation, not a zone");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string{e.what()}.find("unknown time zone \"CEST\"")
               != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()
