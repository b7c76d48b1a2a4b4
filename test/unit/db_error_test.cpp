// Sorting database errors and keeping secrets out of their messages.

#include <boost/test/unit_test.hpp>

#include <pqxx/except>

#include "actor_worker/storage/db_error.hpp"

using aw::ec;
using aw::storage::classify;
using aw::storage::redact_secrets;

BOOST_AUTO_TEST_SUITE(db_error_test)

BOOST_AUTO_TEST_CASE(passwords_in_connection_strings_are_masked) {
  // libpq quotes a malformed URL whole.
  auto text = redact_secrets(
    "end of string reached when looking for matching \"]\" in IPv6 host "
    "address in URI: \"postgresql://user:SECRET@[::1/db\"");
  BOOST_TEST(text.find("SECRET") == std::string::npos, text);
  BOOST_TEST(text.find("postgresql://user:***@[::1/db") != std::string::npos,
             text);
  BOOST_TEST(redact_secrets("postgres://a:p%40ss@h/db and x")
             == "postgres://a:***@h/db and x");
  BOOST_TEST(redact_secrets("host=h password=hunter2 dbname=d")
             == "host=h password=*** dbname=d");
  // conninfo quotes with backslash escapes
  BOOST_TEST(redact_secrets("password = 'it\\'s secret' user=u")
             == "password = *** user=u");
  // Nothing to hide: unchanged.
  BOOST_TEST(redact_secrets("postgresql://user@host/db") == "postgresql://user@host/db");
  BOOST_TEST(redact_secrets("connection refused") == "connection refused");
}

BOOST_AUTO_TEST_CASE(one_line_redacts_and_flattens) {
  pqxx::broken_connection e{"invalid URI \"postgresql://u:pw@h:x/d\"\n"};
  auto text = aw::storage::one_line(e);
  BOOST_TEST(text.find("pw@") == std::string::npos, text);
  BOOST_TEST(text.find('\n') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(refusals_no_retry_can_fix_are_configuration_errors) {
  for (auto* message :
       {"FATAL:  password authentication failed for user \"app\"",
        "FATAL:  database \"nope\" does not exist",
        "FATAL:  role \"ghost\" does not exist",
        "invalid URI query parameter: \"x\"",
        "missing \"=\" after \"bogus\" in connection info string"})
    BOOST_TEST_CONTEXT(message) {
      BOOST_TEST((classify(pqxx::broken_connection{message})
                  == ec::database_misconfigured));
    }
  // A server that is down or restarting may come back: retry.
  for (auto* message :
       {"connection to server at \"127.0.0.1\", port 1 failed: Connection refused",
        "server closed the connection unexpectedly",
        "FATAL:  the database system is starting up"})
    BOOST_TEST_CONTEXT(message) {
      BOOST_TEST((classify(pqxx::broken_connection{message})
                  == ec::database_unavailable));
    }
}

BOOST_AUTO_TEST_SUITE_END()
