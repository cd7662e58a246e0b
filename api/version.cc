// The library's own version, beside the headers' (feedscope/version.h): a program built against
// one release and run with another can tell.
#include <feedscope/version.h>

namespace feedscope {

const char* library_version() noexcept { return FEEDSCOPE_VERSION; }

}  // namespace feedscope
