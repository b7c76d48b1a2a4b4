#pragma once
// The binary's log sink. On a terminal every line is written (and
// coloured) at once. Into a file, pipe or socket (a service's journal, a
// benchmark's log file), lines are buffered: one write per buffer instead
// of one per line, which at a line per finished job is a large part of the
// worker's CPU. WARN and above are flushed at once, everything else within
// a second (flush_every) and at exit; a kill -9 can lose up to a second of
// INFO lines, never a warning or an error.

#include <memory>

#include <spdlog/logger.h>

namespace aw::cli {

/// Makes the default logger write to stderr as described above.
void install_stderr_logger();

} // namespace aw::cli
