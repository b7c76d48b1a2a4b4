// The output of a command kind's child as the runner keeps it: the tail of
// stderr and the last outcome object on stdout.

#include <cstring>

#include "actor_worker/app/internal/command_child.hpp"
#include "actor_worker/app/job_protocol.hpp"
#include "actor_worker/config/defaults.hpp"

namespace aw::command_internal {

void tail_buffer::append(const char* data, size_t n) {
  if (n >= cap_) {
    buf_.assign(data + n - cap_, cap_);
    cut_ = true;
    return;
  }
  buf_.append(data, n);
  if (buf_.size() > 2 * cap_) {
    buf_.erase(0, buf_.size() - cap_);
    cut_ = true;
  }
}

std::string tail_buffer::str() const {
  size_t begin = buf_.size() > cap_ ? buf_.size() - cap_ : 0;
  bool cut = cut_ || begin > 0;
  // Not in the middle of a UTF-8 sequence.
  while (begin < buf_.size()
         && (static_cast<unsigned char>(buf_[begin]) & 0xC0) == 0x80)
    ++begin;
  auto first = buf_.find_first_not_of(" \t\r\n", begin);
  if (first == std::string::npos)
    return {};
  auto last = buf_.find_last_not_of(" \t\r\n");
  return (cut ? "[...]" : "") + buf_.substr(first, last - first + 1);
}

void outcome_scanner::append(const char* data, size_t n) {
  while (n > 0) {
    auto nl = static_cast<const char*>(std::memchr(data, '\n', n));
    size_t len = nl ? static_cast<size_t>(nl - data) : n;
    if (!too_long_) {
      if (line_.size() + len > defaults::command_outcome_line_max) {
        too_long_ = true;
        line_.clear();
        line_.shrink_to_fit();
      } else {
        line_.append(data, len);
      }
    }
    if (!nl)
      return;
    end_line();
    data += len + 1;
    n -= len + 1;
  }
}

void outcome_scanner::end_line() {
  if (!too_long_ && !line_.empty())
    if (auto o = outcome_object(line_))
      last_ = std::move(o);
  too_long_ = false;
  line_.clear();
}

} // namespace aw::command_internal
