#include "loader/detail/shard_pattern.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "loader/dataset.h"

namespace feedscope::detail {

namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxNames = 10'000'000;

// The index of the brace closing the one at `open`, or npos.
std::size_t closing_brace(std::string_view text, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) return i;
  }
  return std::string_view::npos;
}

// Splits at the commas outside braces.
std::vector<std::string_view> split_top_level(std::string_view text) {
  std::vector<std::string_view> parts;
  int depth = 0;
  std::size_t begin = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}') --depth;
    if (text[i] == ',' && depth == 0) {
      parts.push_back(text.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  parts.push_back(text.substr(begin));
  return parts;
}

bool parse_number(std::string_view text, long long& out) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// The alternatives one brace body stands for: a numeric range "a..b" or a comma list.
std::vector<std::string> alternatives(std::string_view body, std::string_view pattern) {
  const std::size_t dots = body.find("..");
  long long first = 0, last = 0;
  if (dots != std::string_view::npos && body.find(',') == std::string_view::npos &&
      parse_number(body.substr(0, dots), first) && parse_number(body.substr(dots + 2), last)) {
    const std::size_t width = dots;  // {000..146}: every name padded to the first bound's width
    const long long step = first <= last ? 1 : -1;
    const auto count = static_cast<std::size_t>((last - first) * step + 1);
    if (count > kMaxNames)
      throw DatasetError("shard pattern '" + std::string(pattern) + "': the range {" +
                         std::string(body) + "} names more than 10 million shards");
    std::vector<std::string> out;
    out.reserve(count);
    for (long long v = first;; v += step) {
      std::string number = std::to_string(v);
      if (number.size() < width) number.insert(0, width - number.size(), '0');
      out.push_back(std::move(number));
      if (v == last) break;
    }
    return out;
  }
  std::vector<std::string> out;
  for (std::string_view part : split_top_level(body))
    for (std::string& e : expand_braces(part)) out.push_back(std::move(e));
  return out;
}

}  // namespace

std::vector<std::string> expand_braces(std::string_view pattern) {
  const std::size_t open = pattern.find('{');
  if (open == std::string_view::npos) {
    if (pattern.find('}') != std::string_view::npos)
      throw DatasetError("shard pattern '" + std::string(pattern) + "': a '}' without its '{'");
    return {std::string(pattern)};
  }
  const std::size_t close = closing_brace(pattern, open);
  if (close == std::string_view::npos)
    throw DatasetError("shard pattern '" + std::string(pattern) + "': a '{' without its '}'");
  const std::string_view head = pattern.substr(0, open);
  if (head.find('}') != std::string_view::npos)
    throw DatasetError("shard pattern '" + std::string(pattern) + "': a '}' without its '{'");
  const std::vector<std::string> middle = alternatives(pattern.substr(open + 1, close - open - 1), pattern);
  const std::vector<std::string> tails = expand_braces(pattern.substr(close + 1));
  if (middle.size() * tails.size() > kMaxNames)
    throw DatasetError("shard pattern '" + std::string(pattern) + "' names more than 10 million shards");
  std::vector<std::string> out;
  out.reserve(middle.size() * tails.size());
  for (const std::string& m : middle)
    for (const std::string& t : tails) out.push_back(std::string(head) + m + t);
  return out;
}

std::vector<std::string> list_shards(const std::string& kind, const std::string& pattern,
                                     const std::vector<std::string>& extensions) {
  std::string allowed;
  for (const std::string& e : extensions) allowed += (allowed.empty() ? "" : ", ") + e;
  allowed = extensions.empty() ? "files" : allowed + " files";
  std::vector<std::string> shards;
  for (std::string_view part : split_top_level(pattern)) {
    if (part.empty()) continue;
    for (const std::string& path : expand_braces(part)) {
      std::error_code ec;
      if (fs::is_directory(path, ec)) {
        std::vector<std::string> files;
        for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
          const std::string name = e.path().filename().string();
          std::error_code type_ec;
          if (!e.is_regular_file(type_ec) || name.front() == '.') continue;
          if (extensions.empty() || std::any_of(extensions.begin(), extensions.end(), [&](const std::string& ext) {
                return name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0;
              }))
            files.push_back(e.path().string());
        }
        if (ec) throw DatasetError(kind + ": cannot list '" + path + "': " + ec.message());
        std::sort(files.begin(), files.end());
        shards.insert(shards.end(), files.begin(), files.end());
      } else if (fs::exists(path, ec)) {
        shards.push_back(path);
      } else {
        throw DatasetError(kind + ": shard '" + path + "' (from pattern '" + pattern +
                           "') does not exist");
      }
    }
  }
  if (shards.empty())
    throw DatasetError(kind + ": pattern '" + pattern + "' matches no shard file (" + allowed +
                       ", or a directory of them)");
  return shards;
}

}  // namespace feedscope::detail
