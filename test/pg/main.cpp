// Boost.Test entry point of the pg tests.
#define BOOST_TEST_MODULE actor_worker_pg
#include <boost/test/unit_test.hpp>
