#pragma once
// Job kinds every actor-worker binary knows, so the binary is useful and
// testable on its own:
//   noop                                   completes at once
//   sleep  {"ms": N}                       sleeps N ms, then completes; stops
//                                          at once when cancelled
//   fail   {"times": N, "terminal": bool, "message": "..."}
//          fails its first N attempts (counted by error_count), then
//          completes; without "times" it always fails; "terminal": true
//          sends it straight to the dead letter queue.

namespace aw {

class registry;

/// Registers noop, sleep and fail in `reg`.
void register_builtin_kinds(registry& reg);

} // namespace aw
