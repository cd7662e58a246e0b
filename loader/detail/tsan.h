#pragma once
// Happens-before edges that ThreadSanitizer cannot see by itself. oneTBB hands a task to a worker
// and reports its completion inside libtbb.so, which Debian builds without TSan, so the TSan
// build (scripts/sanitize.sh) would take every write before a spawn and every read after a wait
// for a race. Code that passes data through TBB says so with these: tsan_release(sync) after the
// last write on one side, tsan_acquire(sync) before the first read on the other. They compile to
// nothing unless the build is instrumented with -fsanitize=thread.
#if defined(__SANITIZE_THREAD__)
#define FEEDSCOPE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FEEDSCOPE_TSAN 1
#endif
#endif

#ifdef FEEDSCOPE_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace feedscope::detail {

// The one address a task's enqueuer releases and its worker acquires before reading the task's
// captures: the task object itself is made inside libtbb, where neither side can name it first.
inline char tsan_task_handoff = 0;

// Everything this thread wrote so far happens before what follows a tsan_acquire(sync).
inline void tsan_release([[maybe_unused]] const void* sync) noexcept {
#ifdef FEEDSCOPE_TSAN
  __tsan_release(const_cast<void*>(sync));
#endif
}

// What preceded every earlier tsan_release(sync), on any thread, happens before what follows.
inline void tsan_acquire([[maybe_unused]] const void* sync) noexcept {
#ifdef FEEDSCOPE_TSAN
  __tsan_acquire(const_cast<void*>(sync));
#endif
}

}  // namespace feedscope::detail
