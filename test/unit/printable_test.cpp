// Job text on its way into a log line or a CLI table.

#include <boost/test/unit_test.hpp>

#include "actor_worker/messages/printable.hpp"

BOOST_AUTO_TEST_SUITE(printable_test)

BOOST_AUTO_TEST_CASE(control_characters_are_escaped_and_the_rest_kept) {
  BOOST_TEST(aw::printable("boom\n[2026-12-01] [error] forged")
             == "boom\\n[2026-12-01] [error] forged");
  BOOST_TEST(aw::printable("mail\x1b[31m") == "mail\\x1b[31m");
  BOOST_TEST(aw::printable("a\tb\rc\x7f") == "a\\tb\\rc\\x7f");
  // A backslash is escaped too, so an escape in the output is never
  // ambiguous.
  BOOST_TEST(aw::printable("C:\\dir") == "C:\\\\dir");
  BOOST_TEST(aw::printable("caf\xc3\xa9 \xe4\xb8\xad") == "caf\xc3\xa9 \xe4\xb8\xad");
  BOOST_TEST(aw::printable("") == "");
}

BOOST_AUTO_TEST_SUITE_END()
