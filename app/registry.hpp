#pragma once
// Maps job kinds to handlers. A typed handler gets its args parsed from the
// job's JSON into a struct (nlohmann from_json); a raw handler gets the JSON.
// The registry turns every way a run can end into a job_outcome, so
// executors never see an exception.

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/handler.hpp"
#include "messages/job.hpp"

namespace aw {

class registry {
public:
  /// A handler of raw JSON args.
  using raw_handler
    = std::function<void(const nlohmann::json& args, const job_context& ctx)>;

  /// Registers `fn(const Args&, const job_context&)` for `kind`. Args that
  /// do not parse into `Args` fail the job terminally, naming the kind and
  /// the parse error. Registering a kind twice replaces the handler.
  template <class Args, class F>
  registry& add(const std::string& kind, F fn) {
    return add_raw(kind, [kind, fn = std::move(fn)](const nlohmann::json& json,
                                                    const job_context& ctx) {
      Args args;
      try {
        args = json.get<Args>();
      } catch (const std::exception& e) {
        throw malformed_args_error(kind, e.what());
      }
      fn(static_cast<const Args&>(args), ctx);
    });
  }

  /// Registers a raw handler for `kind`.
  registry& add_raw(const std::string& kind, raw_handler fn);

  /// True if `kind` has a handler.
  bool contains(const std::string& kind) const;

  /// The registered kinds, sorted.
  std::vector<std::string> kinds() const;

  /// Runs the job's handler and maps how it ended to an outcome. Never
  /// throws: an unknown kind and malformed args are terminal failures, a
  /// terminal_error is terminal, any other exception is retryable.
  job_outcome run(const claimed_job& job,
                  const cancellation_token& cancel = {}) const;

  /// The error a typed handler throws when its args do not parse.
  static terminal_error malformed_args_error(const std::string& kind,
                                             const std::string& why);

private:
  std::unordered_map<std::string, raw_handler> handlers_;
};

} // namespace aw
