// Boost.Test entry point of the actors tests.
#define BOOST_TEST_MODULE actor_worker_actors
#include <boost/test/unit_test.hpp>
