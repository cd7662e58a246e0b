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

/* A caller checks feedscope_abi_version() against the version it was written for, before it
 * binds any other function. 2 added feedscope_loader_settings and the options pin_memory,
 * prefetch_factor and persistent_workers. */
#define FEEDSCOPE_C_ABI_VERSION 2

typedef struct feedscope_session feedscope_session;

int feedscope_abi_version(void);
const char* feedscope_last_error(void);
int64_t feedscope_now_ns(void);

/* options_json: an object with any of Session::Options' keys (report_dir, warmup, metrics_addr,
 * rank, host, sample_hz, timeseries_max_mib, batch_size, num_workers, pin_memory, prefetch_factor,
 * persistent_workers, device, print, trace_gpu, trace_max_spans); an unknown key or a wrong type
 * is an error naming it. */
feedscope_session* feedscope_session_create(const char* options_json);
/* Finishes the session if not done yet, then frees it. NULL is allowed. In a forked child (a
 * DataLoader worker holds a copy of the session) it only forgets the copy: the session's threads
 * live in the parent, which finishes it. */
void feedscope_session_destroy(feedscope_session* session);

/* The loader's settings, told after creation (the Python client's wrap() reads them from a torch
 * DataLoader): an object with any of num_workers, batch_size, prefetch_factor (integers),
 * pin_memory, persistent_workers (true/false). Each one given replaces the session's value, for the
 * diagnosis and report.json's config; an absent or null key changes nothing. An unknown key, a
 * wrong type or a bad value (num_workers -1) is an error naming the key and the value; then nothing
 * changes. */
int feedscope_loader_settings(feedscope_session* session, const char* settings_json);

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
