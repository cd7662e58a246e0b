#pragma once
// libjpeg's error handling for the decoder and the encoder: a fatal error formats libjpeg's
// message and longjmps back to the caller's setjmp(jump), which throws it as a C++ exception.
// Include only after <cstdio> and <jpeglib.h> (jpeglib.h needs size_t and FILE first).
#include <csetjmp>

namespace feedscope::detail {

struct JpegErrorManager {
  jpeg_error_mgr pub;  // first, so libjpeg's j_common_ptr->err casts back to us
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] inline void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

}  // namespace feedscope::detail
