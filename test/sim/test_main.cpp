#define BOOST_TEST_MODULE actor_worker_simulation
#include <boost/test/unit_test.hpp>
