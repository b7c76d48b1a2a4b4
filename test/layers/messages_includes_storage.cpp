// Must not compile: messages sits below storage (test/CMakeLists.txt, "layers").
#include "actor_worker/storage/job_store.hpp"
