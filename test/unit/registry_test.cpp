#include <boost/test/unit_test.hpp>

#include "actor_worker/app/builtin_kinds.hpp"
#include "actor_worker/app/registry.hpp"

namespace aw {
// Lets Boost.Test print outcome kinds in failure messages.
std::ostream& operator<<(std::ostream& out, outcome_kind k) {
  return out << to_string(k);
}
} // namespace aw

namespace {

struct greeting {
  std::string name;
  int times = 1;
};

void from_json(const nlohmann::json& j, greeting& g) {
  j.at("name").get_to(g.name);
  if (j.contains("times"))
    j.at("times").get_to(g.times);
}

aw::claimed_job make_job(const std::string& kind, const std::string& args,
                         int error_count = 0) {
  aw::claimed_job job;
  job.id = 7;
  job.kind = kind;
  job.queue = "default";
  job.args = args;
  job.attempt = error_count + 1;
  job.error_count = error_count;
  job.metadata = "{}";
  return job;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_SUITE(registry_test)

BOOST_AUTO_TEST_CASE(typed_handler_gets_parsed_args) {
  aw::registry reg;
  std::string seen;
  reg.add<greeting>("greet", [&](const greeting& g, const aw::job_context& c) {
    seen = g.name + "x" + std::to_string(g.times) + "#" + std::to_string(c.id);
  });
  auto out = reg.run(make_job("greet", R"({"name":"ada","times":2})"));
  BOOST_TEST(out.kind == aw::outcome_kind::completed);
  BOOST_TEST(seen == "adax2#7");
}

BOOST_AUTO_TEST_CASE(malformed_args_are_terminal_and_name_kind_and_error) {
  aw::registry reg;
  reg.add<greeting>("greet", [](const greeting&, const aw::job_context&) {});
  auto out = reg.run(make_job("greet", R"({"times":2})"));
  BOOST_TEST(out.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(contains(out.message, "greet"), out.message);
  BOOST_TEST(contains(out.message, "name"), out.message);
  auto bad_json = reg.run(make_job("greet", "{not json"));
  BOOST_TEST(bad_json.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(contains(bad_json.message, "malformed args for job kind 'greet'"));
}

BOOST_AUTO_TEST_CASE(unknown_kind_is_terminal_and_names_the_kind) {
  aw::registry reg;
  auto out = reg.run(make_job("mystery", "{}"));
  BOOST_TEST(out.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(contains(out.message, "unknown job kind 'mystery'"), out.message);
}

BOOST_AUTO_TEST_CASE(throwing_handler_is_retryable_with_its_message) {
  aw::registry reg;
  reg.add_raw("flaky", [](const nlohmann::json&, const aw::job_context&) {
    throw std::runtime_error("smtp timeout");
  });
  auto out = reg.run(make_job("flaky", "{}"));
  BOOST_TEST(out.kind == aw::outcome_kind::retryable_failure);
  BOOST_TEST(out.message == "smtp timeout");
}

BOOST_AUTO_TEST_CASE(error_messages_become_valid_utf8_and_bounded) {
  aw::registry reg;
  reg.add_raw("binary", [](const nlohmann::json&, const aw::job_context&) {
    throw std::runtime_error("bad \xff\xfe byte \xe2\x82 caf\xc3\xa9");
  });
  auto out = reg.run(make_job("binary", "{}"));
  BOOST_TEST(out.message == "bad ?? byte ?? caf\xc3\xa9");
  reg.add_raw("huge", [](const nlohmann::json&, const aw::job_context&) {
    throw std::runtime_error(std::string(100000, 'x'));
  });
  auto huge = reg.run(make_job("huge", "{}"));
  BOOST_TEST(huge.message.size() < 5000u);
  BOOST_TEST(contains(huge.message, "[truncated]"));
}

BOOST_AUTO_TEST_CASE(terminal_error_is_terminal) {
  aw::registry reg;
  reg.add_raw("doomed", [](const nlohmann::json&, const aw::job_context&) {
    throw aw::terminal_error("account deleted");
  });
  auto out = reg.run(make_job("doomed", "{}"));
  BOOST_TEST(out.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(out.message == "account deleted");
}

BOOST_AUTO_TEST_CASE(a_transactional_kind_runs_only_in_a_runtime) {
  aw::registry reg;
  reg.add_transactional<nlohmann::json>(
    "pay", [](const nlohmann::json&, const aw::job_context&, pqxx::work&) {});
  BOOST_TEST((reg.dispatch_of("pay") == aw::job_handlers::dispatch::transactional));
  // Without the job's database there is no transaction to run it in.
  auto out = reg.run(make_job("pay", "{}", 0));
  BOOST_TEST(out.kind == aw::outcome_kind::terminal_failure);
  BOOST_TEST(out.message.find("transactional") != std::string::npos, out.message);
}

BOOST_AUTO_TEST_CASE(registering_a_callback_without_a_database_names_the_registration_that_works) {
  aw::registry reg;
  reg.add_raw("approve", [](const nlohmann::json&, const aw::job_context& ctx) {
    ctx.register_callback();
  });
  // registry::run has no database: the error says how an id is registered
  // instead, with a name the registry has.
  auto out = reg.run(make_job("approve", "{}"));
  BOOST_TEST(contains(out.message, "registry::register_callback_on_start"),
             out.message);
}

BOOST_AUTO_TEST_CASE(builtin_fail_fails_its_first_n_attempts) {
  aw::registry reg;
  aw::register_builtin_kinds(reg);
  BOOST_TEST(reg.kinds() == (std::vector<std::string>{"await_callback", "fail", "noop", "noop_tx", "sleep"}),
             boost::test_tools::per_element());
  auto args = R"({"times":2,"message":"nope"})";
  BOOST_TEST(reg.run(make_job("fail", args, 0)).kind
             == aw::outcome_kind::retryable_failure);
  BOOST_TEST(reg.run(make_job("fail", args, 1)).message == "nope");
  BOOST_TEST(reg.run(make_job("fail", args, 2)).kind
             == aw::outcome_kind::completed);
  BOOST_TEST(reg.run(make_job("fail", "{}", 50)).kind
             == aw::outcome_kind::retryable_failure);
  BOOST_TEST(reg.run(make_job("fail", R"({"terminal":true})")).kind
             == aw::outcome_kind::terminal_failure);
  BOOST_TEST(reg.run(make_job("sleep", R"({"ms":1})")).kind
             == aw::outcome_kind::completed);
  BOOST_TEST(reg.run(make_job("sleep", R"({"ms":-1})")).kind
             == aw::outcome_kind::terminal_failure);
}

BOOST_AUTO_TEST_SUITE_END()
