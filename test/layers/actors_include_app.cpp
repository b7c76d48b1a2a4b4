// Must not compile: actors sit below the runtime (test/CMakeLists.txt, "layers").
#include "actor_worker/app/registry.hpp"
