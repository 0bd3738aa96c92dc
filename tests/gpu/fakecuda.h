/* fakecuda.h - what the parts of the fake CUDA share (fakecuda.c, fakecuda-stream.c,
 * fakecuda-kernels.c). */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <pthread.h>
#include <stdint.h>

#include <cuda.h>
#include <cuda_runtime.h>

/* One lock for pinned memory, streams and events, and the condition
 * broadcast whenever a stream finishes an item or an event is reached. */
extern pthread_mutex_t fake_mu;
extern pthread_cond_t fake_progress;

int fake_env_int(const char *name, int dflt);
/* The calling thread's GPU (cudaSetDevice; FAKECUDA_DEVICES). */
int fake_current_device(void);
/* Is p in pinned host memory? */
int fake_is_pinned(uintptr_t p);
/* Does a copy touching dst and src return only when done (pageable memory)? */
int fake_pageable(const void *dst, const void *src);
/* FAKECUDA_FAIL: does this kernel launch, this event record fail? */
int fake_launch_fails(void);
int fake_record_fails(void);
/* How many allocations of world rank owner this process has open through
 * CUDA IPC (tests/gpu/gpu-shrink.c: none of a dead rank's after a shrink). */
int fake_ipc_mapped_of(int owner);
/* The references this process holds on its mapping at p (tests/gpu/ipc-fake.c). */
int fake_ipc_refs(const void *p);

/* ---- fakecuda-stream.c ---- */
/* Until every stream is idle, or secs passed: whether they all are. */
int fake_idle_within(double secs);
/* Until the work queued on every stream before the call is done (a context
 * synchronization), or secs passed: whether it is. */
int fake_sync_within(double secs);
/* fn(arg) on the stream, arg malloc()ed (NULL: out of memory) and fn's to
 * free; freed here if it cannot be queued. */
cudaError_t fake_launch_owned(cudaStream_t st, void (*fn)(void *), void *arg);
/* cuStreamWaitValue32 (GEQ) and cuStreamWriteValue32, as the library
 * fetches them (lib/cuda/device.c). */
CUresult fake_wait32(CUstream st, CUdeviceptr addr, cuuint32_t v, unsigned int flags);
CUresult fake_write32(CUstream st, CUdeviceptr addr, cuuint32_t v, unsigned int flags);
/* cuStreamGetDevice: the GPU current when the stream was made. */
CUresult fake_stream_device(CUstream st, CUdevice *dev);

#endif
