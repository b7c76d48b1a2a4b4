#include "app/builtin_kinds.hpp"

#include <optional>
#include <thread>

#include "app/registry.hpp"

namespace aw {

namespace {

struct sleep_args {
  int64_t ms = 0;
};

void from_json(const nlohmann::json& j, sleep_args& a) {
  j.at("ms").get_to(a.ms);
  if (a.ms < 0)
    throw std::invalid_argument("\"ms\" must not be negative");
}

struct fail_args {
  std::optional<int> times;
  bool terminal = false;
  std::string message = "failed on purpose";
};

void from_json(const nlohmann::json& j, fail_args& a) {
  if (!j.is_object())
    throw std::invalid_argument("expected a JSON object");
  if (j.contains("times"))
    a.times = j.at("times").get<int>();
  if (j.contains("terminal"))
    a.terminal = j.at("terminal").get<bool>();
  if (j.contains("message"))
    a.message = j.at("message").get<std::string>();
}

} // namespace

void register_builtin_kinds(registry& reg) {
  reg.add_raw("noop", [](const nlohmann::json&, const job_context&) {});
  reg.add<sleep_args>("sleep", [](const sleep_args& a, const job_context& ctx) {
    // Honours cancellation at once (deadline, lost lease, shutdown).
    if (!ctx.cancel.sleep_for(std::chrono::milliseconds{a.ms}))
      throw std::runtime_error("sleep cancelled: " + ctx.cancel.reason());
  });
  reg.add<fail_args>("fail", [](const fail_args& a, const job_context& ctx) {
    if (a.times && ctx.error_count >= *a.times)
      return;
    if (a.terminal)
      throw terminal_error(a.message);
    throw std::runtime_error(a.message);
  });
}

} // namespace aw
