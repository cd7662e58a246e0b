#pragma once
// The file format through which a program's CUDA activity reaches `feedscope watch`: the CUPTI
// injection library (profiler/inject/) appends frames to $FEEDSCOPE_WATCH_DIR/gpu-<pid>.fsgpu
// while the program runs, and the watcher reads them, live or after the program ended.
//
// A file is a sequence of frames, appended, never rewritten. Each frame is a 16-byte header and a
// payload, every integer little-endian:
//   magic "FSGA" | u16 version (3) | u16 type (1 status, 2 records, 3 tracing) |
//   u32 payload bytes | u32 CRC32C of the header's first 12 bytes followed by the payload
// A status payload is UTF-8 text ("recording", "unavailable: <why>", "interrupted: <why>"); a
// records payload is one GpuActivity batch; a tracing payload one TracingMode, written once after
// the first status (docs/watch-gpu.md has the layouts). A reader takes versions 2 and 3. A program killed
// mid-write leaves a torn last frame, which a reader treats as not yet there.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/gpu_activity.h"

namespace feedscope {

// One frame each. Never throws on any input but std::bad_alloc.
std::string encode_gpu_status(std::string_view status);
std::string encode_gpu_activity(const GpuActivity& activity);
std::string encode_gpu_tracing(const TracingMode& tracing);

// What one read of a file found. The caller owns it; no shared state.
struct GpuActivityStream {
  // Every record of the whole frames read, in file order; `tracing` from the first tracing frame.
  GpuActivity activity;
  std::vector<std::string> statuses;  // every status frame read, in file order
  std::uint64_t offset = 0;           // the end of the last whole frame: where to read on from
  bool torn_tail = false;             // the file ends inside a frame (still being written, or cut)
  std::string error;                  // a corrupt frame, naming the file and its byte offset
};

// Decodes every whole frame from `from_offset` on. Stops at a torn last frame (torn_tail, offset at
// its start, so a later call resumes there) and at a corrupt one (error, offset at its start).
// Never throws on the file's contents or absence (error says why).
GpuActivityStream read_gpu_activity(const std::filesystem::path& file,
                                    std::uint64_t from_offset = 0);

// The file a process with `pid` writes under `dir`.
std::filesystem::path gpu_activity_file(const std::filesystem::path& dir, int pid);

}  // namespace feedscope
