// `actor-worker enqueue` (one job, or many from JSON lines), and the CLI's
// duration and timestamp flags.

#include "actor_worker/app/cli/cli.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/messages/printable.hpp"
#include "actor_worker/storage/admin_jobs.hpp"
#include "actor_worker/storage/admin_nodes.hpp"
#include "actor_worker/storage/enqueue.hpp"

namespace aw::cli {

/// A CLI duration: a bare number means seconds ("30"), else "500ms", "2m".
std::chrono::milliseconds seconds_or_duration(const char* flag,
                                              const std::string& text) {
  try {
    bool bare = text.find_first_not_of("0123456789.") == std::string::npos;
    return aw::parse_duration(bare ? text + "s" : text);
  } catch (const std::invalid_argument& e) {
    throw usage_error(std::string{flag} + ": " + e.what());
  }
}

namespace {

/// The whole seconds since the epoch a system_clock::time_point (64-bit
/// nanoseconds) holds with any fraction: 1677-09-21T00:12:45Z to
/// 2262-04-11T23:47:15Z.
constexpr int64_t rfc3339_max_seconds = INT64_MAX / 1'000'000'000 - 1;
constexpr int64_t rfc3339_min_seconds = -rfc3339_max_seconds;

} // namespace

std::chrono::system_clock::time_point parse_rfc3339(const std::string& what,
                                                   const std::string& text) {
  auto bad = [&](const std::string& why) {
    return usage_error(what + ": '" + aw::printable(text)
                       + "' is not an RFC 3339 timestamp (" + why
                       + "; e.g. 2030-01-02T03:04:05Z or "
                         "2030-01-02T05:04:05+02:00)");
  };
  size_t pos = 0;
  auto number = [&](size_t digits, int lo, int hi, const char* field) {
    if (pos + digits > text.size())
      throw bad(std::string{"no "} + field);
    int value = 0;
    for (size_t i = 0; i < digits; ++i) {
      char c = text[pos + i];
      if (c < '0' || c > '9')
        throw bad(std::string{"no "} + field);
      value = value * 10 + (c - '0');
    }
    pos += digits;
    if (value < lo || value > hi)
      throw bad(std::string{field} + " out of range");
    return value;
  };
  auto expect = [&](const char* options, const char* what_char) {
    if (pos >= text.size() || std::strchr(options, text[pos]) == nullptr)
      throw bad(std::string{"expected "} + what_char);
    ++pos;
  };
  std::tm tm{};
  tm.tm_year = number(4, 1, 9999, "year") - 1900;
  expect("-", "'-'");
  tm.tm_mon = number(2, 1, 12, "month") - 1;
  expect("-", "'-'");
  tm.tm_mday = number(2, 1, 31, "day");
  expect("Tt ", "'T' between date and time");
  tm.tm_hour = number(2, 0, 23, "hour");
  expect(":", "':'");
  tm.tm_min = number(2, 0, 59, "minute");
  expect(":", "':'");
  tm.tm_sec = number(2, 0, 60, "second");
  int64_t micros = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    size_t digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (digits < 6)
        micros = micros * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0)
      throw bad("no digits after '.'");
    for (size_t i = digits; i < 6; ++i)
      micros *= 10;
  }
  int offset_minutes = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int h = number(2, 0, 23, "offset hour");
    expect(":", "':' in the offset");
    int m = number(2, 0, 59, "offset minute");
    offset_minutes = sign * (h * 60 + m);
  } else {
    throw bad("no time zone: end with Z or an offset such as +02:00");
  }
  if (pos != text.size())
    throw bad("unexpected text at the end");
  int day = tm.tm_mday;
  auto secs = timegm(&tm);
  if (tm.tm_mday != day)
    throw bad("no such day in that month");
  secs -= static_cast<time_t>(offset_minutes) * 60;
  // A time_point counts nanoseconds in 64 bits: past these bounds it would
  // wrap (2262 stored as 1677, and the reverse), so refuse instead.
  if (secs < rfc3339_min_seconds || secs > rfc3339_max_seconds)
    throw usage_error(what + ": '" + aw::printable(text)
                      + "' is out of range (the earliest is "
                        "1677-09-21T00:12:45Z, the latest "
                        "2262-04-11T23:47:15Z)");
  return std::chrono::system_clock::time_point{
    std::chrono::seconds{secs} + std::chrono::microseconds{micros}};
}

void check_json_depth(const std::string& what, const std::string& text) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > aw::defaults::max_json_depth)
        throw usage_error(what + " nests arrays and objects more than "
                          + std::to_string(aw::defaults::max_json_depth)
                          + " deep (at byte " + std::to_string(i + 1)
                          + "); flatten it");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

std::string read_source(const std::string& what, const std::string& path) {
  if (path == "-") {
    std::stringstream buf;
    buf << std::cin.rdbuf();
    return buf.str();
  }
  std::ifstream in{path, std::ios::binary};
  if (!in)
    throw usage_error(what + ": cannot read '" + aw::printable(path)
                      + "': " + std::strerror(errno));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

namespace {

std::vector<std::string> split_tags(const std::string& text) {
  std::vector<std::string> tags;
  if (text.empty())
    return tags;
  size_t start = 0;
  for (;;) {
    auto comma = text.find(',', start);
    auto tag = text.substr(start, comma == std::string::npos
                                    ? std::string::npos
                                    : comma - start);
    if (tag.empty())
      throw usage_error("--tags: empty tag in '" + aw::printable(text)
                        + "' (tags are separated by commas: a,b)");
    tags.push_back(std::move(tag));
    if (comma == std::string::npos)
      return tags;
    start = comma + 1;
  }
}

/// Refuses a NUL character (\u0000) in any string or key of `j`:
/// PostgreSQL's jsonb cannot store one. `j` is at most max_json_depth
/// deep (check_json_depth ran first).
void refuse_nul(const std::string& what, const nlohmann::json& j) {
  auto has_nul = [](const std::string& s) {
    return s.find('\0') != std::string::npos;
  };
  auto refuse = [&] {
    throw usage_error(what + " holds a NUL character (\\u0000), which "
                             "PostgreSQL cannot store in jsonb; remove it "
                             "or encode the value (base64, hex)");
  };
  if (j.is_string() && has_nul(j.get_ref<const std::string&>()))
    refuse();
  if (j.is_object())
    for (auto& [key, value] : j.items()) {
      if (has_nul(key))
        refuse();
      refuse_nul(what, value);
    }
  if (j.is_array())
    for (auto& value : j)
      refuse_nul(what, value);
}

/// The options the flags give (for --jsonl: every line's defaults).
aw::insert_options options_of(const enqueue_options& o) {
  aw::insert_options opts;
  opts.queue = o.queue;
  opts.priority = o.priority;
  if (o.max_attempts != 0)
    opts.max_attempts = o.max_attempts;
  if (!o.delay.empty() && !o.run_at.empty())
    throw usage_error("--run-at and --delay exclude each other: give one");
  if (!o.delay.empty())
    opts.delay = seconds_or_duration("--delay", o.delay);
  if (!o.run_at.empty())
    opts.run_at = parse_rfc3339("--run-at", o.run_at);
  if (!o.deadline.empty())
    opts.deadline = seconds_or_duration("--deadline", o.deadline);
  if (o.unique)
    opts.unique = aw::unique_options{};
  if (o.ordering_key_given && o.ordering_key.empty())
    throw usage_error("--ordering-key: the key must not be empty (leave the "
                      "flag out for a job without one)");
  if (!o.ordering_key.empty())
    opts.ordering_key = o.ordering_key;
  opts.tags = split_tags(o.tags);
  if (!o.metadata.empty()) {
    check_json_depth("--metadata", o.metadata);
    try {
      opts.metadata = nlohmann::json::parse(o.metadata);
    } catch (const std::exception& e) {
      throw usage_error("--metadata is not valid JSON: "
                        + std::string{e.what()});
    }
    if (!opts.metadata.is_object())
      throw usage_error(std::string{"--metadata must be a JSON object, got "}
                        + opts.metadata.type_name());
    refuse_nul("--metadata", opts.metadata);
  }
  return opts;
}

/// The keys a line of `enqueue --jsonl` may have.
const char* const jsonl_keys = "kind, args, queue, priority, max_attempts, "
                               "run_at, delay, deadline, tags, metadata, "
                               "ordering_key";

/// Reads `key` of a line of `enqueue --jsonl` into `req` (`at` names the
/// line); notes whether it was "delay" or "run_at", which exclude each
/// other. Throws usage_error for a value of the wrong type or an unknown
/// key.
void read_line_key(aw::enqueue_request& req, const std::string& at,
                   const std::string& key, const nlohmann::json& value,
                   bool& has_delay, bool& has_run_at) {
  auto wrong = [&](const char* expected) {
    return usage_error(at + "\"" + key + "\" must be " + expected + ", got "
                       + value.type_name());
  };
  if (key == "kind") {
    if (!value.is_string())
      throw wrong("a string");
    req.kind = value.get<std::string>();
  } else if (key == "args") {
    if (!value.is_object())
      throw wrong("a JSON object");
    req.args = value;
  } else if (key == "queue") {
    if (!value.is_string())
      throw wrong("a string");
    req.options.queue = value.get<std::string>();
  } else if (key == "priority") {
    if (!value.is_number_integer() || value.get<int64_t>() < INT32_MIN
        || value.get<int64_t>() > INT32_MAX)
      throw wrong("an integer");
    req.options.priority = value.get<int>();
  } else if (key == "max_attempts") {
    if (!value.is_number_integer() || value.get<int64_t>() < 1
        || value.get<int64_t>() > aw::defaults::max_attempts_limit)
      throw usage_error(at + "\"max_attempts\" must be an integer from 1 to "
                        + std::to_string(aw::defaults::max_attempts_limit));
    req.options.max_attempts = value.get<int>();
  } else if (key == "run_at") {
    if (!value.is_string())
      throw wrong("an RFC 3339 timestamp string");
    req.options.run_at = parse_rfc3339(at + "\"run_at\"",
                                       value.get<std::string>());
    req.options.delay = std::chrono::milliseconds{0};
    has_run_at = true;
  } else if (key == "delay" || key == "deadline") {
    std::string text;
    if (value.is_string())
      text = value.get<std::string>();
    else if (value.is_number() && value.get<double>() >= 0)
      text = value.dump();
    else
      throw wrong("a duration (\"500ms\", \"2m\") or seconds");
    auto d = seconds_or_duration((at + "\"" + key + "\"").c_str(), text);
    if (key == "delay") {
      req.options.delay = d;
      req.options.run_at.reset();
      has_delay = true;
    } else {
      req.options.deadline = d;
    }
  } else if (key == "tags") {
    if (!value.is_array())
      throw wrong("an array of strings");
    req.options.tags.clear();
    for (auto& t : value) {
      if (!t.is_string() || t.get<std::string>().empty())
        throw usage_error(at + "\"tags\" must be an array of non-empty "
                               "strings");
      req.options.tags.push_back(t.get<std::string>());
    }
  } else if (key == "metadata") {
    if (!value.is_object())
      throw wrong("a JSON object");
    req.options.metadata = value;
  } else if (key == "ordering_key") {
    if (!value.is_string() || value.get<std::string>().empty())
      throw usage_error(at + "\"ordering_key\" must be a non-empty string");
    req.options.ordering_key = value.get<std::string>();
  } else {
    throw usage_error(at + "unknown key \"" + aw::printable(key)
                      + "\" (keys: " + jsonl_keys + ")");
  }
}

/// One line of `enqueue --jsonl` as a job; `defaults` from the flags.
/// Throws usage_error naming the line.
aw::enqueue_request parse_line(const std::string& line, size_t number,
                               const aw::insert_options& defaults) {
  auto at = "line " + std::to_string(number) + ": ";
  nlohmann::json doc;
  check_json_depth("line " + std::to_string(number), line);
  try {
    doc = nlohmann::json::parse(line);
  } catch (const std::exception& e) {
    throw usage_error(at + "not valid JSON: " + e.what());
  }
  if (!doc.is_object())
    throw usage_error(at + "expected a JSON object, got "
                      + std::string{doc.type_name()});
  refuse_nul("line " + std::to_string(number), doc);
  aw::enqueue_request req;
  req.options = defaults;
  bool has_delay = false, has_run_at = false;
  for (auto& [key, value] : doc.items())
    read_line_key(req, at, key, value, has_delay, has_run_at);
  if (has_delay && has_run_at)
    throw usage_error(at + "\"run_at\" and \"delay\" exclude each other");
  if (!doc.contains("kind"))
    throw usage_error(at + "no \"kind\"");
  try {
    aw::check_enqueue(req.kind, req.args, req.options);
  } catch (const std::invalid_argument& e) {
    throw usage_error(at + e.what());
  }
  return req;
}

/// Warns on stderr for each (kind, queue) that no live worker serves: the
/// jobs were enqueued (exit 0 still), but wait until a worker that runs
/// them starts. A failure to look is not the enqueue's failure.
void warn_unserved(pqxx::connection& conn, const runtime_config& cfg,
                   const std::set<std::pair<std::string, std::string>>& kinds) {
  try {
    for (auto& [kind, queue] : kinds)
      if (aw::storage::kind_unserved(conn, kind, queue,
                                     cfg.worker.reclaim_window))
        std::cerr << "warning: no live worker runs kind '"
                  << aw::printable(kind) << "' in queue '"
                  << aw::printable(queue)
                  << "' (see `actor-worker nodes`): its jobs wait until one "
                     "does\n";
  } catch (const std::exception&) {
  }
}

/// Draws "[#####.....] n/total" over itself on stderr.
void draw_progress(size_t done, size_t total) {
  constexpr size_t width = 40;
  size_t filled = total == 0 ? width : done * width / total;
  std::string bar(filled, '#');
  bar.append(width - filled, '.');
  std::cerr << "\r[" << bar << "] " << done << "/" << total << std::flush;
}

int enqueue_jsonl(const runtime_config& cfg, const enqueue_options& o) {
  if (!o.kind.empty())
    throw usage_error("--jsonl takes every job from its lines: give no KIND "
                      "or ARGS_JSON");
  if (o.unique)
    throw usage_error("--unique does not go with --jsonl");
  auto defaults = options_of(o);
  auto text = read_source("--jsonl", o.jsonl);
  // Every line first: a bad line anywhere changes nothing.
  std::vector<aw::enqueue_request> jobs;
  size_t number = 0;
  std::istringstream lines{text};
  std::string line;
  while (std::getline(lines, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue; // blank lines are skipped
    jobs.push_back(parse_line(line, number, defaults));
    // One transaction, so one database: that of the flags' queue (or
    // --database).
    auto& queue = jobs.back().options.queue;
    auto& home = cfg.database_of(queue);
    if (cfg.database_named(home).url != cfg.database.url)
      throw usage_error("--jsonl line " + std::to_string(number) + ": queue '"
                        + queue + "' lives in database '" + home
                        + "', not in the one this run enqueues into (one "
                          "transaction cannot span two databases: split "
                          "the file, or pass --queue or --database)");
  }
  bool progress = ::isatty(STDERR_FILENO) == 1;
  pqxx::connection conn{cfg.database.url};
  pqxx::work tx{conn};
  constexpr size_t batch = 1000;
  std::set<std::pair<std::string, std::string>> served_by;
  for (auto& job : jobs)
    served_by.emplace(job.kind, job.options.queue);
  std::vector<aw::enqueue_request> chunk;
  for (size_t i = 0; i < jobs.size(); i += batch) {
    auto end = std::min(jobs.size(), i + batch);
    chunk.assign(std::make_move_iterator(jobs.begin() + static_cast<long>(i)),
                 std::make_move_iterator(jobs.begin() + static_cast<long>(end)));
    aw::enqueue_many(tx, chunk);
    if (progress)
      draw_progress(end, jobs.size());
  }
  tx.commit();
  if (progress)
    std::cerr << "\n";
  std::cout << jobs.size() << std::endl;
  std::cerr << "enqueued " << jobs.size() << " job(s)\n";
  warn_unserved(conn, cfg, served_by);
  return exit_ok;
}

} // namespace

int enqueue_job(const runtime_config& cfg, const enqueue_options& o) {
  if (!o.jsonl.empty())
    return enqueue_jsonl(cfg, o);
  if (o.kind.empty())
    throw usage_error("enqueue: KIND is required (or --jsonl FILE)");
  std::string args_text = o.args;
  std::string args_from = "ARGS_JSON";
  if (o.args == "-" || (!o.args.empty() && o.args.front() == '@')) {
    auto path = o.args == "-" ? "-" : o.args.substr(1);
    args_text = read_source("ARGS_JSON", path);
    args_from = path == "-" ? "ARGS_JSON (stdin)"
                            : "ARGS_JSON (" + aw::printable(path) + ")";
  }
  nlohmann::json args;
  check_json_depth(args_from + " for kind '" + aw::printable(o.kind) + "'",
                   args_text);
  try {
    args = nlohmann::json::parse(args_text);
  } catch (const std::exception& e) {
    throw usage_error(args_from + " for kind '" + aw::printable(o.kind)
                      + "' is not valid JSON: " + e.what());
  }
  // A C++ caller's null args are {}; on the command line "null" is a
  // mistake, not a way to say "no args".
  if (args.is_null())
    throw usage_error(args_from + " for kind '" + aw::printable(o.kind)
                      + "' must be a JSON object, got null (give {} or "
                        "leave it out for no args)");
  refuse_nul(args_from + " for kind '" + aw::printable(o.kind) + "'", args);
  auto opts = options_of(o);
  // Bad input is a usage error, found before any connection is opened.
  try {
    aw::check_enqueue(o.kind, args, opts);
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
  pqxx::connection conn{cfg.database.url};
  pqxx::work tx{conn};
  auto id = aw::enqueue(tx, o.kind, args, opts);
  std::optional<aw::storage::job_position> existing;
  if (o.unique)
    existing = aw::storage::preexisting_job(tx, id);
  tx.commit();
  if (existing)
    std::cerr << "a job with the same kind and args already exists: job "
              << id << " (" << existing->state
              << "); nothing was enqueued\n";
  std::cout << id << std::endl;
  warn_unserved(conn, cfg, {{o.kind, opts.queue}});
  return exit_ok;
}

} // namespace aw::cli
