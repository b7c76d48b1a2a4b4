// Must not compile: config is the bottom layer (test/CMakeLists.txt, "layers").
#include "actor_worker/messages/job.hpp"
