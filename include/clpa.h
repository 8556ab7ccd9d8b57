/*
 * clpa.h — portable paged attention over OpenCL.
 *
 * clpa keeps an LLM's KV cache in fixed-size blocks (vLLM's PagedAttention),
 * shares prefixes between requests through a radix tree (SGLang's
 * RadixAttention) and runs attention for decode and prefill on any OpenCL
 * 1.2+ device: NVIDIA, AMD and Intel GPUs, and CPUs through PoCL.
 *
 * This header is the whole API, the umbrella over one header a concept:
 *   clpa_runtime.h  the context, devices, program cache, tuning, faults
 *                   (sections 1-3)
 *   clpa_attn.h     decode, prefill, merge_states, cascade decode and the
 *                   plans an engine runs per layer (sections 4-8)
 *   clpa_cache.h    the KV cache on the device and its ops: allocation,
 *                   reshape_and_cache, copy_blocks, swap_blocks
 *   clpa_xattn.h    XAttention's block-sparse estimation
 * and the host-only parts, which need no OpenCL: clpa_base.h (status
 * codes, dtypes and their host converters), clpa_codes.h (the numbers C
 * and OpenCL C share), clpa_layout.h (the paged cache's shape), clpa_kv.h
 * (block pool, sequences, batch view), clpa_radix.h (prefix cache) and
 * clpa_kvman.h (the KV manager an engine drives). Each may be included
 * alone.
 *
 * Conventions: every call returns clpa_status (clpa_base.h) and writes
 * results through pointers; a failed call writes nothing and leaves a
 * message in clpa_context_last_error() (and in clpa_last_error() for the
 * calling thread). Objects come in create/destroy pairs; destroy accepts
 * NULL. Creation takes a config struct filled by ..._config_init().
 * A cl_event a call hands back (through an `event` pointer) belongs to the
 * caller, who releases it with clReleaseEvent.
 *
 * Threads: any thread may call, at the same time as others,
 * clpa_context_create, clpa_context_destroy (of different contexts),
 * clpa_devices_list, clpa_device_select, and the calls that take no
 * object (clpa_status_name, clpa_last_error — kept per thread — the
 * version and dtype helpers). clpa serialises OpenCL platform and device
 * enumeration and context/queue creation inside itself, because some
 * implementations (PoCL 3.1) crash when two threads set their devices up
 * at once. Everything else works on an object that one thread uses at a
 * time: different contexts (and the caches, pools, trees made from them)
 * may be used from different threads concurrently, one object from two
 * threads needs the caller's lock. Processes may share a binary cache
 * directory. clpa reads its environment variables (CLPA_DEVICE,
 * CLPA_NO_BINARY_CACHE, CLPA_CACHE_MAX_MB, CLPA_DECODE_MERGE,
 * CLPA_DECODE_WORK_LIST, XDG_CACHE_HOME, HOME, TMPDIR)
 * in clpa_context_create and clpa_device_select; do not setenv() while
 * another thread is inside them.
 */
#ifndef CLPA_H
#define CLPA_H

#include "clpa_attn.h"
#include "clpa_base.h"
#include "clpa_cache.h"
#include "clpa_kv.h"
#include "clpa_kvman.h"
#include "clpa_layout.h"
#include "clpa_radix.h"
#include "clpa_runtime.h"
#include "clpa_xattn.h"

#endif /* CLPA_H */
