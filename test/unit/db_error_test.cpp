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
  // Multi-host URLs (failover): the password before the host list goes,
  // the hosts and parameters stay; without a password nothing changes.
  BOOST_TEST(redact_secrets("postgresql://app:S3cr@t@h1:5432,h2:5433/db"
                            "?target_session_attrs=read-write x")
             == "postgresql://app:***@h1:5432,h2:5433/db"
                "?target_session_attrs=read-write x");
  BOOST_TEST(redact_secrets("postgresql://h1:5432,h2:5433/db?target_session_attrs=read-write")
             == "postgresql://h1:5432,h2:5433/db?target_session_attrs=read-write");
  BOOST_TEST(redact_secrets("host=h1,h2 port=5432,5433 password=pw target_session_attrs=read-write")
             == "host=h1,h2 port=5432,5433 password=*** target_session_attrs=read-write");
  BOOST_TEST(redact_secrets("connection refused") == "connection refused");
}

BOOST_AUTO_TEST_CASE(one_line_redacts_and_flattens) {
  pqxx::broken_connection e{"invalid URI \"postgresql://u:pw@h:x/d\"\n"};
  auto text = aw::storage::one_line(e);
  BOOST_TEST(text.find("pw@") == std::string::npos, text);
  BOOST_TEST(text.find('\n') == std::string::npos);
  // libpq's hint after a tab: one space, no control character left.
  pqxx::broken_connection refused{
    "connection to server at \"127.0.0.1\", port 1 failed: Connection "
    "refused\n\tIs the server running on that host?\n"};
  BOOST_TEST(aw::storage::one_line(refused)
             == "connection to server at \"127.0.0.1\", port 1 failed: "
                "Connection refused Is the server running on that host?");
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
        "FATAL:  the database system is starting up",
        // A multi-host URL during a failover: the old primary is gone and
        // the standby is not promoted yet (libpq reports every host).
        "connection to server at \"127.0.0.1\", port 5432 failed: Connection refused\n"
        "\tIs the server running on that host and accepting TCP/IP connections?\n"
        "connection to server at \"127.0.0.1\", port 5433 failed: session is read-only",
        "connection to server at \"10.0.0.2\", port 5432 failed: server is in hot standby mode"})
    BOOST_TEST_CONTEXT(message) {
      BOOST_TEST((classify(pqxx::broken_connection{message})
                  == ec::database_unavailable));
    }
}

BOOST_AUTO_TEST_CASE(a_write_refused_by_a_standby_is_transient) {
  // 25006 read_only_sql_transaction: the session reached a standby (or a
  // server read-only for a while). Dropping it and connecting again is the
  // remedy, as for a lost connection.
  pqxx::sql_error standby{"ERROR:  cannot execute INSERT in a read-only transaction",
                          "INSERT INTO jobs_in ...", "25006"};
  BOOST_TEST((classify(standby) == ec::database_unavailable));
  pqxx::sql_error other{"ERROR:  syntax error", "SELEC 1", "42601"};
  BOOST_TEST((classify(other) == ec::database_error));
}

BOOST_AUTO_TEST_SUITE_END()
