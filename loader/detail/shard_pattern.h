#pragma once
// The shard list behind webdataset:PATTERN and tfrecord:PATTERN, as webdataset's braceexpand
// reads it: comma-separated parts, each with brace ranges ({000000..000146}, zero-padded to the
// first bound's width) and brace lists ({train,val}); a part that names a directory stands for
// the shard files directly in it, sorted bytewise.
#include <string>
#include <string_view>
#include <vector>

namespace feedscope::detail {

// The pattern with its braces expanded, in order, without looking at the file system. Throws
// DatasetError naming the pattern for an unbalanced brace or a range over 10 million names.
std::vector<std::string> expand_braces(std::string_view pattern);

// The shard files `pattern` names. A directory contributes its regular files, not hidden, whose
// names end in one of `extensions` (".tar", ".tar.gz"; empty: every one); a named file must exist. Throws DatasetError naming the
// pattern when nothing matches, and naming the path for a named file that does not exist.
std::vector<std::string> list_shards(const std::string& kind, const std::string& pattern,
                                     const std::vector<std::string>& extensions);

}  // namespace feedscope::detail
