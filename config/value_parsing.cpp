// The values a configuration spells as text: durations ("2s"), sizes
// ("64MiB"), rate limits ("10/s") and names; and durations written back.

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include "actor_worker/config/config.hpp"

namespace aw {

std::pair<int, std::chrono::milliseconds>
parse_rate_limit(const std::string& text) {
  auto fail = [&](const std::string& why) {
    return std::invalid_argument("invalid rate limit \"" + text + "\": " + why
                                 + " (write \"N/s\" or \"N/m\", e.g. "
                                   "\"10/s\", \"600/m\")");
  };
  auto slash = text.find('/');
  if (slash == std::string::npos)
    throw fail("expected \"/s\" or \"/m\" after the number");
  auto number = text.substr(0, slash);
  auto unit = text.substr(slash + 1);
  if (number.empty() || number.size() > 9
      || !std::all_of(number.begin(), number.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c));
         }))
    throw fail("expected a whole number of jobs before the '/'");
  auto n = std::stoll(number);
  if (n < 1 || n > defaults::max_rate_limit)
    throw fail("the number of jobs must be from 1 to "
               + std::to_string(defaults::max_rate_limit));
  std::chrono::milliseconds period;
  if (unit == "s")
    period = std::chrono::seconds{1};
  else if (unit == "m")
    period = std::chrono::minutes{1};
  else
    throw fail("unknown period \"" + unit + "\" (only s and m)");
  return {static_cast<int>(n), period};
}

std::string name_problem(const std::string& name) {
  if (name.empty())
    return "must not be empty";
  if (name.size() > defaults::max_name_length)
    return "is " + std::to_string(name.size()) + " bytes long, more than the "
           + std::to_string(defaults::max_name_length) + " allowed";
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f)
      return "contains a control character";
  return {};
}

std::chrono::milliseconds parse_duration(const std::string& text) {
  auto fail = [&](const std::string& why) {
    return std::invalid_argument("invalid duration \"" + text + "\": " + why
                                 + " (write e.g. \"250ms\", \"2s\", \"5m\", "
                                   "\"24h\")");
  };
  if (text == "0")
    return std::chrono::milliseconds{0};
  // Digits, optionally one '.' and more digits ("1.5"), then the unit.
  size_t pos = 0;
  auto digits = [&] {
    auto start = pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
      ++pos;
    return pos - start;
  };
  if (digits() == 0)
    throw fail("expected a number first");
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    if (digits() == 0)
      throw fail("expected digits after the decimal point");
  }
  if (pos < text.size() && text[pos] == '.')
    throw fail("more than one decimal point");
  double number;
  try {
    number = std::stod(text.substr(0, pos));
  } catch (...) {
    throw fail("bad number");
  }
  auto unit = text.substr(pos);
  double ms_per_unit;
  if (unit == "ms")
    ms_per_unit = 1;
  else if (unit == "s")
    ms_per_unit = 1000;
  else if (unit == "m")
    ms_per_unit = 60'000;
  else if (unit == "h")
    ms_per_unit = 3'600'000;
  else if (unit == "d")
    ms_per_unit = 86'400'000;
  else if (unit.empty())
    throw fail("missing unit");
  else
    throw fail("unknown unit \"" + unit + "\"");
  double ms = number * ms_per_unit;
  if (!std::isfinite(ms)
      || ms > static_cast<double>(defaults::max_duration.count()))
    throw fail("longer than the maximum of "
               + std::to_string(defaults::max_duration.count() / 86'400'000)
               + "d");
  return std::chrono::milliseconds{static_cast<int64_t>(std::llround(ms))};
}

int64_t parse_size(const std::string& text) {
  auto fail = [&](const std::string& why) {
    return std::invalid_argument("invalid size \"" + text + "\": " + why
                                 + " (write e.g. \"65536\", \"512KiB\", "
                                   "\"64MiB\", \"1GiB\")");
  };
  size_t pos = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
    ++pos;
  if (pos == 0)
    throw fail("expected a number first");
  if (pos > 15)
    throw fail("too large");
  auto number = std::stoll(text.substr(0, pos));
  auto unit = text.substr(pos);
  int64_t factor;
  if (unit.empty() || unit == "B")
    factor = 1;
  else if (unit == "KiB")
    factor = int64_t{1} << 10;
  else if (unit == "MiB")
    factor = int64_t{1} << 20;
  else if (unit == "GiB")
    factor = int64_t{1} << 30;
  else if (unit == "kB")
    factor = 1000;
  else if (unit == "MB")
    factor = 1000 * 1000;
  else if (unit == "GB")
    factor = 1000 * 1000 * 1000;
  else
    throw fail("unknown unit \"" + unit + "\"");
  if (number > (int64_t{1} << 50) / factor)
    throw fail("too large");
  return number * factor;
}

std::string format_duration(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms % 3'600'000 == 0 && ms != 0)
    return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0 && ms != 0)
    return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0)
    return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

} // namespace aw
