/*===- loomrt.h - Loom's runtime, C ABI ----------------------------*- C -*-===*
 *
 * What compiled training steps and the trainer main call. A backend (MPI on
 * CPU, libloomrt_mpi; NCCL on CUDA GPUs, libloomrt_cuda) is chosen at link
 * time by linking its library; all its state lives in one context object the
 * backend owns, so two backends can be built side by side.
 *
 * Collectives run on one communication thread per process, in issue order:
 * the in-order stream the scheduler's simulator models. A start enqueues and
 * returns a handle at once; the collective progresses while compute runs;
 * a wait blocks until it is done, at most LOOMRT_TIMEOUT_S seconds (default
 * 300), then aborts every rank with a message instead of hanging.
 *
 *===----------------------------------------------------------------------===*/

#ifndef LOOM_RUNTIME_LOOMRT_H
#define LOOM_RUNTIME_LOOMRT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Collective kinds and reductions: the numbering of coll::CollectiveKind and
 * coll::ReductionKind. */
enum { LOOMRT_ALL_GATHER = 0, LOOMRT_REDUCE_SCATTER = 1, LOOMRT_ALL_REDUCE = 2,
       LOOMRT_BROADCAST = 3, LOOMRT_SEND = 4, LOOMRT_RECV = 5 };
enum { LOOMRT_SUM = 0, LOOMRT_AVG = 1, LOOMRT_MAX = 2, LOOMRT_MIN = 3 };
/* Element types. The MPI backend reduces bf16 in f32 and rounds once;
 * the CUDA backend passes ncclBfloat16 to NCCL. */
enum { LOOMRT_F32 = 0, LOOMRT_F64 = 1, LOOMRT_BF16 = 2 };
/* The communicator handle of every rank the launcher started. */
enum { LOOMRT_COMM_WORLD = 0 };

/* Process set-up from the launcher's environment (mpirun). Returns 0, or
 * prints why and returns non-zero. */
int loomrt_init(int *argc, char ***argv);
/* Drains the stream, writes the trace (loomrt_trace_to) and shuts the
 * backend down. Returns 0, or prints why the trace could not be written and
 * returns non-zero. */
int loomrt_finalize(void);
int64_t loomrt_rank(void);
int64_t loomrt_world_size(void);
/* Prints `message` prefixed with the rank and ends every rank with exit
 * status 1. Never returns. */
void loomrt_abort(const char *message);

/* Called by compiled code (coll.comm_group). The handle of this rank's group
 * of `size` ranks `stride` apart in communicator `parent` (numbered as
 * loom/Runtime/CommGroups.h says). The first call for a group makes its
 * communicator, with the group's other ranks only (the other groups need not
 * take part); later calls return the same handle. Aborts where the parent's
 * ranks are not a multiple of size * stride. */
int64_t loomrt_comm_group(int64_t parent, int64_t size, int64_t stride);

/* Called by compiled code. Buffers are passed as addresses. `in_count` and
 * `out_count` are element counts; all collectives are over the flat,
 * rank-major layout (axis 0), among the ranks of communicator `comm`
 * (LOOMRT_COMM_WORLD or a loomrt_comm_group handle). `arg` is the root of a
 * broadcast, or the peer of a send or receive, a rank in `comm`; for those
 * two `reduction` is the message's tag, which the receiver checks (messages
 * between two ranks are matched in the order they are started), and a
 * receive's `in` is 0. `op_id` is the start's op id (trainer-stamp-op-ids;
 * -1 for none), which a profile files the collective's time under. */
int64_t loomrt_coll_start(int64_t kind, int64_t reduction, int64_t dtype,
                          int64_t comm, int64_t arg, int64_t in,
                          int64_t in_count, int64_t out, int64_t out_count,
                          int64_t op_id);
/* Blocks until the collective `handle` is done. `in` and `out` must be the
 * buffers it started with (checked). */
void loomrt_coll_wait(int64_t handle, int64_t in, int64_t out);

/* Trainer-side helpers, called between steps (the stream is idle). */
void loomrt_barrier(void);
/* Element-wise over ranks into every rank's `out`: sum (op 0) or max
 * (op 2) of f64 values. */
void loomrt_allreduce_f64(const double *in, double *out, int64_t count,
                          int64_t op);
/* Gathers `count` floats from every rank into `out` (rank-major) on rank
 * `root` only. */
void loomrt_gather_f32(const float *in, int64_t count, float *out,
                       int64_t root);

/* Profiling (trainer --profile). Compiled steps bracket each op's work
 * with loomrt_op_begin and loomrt_op_end (trainer-profile-probes), and
 * name the ops fused into a bracketed one with loomrt_op_fused; these
 * return at once unless a profile is being recorded. The CPU backend
 * times a bracket with its clock, the CUDA backend with events on the
 * compute stream. */
void loomrt_op_begin(int64_t op_id);
void loomrt_op_end(int64_t op_id);
void loomrt_op_fused(int64_t member_id, int64_t op_id);
/* Starts recording (again, from nothing): op times, and each collective's
 * time from its start to its end on the stream. */
void loomrt_profile_start(void);
/* Ends a profiled step that took `step_us` (after loomrt_step_sync). */
void loomrt_profile_step(double step_us);
/* Every rank calls it: writes the recording, averaged over the profiled
 * steps and over the ranks, as JSON (CostModel.h's Profile) to `path` on
 * rank 0, atomically and durably. Returns 0, or prints why and returns
 * non-zero on every rank. */
int loomrt_profile_write(const char *path);

/* Microseconds since loomrt_init. */
double loomrt_now_us(void);

/* Communication statistics since the last call: busy time of the stream,
 * time the caller spent blocked in waits, the number of collectives, and
 * the most heap one collective took on the communication thread (MPI's
 * temporaries, bf16 widening; 0 on the CUDA backend). */
typedef struct {
  double comm_us;
  double exposed_us;
  int64_t collectives;
  int64_t scratch_bytes;
} loomrt_stats;
loomrt_stats loomrt_take_stats(void);

/* Records every collective and every stalled wait from now on, and writes
 * them as a Chrome trace (chrome://tracing, Perfetto) to `path` at
 * loomrt_finalize. Pass NULL to stop. */
void loomrt_trace_to(const char *path);
/* Adds a named interval on the compute track of the trace. */
void loomrt_trace_span(const char *name, double begin_us, double end_us);

/* Where the step's arguments and results live. The MPI backend returns NULL
 * from loomrt_device_alloc: the trainer's host memory is the step's, and the
 * copies are never called. The CUDA backend returns device memory, and the
 * trainer copies the batch in and the loss (and checkpoints) out. */
void *loomrt_device_alloc(int64_t bytes);
void loomrt_device_free(void *device);
void loomrt_copy_to_device(void *device, const void *host, int64_t bytes);
void loomrt_copy_to_host(void *host, const void *device, int64_t bytes);
/* Returns once the step just called has finished on the device (at once on
 * the CPU, where the call itself is synchronous). A device error, or a
 * collective that does not finish within LOOMRT_TIMEOUT_S, ends every rank
 * with a message naming the operation. */
void loomrt_step_sync(void);

/* Device memory in use on this rank's GPU beyond what its CUDA context took
 * at start-up (cudaMemGetInfo): the step's arena, the trainer's buffers,
 * cuBLAS's workspace, NCCL's buffers and the loaded kernels. -1 on the MPI
 * backend. The measured side of "device memory against the plan". */
int64_t loomrt_device_used_bytes(void);

/* The device memory the CUDA backend holds beside the step's plan and the
 * trainer's buffers, by name (-1 each on the MPI backend): the workspace it
 * gives cuBLAS (a fixed size, so cuBLAS allocates none of its own), the
 * kernel modules loaded so far, and NCCL's communicator (made at the first
 * collective). Named lines beside the plan in the trainer's log. */
typedef struct {
  int64_t cublas_workspace;
  int64_t modules;
  int64_t nccl;
} loomrt_device_lines;
loomrt_device_lines loomrt_device_named_bytes(void);

/* Matmuls (convert-linalg-to-blas). CBLAS's row-major arguments (order 101;
 * 111 no transpose, 112 transpose), C = alpha op(A) op(B) + beta C; the
 * batched forms run `count` such GEMMs, the i-th on A + i * stride_a, B +
 * i * stride_b and C + i * stride_c (strides in elements; A's and B's may be
 * 0). The MPI backend defines the batched forms over CBLAS; the CUDA backend
 * defines all four over cuBLAS on its compute stream. */
void loomrt_cblas_sgemm_batched(int32_t order, int32_t trans_a,
                                int32_t trans_b, int32_t m, int32_t n,
                                int32_t k, float alpha, const float *a,
                                int32_t lda, int64_t stride_a, const float *b,
                                int32_t ldb, int64_t stride_b, float beta,
                                float *c, int32_t ldc, int64_t stride_c,
                                int32_t count);
void loomrt_cblas_dgemm_batched(int32_t order, int32_t trans_a,
                                int32_t trans_b, int32_t m, int32_t n,
                                int32_t k, double alpha, const double *a,
                                int32_t lda, int64_t stride_a, const double *b,
                                int32_t ldb, int64_t stride_b, double beta,
                                double *c, int32_t ldc, int64_t stride_c,
                                int32_t count);
void loomrt_cublas_sgemm(int32_t order, int32_t trans_a, int32_t trans_b,
                         int32_t m, int32_t n, int32_t k, float alpha,
                         const float *a, int32_t lda, const float *b,
                         int32_t ldb, float beta, float *c, int32_t ldc);
void loomrt_cublas_dgemm(int32_t order, int32_t trans_a, int32_t trans_b,
                         int32_t m, int32_t n, int32_t k, double alpha,
                         const double *a, int32_t lda, const double *b,
                         int32_t ldb, double beta, double *c, int32_t ldc);
void loomrt_cublas_sgemm_batched(int32_t order, int32_t trans_a,
                                 int32_t trans_b, int32_t m, int32_t n,
                                 int32_t k, float alpha, const float *a,
                                 int32_t lda, int64_t stride_a,
                                 const float *b, int32_t ldb, int64_t stride_b,
                                 float beta, float *c, int32_t ldc,
                                 int64_t stride_c, int32_t count);
void loomrt_cublas_dgemm_batched(int32_t order, int32_t trans_a,
                                 int32_t trans_b, int32_t m, int32_t n,
                                 int32_t k, double alpha, const double *a,
                                 int32_t lda, int64_t stride_a,
                                 const double *b, int32_t ldb,
                                 int64_t stride_b, double beta, double *c,
                                 int32_t ldc, int64_t stride_c, int32_t count);

/* bf16 GEMMs: A and B bf16 (the raw 16 bits), C bf16 (bgemm) or f32
 * (sbgemm), alpha and beta f32; the products accumulate in f32 and a bf16
 * C is rounded once (to nearest even). Arguments as above. The MPI backend
 * widens into f32 scratch for cblas_sgemm; the CUDA backend calls
 * cublasGemmEx / cublasGemmStridedBatchedEx with CUBLAS_COMPUTE_32F. */
#define LOOMRT_BF16_GEMMS(prefix)                                              \
  void prefix##bgemm(int32_t order, int32_t trans_a, int32_t trans_b,          \
                     int32_t m, int32_t n, int32_t k, float alpha,             \
                     const uint16_t *a, int32_t lda, const uint16_t *b,        \
                     int32_t ldb, float beta, uint16_t *c, int32_t ldc);       \
  void prefix##sbgemm(int32_t order, int32_t trans_a, int32_t trans_b,         \
                      int32_t m, int32_t n, int32_t k, float alpha,            \
                      const uint16_t *a, int32_t lda, const uint16_t *b,       \
                      int32_t ldb, float beta, float *c, int32_t ldc);         \
  void prefix##bgemm_batched(                                                  \
      int32_t order, int32_t trans_a, int32_t trans_b, int32_t m, int32_t n,   \
      int32_t k, float alpha, const uint16_t *a, int32_t lda,                  \
      int64_t stride_a, const uint16_t *b, int32_t ldb, int64_t stride_b,      \
      float beta, uint16_t *c, int32_t ldc, int64_t stride_c, int32_t count);  \
  void prefix##sbgemm_batched(                                                 \
      int32_t order, int32_t trans_a, int32_t trans_b, int32_t m, int32_t n,   \
      int32_t k, float alpha, const uint16_t *a, int32_t lda,                  \
      int64_t stride_a, const uint16_t *b, int32_t ldb, int64_t stride_b,      \
      float beta, float *c, int32_t ldc, int64_t stride_c, int32_t count);
LOOMRT_BF16_GEMMS(loomrt_cblas_)
LOOMRT_BF16_GEMMS(loomrt_cublas_)
#undef LOOMRT_BF16_GEMMS

/* Fused attention (train-fuse-attention). q and out are [batch, seq, heads,
 * dim], k and v [batch, seq, kv_heads, dim], lse and delta [batch, heads,
 * seq], all contiguous row-major f32 (device memory on the CUDA backend).
 * Query head h reads kv head h / (heads / kv_heads); with `causal`, position
 * s attends to positions <= s; scores are scale * q . k. The forward writes
 * out and each query row's log-sum-exp; the backward takes them with dout
 * and writes dq, dk and dv (summed over each kv head's query heads), using
 * delta (rowsum(dout * out)) as its workspace. Nothing of size seq x seq is
 * held. Every output is overwritten. */
void loomrt_attention_f32(const float *q, const float *k, const float *v,
                          float *out, float *lse, int64_t batch, int64_t seq,
                          int64_t heads, int64_t kv_heads, int64_t dim,
                          int32_t causal, float scale);
void loomrt_attention_grad_f32(const float *q, const float *k, const float *v,
                               const float *out, const float *lse,
                               const float *dout, float *dq, float *dk,
                               float *dv, float *delta, int64_t batch,
                               int64_t seq, int64_t heads, int64_t kv_heads,
                               int64_t dim, int32_t causal, float scale);
/* The same in bf16 (each element's bits as uint16_t): q, k, v, out, dout,
 * dq, dk and dv are bf16; lse and delta stay f32, and so does the
 * arithmetic (the CUDA kernels round the probabilities and their gradients
 * to bf16 for the tensor-core products; the CPU computes in f32 throughout).
 * The CUDA backend takes head dims that are multiples of 8 up to 128. */
void loomrt_attention_bf16(const uint16_t *q, const uint16_t *k,
                           const uint16_t *v, uint16_t *out, float *lse,
                           int64_t batch, int64_t seq, int64_t heads,
                           int64_t kv_heads, int64_t dim, int32_t causal,
                           float scale);
void loomrt_attention_grad_bf16(const uint16_t *q, const uint16_t *k,
                                const uint16_t *v, const uint16_t *out,
                                const float *lse, const uint16_t *dout,
                                uint16_t *dq, uint16_t *dk, uint16_t *dv,
                                float *delta, int64_t batch, int64_t seq,
                                int64_t heads, int64_t kv_heads, int64_t dim,
                                int32_t causal, float scale);

/* The fused loss's row kernels (train-decompose{loss-kernels}), on one
 * chunk of `rows` tokens: logits are [rows, vocab] f32 before the soft-cap
 * (softcap 0: none), labels [rows] i32, lse, loss and weights [rows] f32.
 * The forward writes each row's log-sum-exp and loss (0 for ignore_index,
 * NaN for a label outside [0, vocab)), with label smoothing over `vocab`
 * and PaLM's z-loss. The backward writes the gradient of columns
 * [column_offset, column_offset + vocab) of a total_vocab-wide loss,
 * weights[r] * (p (1 + 2 z lse) - (1 - ls) [col == label] - ls /
 * total_vocab) times 1 - tanh^2 under a soft-cap: the f32 form in place over
 * the logits it reads from `grad`, the bf16 form rounded into `grad` (each
 * element's bits as uint16_t). Every output is overwritten. */
void loomrt_cross_entropy_f32(const float *logits, const int32_t *labels,
                              float *lse, float *loss, int64_t rows,
                              int64_t vocab, int64_t ignore_index,
                              double smoothing, double z_loss, double softcap);
void loomrt_cross_entropy_grad_f32(const int32_t *labels, const float *lse,
                                   const float *weights, float *grad,
                                   int64_t rows, int64_t vocab,
                                   int64_t column_offset, int64_t total_vocab,
                                   double smoothing, double z_loss,
                                   double softcap);
void loomrt_cross_entropy_grad_bf16(const float *logits, const int32_t *labels,
                                    const float *lse, const float *weights,
                                    uint16_t *grad, int64_t rows, int64_t vocab,
                                    int64_t column_offset, int64_t total_vocab,
                                    double smoothing, double z_loss,
                                    double softcap);

/* The embedding gradient's scatter-add (train-decompose{embedding-kernel}):
 * table[r] = the sum of grad[t] over the tokens t with ids[t] == r, for ids
 * [tokens] i32, grad [tokens, width] and table [rows, width]; every table
 * element is written (zero for rows no token names), ids outside [0, rows)
 * add nothing. Sums are f32 in a fixed order, whatever the backend, and
 * rounded once (bf16: each element's bits as uint16_t); partial is a
 * [tokens, width] f32 scratch. */
void loomrt_embedding_grad_f32(const int32_t *ids, const float *grad,
                               float *table, float *partial, int64_t tokens,
                               int64_t rows, int64_t width);
void loomrt_embedding_grad_bf16(const int32_t *ids, const uint16_t *grad,
                                uint16_t *table, float *partial, int64_t tokens,
                                int64_t rows, int64_t width);

/* Host memory the compiled step allocates (its arena, and anything
 * bufferisation allocated outside the plan): loomc lowers memref.alloc and
 * memref.dealloc to the _mlir_memref_to_llvm_* functions, which libloomtrainer
 * defines and counts (on the CUDA target: the device memory the step
 * allocates through mgpuMemAlloc, counted the same way). Bytes allocated now, and the most since the last
 * loomrt_host_reset_peak. */
int64_t loomrt_host_bytes(void);
int64_t loomrt_host_peak_bytes(void);
void loomrt_host_reset_peak(void);

/* Every heap allocation of the trainer process (libloomtrainer defines
 * malloc and its relatives over glibc's): the step's, the runtime's scratch,
 * BLAS's and MPI's. Bytes in use now (malloc_usable_size), and the most
 * since the last loomrt_heap_reset_peak. */
int64_t loomrt_heap_bytes(void);
int64_t loomrt_heap_peak_bytes(void);
void loomrt_heap_reset_peak(void);
/* The same for the blocks the calling thread allocated (and has not freed,
 * on whichever thread); on a thread not named, for every such thread's. */
int64_t loomrt_heap_thread_bytes(void);
int64_t loomrt_heap_thread_peak_bytes(void);
void loomrt_heap_thread_reset_peak(void);
/* Names the calling thread (the trainer's compute thread, the backend's
 * communication thread): each is measured on its own. What every other
 * thread holds (threads MPI and BLAS start for themselves) is counted
 * together: in use now, and the most since loomrt_heap_other_reset_peak.
 * A block stays on the line that allocated it until it is freed, by any
 * thread, so the lines partition the heap. */
void loomrt_heap_name_thread(void);
int64_t loomrt_heap_other_bytes(void);
int64_t loomrt_heap_other_peak_bytes(void);
void loomrt_heap_other_reset_peak(void);
/* Between begin and end (scopes nest), a named thread's allocations are
 * counted on the scope's line too: the runtime's bookkeeping (the
 * collectives' tables loomrt_coll_start and wait keep), the runtime
 * kernels' scratch (attention's score blocks, bf16 widening) and the
 * trainer's own between steps (its batches, its log, stdio's buffers). In
 * use now, and the most since the reset. */
typedef enum {
  LOOMRT_HEAP_RUNTIME = 0,
  LOOMRT_HEAP_KERNELS = 1,
  LOOMRT_HEAP_TRAINER = 2,
} loomrt_heap_scope;
void loomrt_heap_scope_begin(loomrt_heap_scope scope);
void loomrt_heap_scope_end(loomrt_heap_scope scope);
int64_t loomrt_heap_scope_bytes(loomrt_heap_scope scope);
int64_t loomrt_heap_scope_peak_bytes(loomrt_heap_scope scope);
void loomrt_heap_scope_reset_peak(loomrt_heap_scope scope);
/* What the first named thread (the trainer's compute thread) allocated
 * outside every scope: the step's own allocations and what the trainer and
 * the runtime do on that thread besides. In use now, and the most since the
 * reset. */
int64_t loomrt_heap_unscoped_bytes(void);
int64_t loomrt_heap_unscoped_peak_bytes(void);
void loomrt_heap_unscoped_reset_peak(void);
/* Blocks of a line other than the first named thread's that the table of
 * their owners had no room for: each is counted, when freed, on the first
 * named thread's line (0 unless that table overflowed). */
int64_t loomrt_heap_untracked_blocks(void);

/* The heap one multi-threaded BLAS call takes beyond its operands (OpenBLAS
 * allocates a job array per threaded GEMM, sized by its build's thread
 * limit), measured once on a 512^3 sgemm; 0 on the CUDA backend. The
 * trainer reports it beside the plan, which cannot know it. */
int64_t loomrt_blas_scratch_bytes(void);
/* The calling thread's bf16 GEMM widening buffers (kept across calls), in
 * bytes; 0 on the CUDA backend. */
int64_t loomrt_gemm_scratch_bytes(void);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_RUNTIME_LOOMRT_H */
