#pragma once
// UTF-8 validation for text that reaches PostgreSQL from outside (CLI
// arguments, dashboard query parameters): refused with a clear message
// before any SQL, rather than as a raw server error.

#include <string>

namespace aw {

/// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or
/// code points past U+10FFFF), as PostgreSQL takes text.
bool valid_utf8(const std::string& text);

} // namespace aw
