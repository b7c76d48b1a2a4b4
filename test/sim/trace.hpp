#pragma once
// The history of one simulated seed: every line it records goes into a
// running hash (FNV-1a, 64 bits) and the last few are kept, so that a
// violation can print a minimal trace and two runs of a seed can be
// compared by one number. Lines carry virtual time only, never wall-clock
// values or actor ids, so the same seed gives the same lines byte for byte.

#include <cstdint>
#include <deque>
#include <string>

namespace aw_sim {

class trace {
public:
  /// Keeps the last `tail` lines.
  explicit trace(size_t tail = 60) : tail_(tail) {
    // nop
  }

  /// Records `line` at virtual time `at_ms`; a `routine` line (a periodic
  /// refresh) counts in the hash but is kept out of the tail, which should
  /// show what led to a violation.
  void add(int64_t at_ms, const std::string& line, bool routine = false) {
    auto text = "t=" + std::to_string(at_ms) + " " + line;
    for (unsigned char c : text) {
      hash_ ^= c;
      hash_ *= 1099511628211ull;
    }
    hash_ ^= '\n';
    hash_ *= 1099511628211ull;
    ++lines_;
    if (routine)
      return;
    last_.push_back(std::move(text));
    if (last_.size() > tail_)
      last_.pop_front();
  }

  /// The hash of every line so far.
  uint64_t hash() const {
    return hash_;
  }

  /// How many lines were recorded.
  uint64_t lines() const {
    return lines_;
  }

  /// The last lines, oldest first.
  const std::deque<std::string>& last() const {
    return last_;
  }

private:
  size_t tail_;
  uint64_t hash_ = 14695981039346656037ull;
  uint64_t lines_ = 0;
  std::deque<std::string> last_;
};

} // namespace aw_sim
