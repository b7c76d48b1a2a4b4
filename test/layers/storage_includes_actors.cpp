// Must not compile: storage sits below actors (test/CMakeLists.txt, "layers").
#include "actor_worker/actors/poller.hpp"
