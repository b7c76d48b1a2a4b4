#include "actor_worker/app/job_protocol.hpp"

#include <cmath>
#include <stdexcept>

#include "actor_worker/config/config.hpp"
#include "actor_worker/config/seconds.hpp"

namespace aw {

namespace {

/// A duration field: a string such as "30s", or a number of seconds.
std::chrono::milliseconds duration_field(const nlohmann::json& object,
                                         const char* key) {
  auto& v = object.at(key);
  auto bad = [&](const std::string& why) {
    return terminal_error(std::string{"invalid outcome object: \""} + key
                          + "\" " + why);
  };
  if (v.is_string()) {
    try {
      return parse_duration(v.get<std::string>());
    } catch (const std::invalid_argument& e) {
      throw bad(std::string{": "} + e.what());
    }
  }
  if (v.is_number()) {
    auto seconds = v.get<double>();
    if (!std::isfinite(seconds) || seconds < 0
        || seconds * 1000 > static_cast<double>(defaults::max_duration.count()))
      throw bad("must be a number of seconds from 0 to "
                + std::to_string(whole_seconds(defaults::max_duration)));
    return std::chrono::milliseconds{std::llround(seconds * 1000)};
  }
  throw bad("must be a duration such as \"30s\" or a number of seconds");
}

/// An optional string field.
std::string string_field(const nlohmann::json& object, const char* key,
                         std::string fallback) {
  auto i = object.find(key);
  if (i == object.end() || i->is_null())
    return fallback;
  if (!i->is_string())
    throw terminal_error(std::string{"invalid outcome object: \""} + key
                         + "\" must be a string");
  return i->get<std::string>();
}

} // namespace

std::string job_document(const nlohmann::json& args, const job_context& ctx) {
  nlohmann::json metadata = nullptr;
  if (!ctx.metadata.empty()) {
    metadata = nlohmann::json::parse(ctx.metadata, nullptr, false);
    if (metadata.is_discarded())
      metadata = nullptr;
  }
  nlohmann::json doc = {
    {"id", ctx.id},
    {"kind", ctx.kind},
    {"queue", ctx.queue},
    {"args", args},
    {"metadata", std::move(metadata)},
    {"attempt", ctx.error_count + 1},
    {"error_count", ctx.error_count},
    {"run", ctx.attempt},
  };
  if (auto id = ctx.callback_id(); !id.empty())
    doc["callback_id"] = id;
  // Replace invalid UTF-8 rather than throw: the text came from the
  // database, which only holds valid UTF-8, so this never loses anything.
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<nlohmann::json> outcome_object(std::string_view text) {
  auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos || text[begin] != '{')
    return std::nullopt;
  // Cheap test first: most lines of a chatty program are not outcomes.
  if (text.find("\"outcome\"") == std::string_view::npos)
    return std::nullopt;
  auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("outcome"))
    return std::nullopt;
  return j;
}

outcome parse_outcome_object(const nlohmann::json& object) {
  auto& kind = object.at("outcome");
  if (!kind.is_string())
    throw terminal_error("invalid outcome object: \"outcome\" must be a "
                         "string");
  auto name = kind.get<std::string>();
  if (name == "completed")
    return outcome::completed();
  if (name == "retry") {
    auto message = string_field(object, "message", "retry requested");
    if (object.contains("after"))
      return outcome::retry_after(duration_field(object, "after"), message);
    throw std::runtime_error(message);
  }
  if (name == "fail")
    throw terminal_error(string_field(object, "message", "failed"));
  if (name == "snooze") {
    if (!object.contains("for"))
      throw terminal_error("invalid outcome object: \"snooze\" needs \"for\" "
                           "(a duration such as \"1m\")");
    return outcome::snooze(duration_field(object, "for"));
  }
  if (name == "cancel")
    return outcome::cancel(string_field(object, "reason", "cancelled"));
  if (name == "wait_for_callback") {
    if (object.contains("timeout"))
      return outcome::wait_for_callback(duration_field(object, "timeout"));
    return outcome::wait_for_callback();
  }
  throw terminal_error("invalid outcome object: unknown outcome \"" + name
                       + "\" (expected completed, retry, fail, snooze, "
                         "cancel or wait_for_callback)");
}

void finish_with_outcome_object(const job_promise& done,
                                const nlohmann::json& object) {
  try {
    done.finish(parse_outcome_object(object));
  } catch (...) {
    done.fail(std::current_exception());
  }
}

} // namespace aw
