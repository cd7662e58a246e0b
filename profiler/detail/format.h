#pragma once
// printf-style formatting into a std::string for the diagnoses' evidence and advice lines.
#include <cstdio>
#include <string>

namespace feedscope::detail {

// Lines longer than 511 characters are cut: evidence is read by people, one line at a time.
inline std::string fmt(const char* format, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

}  // namespace feedscope::detail
