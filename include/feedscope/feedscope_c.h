/* feedscope's C ABI: the wrap API (include/feedscope/session.h) and feedscope's loader for callers that
 * cannot link C++, the Python client first (python/feedscope/__init__.py and loader.py, through
 * ctypes). No C++ type crosses it, so
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
 * prefetch_factor and persistent_workers; 3 the loader (feedscope_loader_*, feedscope_batch) and
 * the DLPack helpers; 4 feedscope_loader_autotune and the loader options num_workers/prefetch
 * "auto", max_workers, ram_budget_mib; 5 feedscope_loader_sample_costs. */
#define FEEDSCOPE_C_ABI_VERSION 5

typedef struct feedscope_session feedscope_session;

int feedscope_abi_version(void);
const char* feedscope_last_error(void);
int64_t feedscope_now_ns(void);

/* options_json: an object with any of Session::Options' keys (report_dir, warmup, metrics_addr,
 * rank, host, sample_hz, timeseries_max_mib, batch_size, num_workers, pin_memory, prefetch_factor,
 * persistent_workers, device, print, trace_gpu, gpu_trace, gpu_trace_lead, trace_max_spans); an
 * unknown key or a wrong type is an error naming it. */
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

/* --- feedscope's loader (feedscope.DataLoader) ---------------------------------------------------
 * The loader `feedscope run` uses, over the same datasets and keys. Batches come as DLPack tensors
 * (DLManagedTensor*, DLPack's unversioned ABI) that view the batch's slab, or on a GPU the copy
 * engine's device buffer: wrap each in a PyCapsule named feedscope_dltensor_name() ("dltensor") and
 * hand it to torch.utils.dlpack.from_dlpack(), which calls its deleter when the tensor dies. The
 * slab returns to the loader when the images tensor is deleted (on a GPU, the labels tensor too:
 * they share the device buffer; on the host the labels are a copy of their own), on whatever
 * thread and whenever, also after feedscope_loader_destroy.
 * Threading: the loader's calls are serialized (several threads may call; one at a time runs). */
typedef struct feedscope_loader feedscope_loader;

typedef struct feedscope_batch {
  int64_t index;  /* position within the epoch */
  int64_t epoch;
  int64_t size;   /* samples: the tensors' first dimension */
  void* images;   /* DLManagedTensor*: [size, sample shape], float32 (or uint8 for records:) */
  void* labels;   /* DLManagedTensor*: [size], int64 */
  int32_t slabs;  /* the host pool's slabs now: more than at start when the loop keeps batches */
  int32_t device_buffers; /* the copy engine's device buffers now; 0 on the host */
} feedscope_batch;

/* options_json: {"dataset": "images:DIR", ...} with run's key names (docs/python-loader.md):
 * dataset, batch_size, num_workers, pipeline (run's image_pipeline), image_size, shuffle, seed,
 * drop_last, prefetch, device, rank, world_size, bad_sample, max_bad_ratio, reduced_decode,
 * shuffle_buffer, label_key, classes, synthetic_samples, max_workers, ram_budget_mib; and
 * pin_memory, max_held_batches. num_workers and prefetch may be "auto" (docs/autotune.md). A bad
 * key or value, a dataset that cannot be opened or a device that does not exist: NULL, and the
 * last error names the key and what is allowed. The workers start loading epoch 0 at once. */
feedscope_loader* feedscope_loader_create(const char* options_json);
/* Stops and joins the workers, then frees the loader. NULL is allowed. In a forked child it only
 * forgets its copy (the workers are the parent's). */
void feedscope_loader_destroy(feedscope_loader* loader);
/* JSON: dataset, samples, shards, batches_per_epoch (null for shards), classes (names, or null),
 * num_classes, sample_shape, dtype, device, pin_memory, pin_memory_note, slabs, max_slabs,
 * slab_bytes. Owned by the loader, valid until its next describe or data_errors call. */
const char* feedscope_loader_describe(feedscope_loader* loader);
/* JSON: {bad, attempted, examples: [{index, source, message}]}: the bad samples so far. */
const char* feedscope_loader_data_errors(feedscope_loader* loader);
/* JSON: null for a loader at fixed settings; under num_workers/prefetch "auto" {num_workers,
 * prefetch (where it runs now), autotune (report.json's autotune object: moves, final, bounds),
 * lines (the console lines of the moves judged since the last call)}. Owned as describe's. */
const char* feedscope_loader_autotune(feedscope_loader* loader);
/* JSON: report.json's samples object: each sample's load time so far (load_ms: p50, p90, p99, max,
 * the slowest 1 % and 5 %'s share of load time), the slow samples, the 20 slowest files (file, ms,
 * bytes, width, height, pixels, format), the loop's wait on a batch's slowest sample. Owned as
 * describe's. */
const char* feedscope_loader_sample_costs(feedscope_loader* loader);
/* Starts `epoch` (it seeds the order and the augmentation), dropping what is left of the last. */
int feedscope_loader_begin_epoch(feedscope_loader* loader, int64_t epoch);
/* The next batch of the epoch into *out: 1, or 0 at the end of the epoch, or -1 and the last error
 * (a bad sample under bad_sample fail, naming its file; bad data over max_bad_ratio; every slab
 * held by the loop past max_held_batches). Iteration may go on after an error. `stream`: on a GPU,
 * the cudaStream_t whose later work waits for the batch's copy (an event, no host sync); its device
 * buffer is reused after the work queued, when the batch is deleted, on that stream and on the
 * legacy default stream (NULL), where a batch taken on a side stream may be read. */
int feedscope_loader_next(feedscope_loader* loader, void* stream, feedscope_batch* out);
/* From now on the loader's read, decode, transform, collate (and h2d) spans join `session`'s
 * report, until the session is freed. NULL detaches. */
int feedscope_loader_attach(feedscope_loader* loader, feedscope_session* session);

/* Deletes a DLManagedTensor that no consumer took. NULL is allowed. */
void feedscope_dlpack_delete(void* tensor);
/* "dltensor": a name that lives as long as the library, for PyCapsule_New. */
const char* feedscope_dltensor_name(void);
/* A PyCapsule destructor: deletes the tensor of a capsule still named "dltensor" (one that
 * from_dlpack never consumed). It calls the running interpreter's PyCapsule_IsValid and
 * PyCapsule_GetPointer, which the caller gives once through feedscope_capsule_api: so the library
 * links no CPython. Until then it deletes nothing. */
void feedscope_capsule_destructor(void* capsule);
int feedscope_capsule_api(void* is_valid, void* get_pointer);

#ifdef __cplusplus
}
#endif

#endif /* FEEDSCOPE_C_H */
