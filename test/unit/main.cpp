// Boost.Test entry point of the unit tests.
#define BOOST_TEST_MODULE actor_worker_unit
#include <boost/test/unit_test.hpp>
