// Boost.Test entry point of the fault tests (what each proves: docs/delivery.md).
#define BOOST_TEST_MODULE actor_worker_fault
#include <boost/test/unit_test.hpp>
