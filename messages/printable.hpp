#pragma once
// Text from jobs (kinds, queues, error messages, hook exceptions) on its way
// into a log line or a CLI table: a newline or an escape sequence in it
// must not forge another line or recolour the terminal.

#include <string>
#include <string_view>

namespace aw {

/// `text` with control characters escaped: \n, \r, \t, \\ and \xNN for the
/// others (DEL included). Other bytes, UTF-8 included, pass unchanged.
std::string printable(std::string_view text);

} // namespace aw
