#include <boost/test/unit_test.hpp>

#include "actor_worker/actors/backoff.hpp"

using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(backoff_test)

BOOST_AUTO_TEST_CASE(doubles_from_one_second_capped_at_thirty) {
  aw::backoff b;
  std::vector<long> seen;
  for (int i = 0; i < 8; ++i)
    seen.push_back(static_cast<long>(b.next().count()));
  std::vector<long> expected{1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000};
  BOOST_TEST(seen == expected, boost::test_tools::per_element());
  BOOST_TEST(b.failures() == 8);
}

BOOST_AUTO_TEST_CASE(reset_starts_over_at_one_second) {
  aw::backoff b;
  b.next();
  b.next();
  b.reset();
  BOOST_TEST(b.failures() == 0);
  BOOST_TEST(b.next().count() == 1000);
}

BOOST_AUTO_TEST_SUITE_END()
