//===- EmbeddingGradOrder.h - the scatter-add's order -----------*- C++ -*-===//
//
// Private to the runtime: the scatter-add of train.embedding_grad
// (train-decompose{embedding-kernel}, docs/Embedding.md). Each table row's
// gradient is the sum of the gradient rows of the tokens whose id names it,
// accumulated in f32 in a fixed order and rounded once:
//
//   1. tokens are cut into chunks of kChunk; for each chunk and id, the
//      chunk's first token of that id sums the chunk's rows of that id in
//      token order into `partial` (its own row of a [tokens, width] f32
//      scratch);
//   2. each id's first token sums its chunks' partials in chunk order into
//      the table row, every other row being zero.
//
// So the result does not depend on scheduling (no atomics), a frequent id
// costs one chunk's serial walk plus one partial a chunk instead of a walk
// over all its tokens, and the CPU version (HostEmbeddingGrad.cpp), which
// adds in the same order, gives the CUDA one's (EmbeddingGrad.cu) bits. Ids
// outside [0, rows) add nothing.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EMBEDDINGGRADORDER_H
#define LOOM_RUNTIME_EMBEDDINGGRADORDER_H

#include <cstdint>

namespace loom::embedding {

/// Tokens a first-pass chunk covers (one CUDA block's tile of ids).
constexpr int64_t kChunk = 256;

} // namespace loom::embedding

#endif // LOOM_RUNTIME_EMBEDDINGGRADORDER_H
