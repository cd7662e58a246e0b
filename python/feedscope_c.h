/* feedscope's C ABI: the wrap API (exporters/session.h) for callers that cannot link C++, the
 * Python client first (python/feedscope/__init__.py, through ctypes). No C++ type crosses it, so
 * one libfeedscope.so serves any CPython and any torch build, whatever their C++ ABI.
 *
 * Errors: a call that fails returns NULL or -1 and leaves the reason in feedscope_last_error(),
 * per thread. Nothing here throws or aborts on bad use; a NULL session is an error, not a crash.
 * Timestamps are CLOCK_MONOTONIC nanoseconds (Python's time.monotonic_ns()).
 * Threading: one thread records (fetched, step_done, stage_done); as feedscope::Session. */
#ifndef FEEDSCOPE_C_H
#define FEEDSCOPE_C_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FEEDSCOPE_C_ABI_VERSION 1

typedef struct feedscope_session feedscope_session;

int feedscope_abi_version(void);
const char* feedscope_last_error(void);
int64_t feedscope_now_ns(void);

/* options_json: an object with any of Session::Options' keys (report_dir, warmup, metrics_addr,
 * rank, host, sample_hz, timeseries_max_mib, batch_size, num_workers, device, print, trace_gpu,
 * trace_max_spans); an unknown key or a wrong type is an error naming it. */
feedscope_session* feedscope_session_create(const char* options_json);
/* Finishes the session if not done yet, then frees it. NULL is allowed. In a forked child (a
 * DataLoader worker holds a copy of the session) it only forgets the copy: the session's threads
 * live in the parent, which finishes it. */
void feedscope_session_destroy(feedscope_session* session);

/* The loop asked for its next batch at begin_ns and got one (got_batch 1) or learned the loader
 * is exhausted (0) at end_ns: the `wait` stage. */
int feedscope_fetched(feedscope_session* session, int64_t begin_ns, int64_t end_ns, int got_batch);
/* One `step` of `samples` samples. */
int feedscope_step_done(feedscope_session* session, int64_t begin_ns, int64_t end_ns,
                        int64_t samples);
/* A user-named stage's id (>= 0), -1 for an empty name or one of the seven fixed stage names. */
int feedscope_stage_id(feedscope_session* session, const char* name);
int feedscope_stage_done(feedscope_session* session, int stage_id, int64_t begin_ns,
                         int64_t end_ns);

/* Writes the reports and returns report.json's text, owned by the session; NULL on failure (a
 * report directory that cannot be written, say). A second call returns the same text. */
const char* feedscope_finish(feedscope_session* session);
/* "127.0.0.1:9464", the bound metrics address; "" without an endpoint. Owned by the session. */
const char* feedscope_metrics_address(feedscope_session* session);

#ifdef __cplusplus
}
#endif

#endif /* FEEDSCOPE_C_H */
