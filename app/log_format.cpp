#include "actor_worker/app/log_format.hpp"

#include <chrono>
#include <ctime>

#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>

#include "actor_worker/actors/job_log.hpp"

namespace aw {

namespace {

bool is_control(unsigned char c) {
  return c < 0x20 || c == 0x7f;
}

/// The usual text line, with control characters of the message escaped.
class text_formatter final : public spdlog::formatter {
public:
  void format(const spdlog::details::log_msg& msg,
              spdlog::memory_buf_t& dest) override {
    std::string_view text{msg.payload.data(), msg.payload.size()};
    bool clean = true;
    for (unsigned char c : text)
      if (is_control(c)) {
        clean = false;
        break;
      }
    if (clean) {
      pattern_.format(msg, dest);
      return;
    }
    std::string escaped;
    escaped.reserve(text.size() + 16);
    for (unsigned char c : text) {
      if (!is_control(c)) {
        escaped += static_cast<char>(c);
        continue;
      }
      switch (c) {
        case '\n': escaped += "\\n"; break;
        case '\r': escaped += "\\r"; break;
        case '\t': escaped += "\\t"; break;
        default: {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          escaped += buf;
        }
      }
    }
    auto copy = msg;
    copy.payload = escaped;
    pattern_.format(copy, dest);
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<text_formatter>();
  }

private:
  spdlog::pattern_formatter pattern_;
};

/// One JSON object per line.
class json_formatter final : public spdlog::formatter {
public:
  void format(const spdlog::details::log_msg& msg,
              spdlog::memory_buf_t& dest) override {
    nlohmann::ordered_json line;
    line["time"] = utc_time(msg.time);
    auto level = spdlog::level::to_string_view(msg.level);
    line["level"] = std::string{level.data(), level.size()};
    line["message"] = std::string{msg.payload.data(), msg.payload.size()};
    if (auto* job = current_job()) {
      line["job_id"] = job->id;
      line["kind"] = std::string{job->kind};
      line["queue"] = std::string{job->queue};
      if (job->attempt > 0)
        line["attempt"] = job->attempt;
    }
    auto text = line.dump(-1, ' ', false,
                          nlohmann::json::error_handler_t::replace);
    text += '\n';
    dest.append(text.data(), text.data() + text.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<json_formatter>();
  }

private:
  /// RFC 3339 in UTC with milliseconds.
  static std::string utc_time(spdlog::log_clock::time_point t) {
    auto secs = std::chrono::time_point_cast<std::chrono::seconds>(t);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - secs)
                .count();
    std::time_t tt = spdlog::log_clock::to_time_t(secs);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[40];
    auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms));
    return buf;
  }
};

} // namespace

std::unique_ptr<spdlog::formatter> make_log_formatter(const std::string& format) {
  if (format == "json")
    return std::make_unique<json_formatter>();
  if (format == "text")
    return std::make_unique<text_formatter>();
  throw config_error("log.format: expected \"text\" or \"json\", got \""
                     + format + "\"");
}

void configure_log_format(const log_config& cfg) {
  auto formatter = make_log_formatter(cfg.format);
  for (auto& sink : spdlog::default_logger()->sinks())
    sink->set_formatter(formatter->clone());
}

} // namespace aw
